/* tbevents.h: a TensorBoard event-file writer (scalars only), with no TensorFlow or protobuf library.
 *
 * dt_tb_open creates <dir>/events.out.tfevents.<unix seconds>.<short host>.<pid>.<n> (n is 0, or the
 * next free number when that name exists) and writes the first event, {wall_time, file_version =
 * "brain.Event:2"}. dt_tb_scalar appends one event {wall_time, step, summary {value {tag,
 * simple_value}}}, which TensorBoard shows as a scalar (its loader turns simple_value into a
 * "scalars" tensor). The file is TFRecord framing around protobuf-encoded Event messages:
 *
 *     uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes | data | uint32 masked CRC-32C of data
 *     masked = ((crc >> 15) | (crc << 17)) + 0xa282ead8
 *
 * with the field numbers of tensorboard/compat/proto/event.proto and summary.proto (Event: wall_time 1
 * double, step 2 int64, file_version 3 string, summary 5; Summary: value 1; Value: tag 1, simple_value
 * 2 float). Output bytes do not depend on the host's byte order.
 *
 * Writes go through stdio: TensorBoard sees them after dt_tb_flush (or when the buffer fills), so call
 * it after each logging point you want visible. One dt_tb is used by one thread at a time; the
 * caller owns it and frees it with dt_tb_close. Errors are logged as one line naming the file.
 */
#ifndef DT_TRAIN_TBEVENTS_H
#define DT_TRAIN_TBEVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "util/crc.h" /* dt_crc32c */

typedef struct dt_tb dt_tb;

/* Creates dir when missing (one level, its parent must exist) and the events file in it, and writes
 * the file_version event. *out = the writer. DT_OK; DT_ERR_SYS (the path and strerror logged) when
 * the directory or file cannot be created or written; DT_ERR_NOMEM. *out is NULL on failure. */
int dt_tb_open(dt_tb **out, const char *dir);
/* The path of the events file (owned by w, valid until dt_tb_close). */
const char *dt_tb_path(const dt_tb *w);
/* Appends one scalar event; value is stored as float (simple_value is a float32 field).
 * DT_OK; DT_ERR_SYS on a write error; DT_ERR_NOMEM; DT_ERR_STATE when tag is NULL. */
int dt_tb_scalar(dt_tb *w, const char *tag, int64_t step, double value);
/* fflush and fsync. DT_OK or DT_ERR_SYS. */
int dt_tb_flush(dt_tb *w);
/* Flushes (an error is logged), closes and frees w. NULL is a no-op. */
void dt_tb_close(dt_tb *w);

/* The TFRecord mask of a CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8. */
uint32_t dt_crc32c_mask(uint32_t crc);

#endif
