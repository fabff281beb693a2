/* scale.h: the scaling kernel behind dt_dev_scale (device.h), in scale.cu (CUDA builds only). */
#ifndef DT_DIST_SCALE_H
#define DT_DIST_SCALE_H

#include <stddef.h>

#include "libdt/dt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Queues buf[i] *= factor for count elements of type t on `stream` (a cudaStream_t, on the current
 * device): fp32 and fp64 in their own precision, fp16 and bf16 through fp32 (rounded to nearest even
 * on the way back), integers through fp64, rounded toward zero and clamped to the type's range
 * (a NaN factor gives 0). DT_OK, or DT_ERR_CUDA after one line when the launch fails. */
int dt_dev_scale_launch(void *stream, void *buf, size_t count, dt_dtype t, double factor);

#ifdef __cplusplus
}
#endif
#endif
