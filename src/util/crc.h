/* crc.h: the two CRC-32s dtrain's formats use, table-driven (tables built once, thread-safe).
 *   dt_crc32   zlib's CRC-32 (reflected polynomial 0xEDB88320): the shard manifest's checksums, equal
 *              to Python's zlib.crc32; crc = 0 to start, the previous result to continue
 *   dt_crc32c  CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): TFRecord framing of TensorBoard
 *              event files; crc32c("123456789") == 0xE3069283 */
#ifndef DT_UTIL_CRC_H
#define DT_UTIL_CRC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

uint32_t dt_crc32(uint32_t crc, const void *data, size_t n);
uint32_t dt_crc32c(const void *data, size_t n);

#ifdef __cplusplus
}
#endif
#endif
