/* half.h: fp16 (IEEE binary16) and bfloat16 storage for fp32 compute.
 * float -> half and float -> bfloat16 round to nearest, ties to even; overflow gives infinity;
 * fp16 subnormals are kept; NaN stays NaN (quiet). half -> float is exact. The bulk versions use
 * the CPU's F16C instructions when it has them (the same results, checked by test_half). */
#ifndef DT_UTIL_HALF_H
#define DT_UTIL_HALF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

uint16_t dt_f32_to_f16(float f);
float dt_f16_to_f32(uint16_t h);
uint16_t dt_f32_to_bf16(float f);
float dt_bf16_to_f32(uint16_t h);

void dt_f32_to_f16_n(size_t n, const float *src, uint16_t *dst);
void dt_f16_to_f32_n(size_t n, const uint16_t *src, float *dst);
void dt_f32_to_bf16_n(size_t n, const float *src, uint16_t *dst);
void dt_bf16_to_f32_n(size_t n, const uint16_t *src, float *dst);
/* x[i] = the nearest value of the reduced type (t: 1 fp16, 2 bf16), in place: what storing x in
 * that type and reading it back gives (the CPU's mixed precision stores fp32 arrays so rounded) */
void dt_round_half(float *x, int64_t n, int bf16);
/* 1 when every x[i] is a value of the reduced type (tests) */
int dt_is_half(const float *x, int64_t n, int bf16);
/* 1 when the bulk fp16 conversions run on F16C (for the test's report) */
int dt_half_uses_f16c(void);

#ifdef __cplusplus
}
#endif
#endif
