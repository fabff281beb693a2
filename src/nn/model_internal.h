/* model_internal.h: what nn/graph.c (building), nn/model_plan.c (planning) and nn/precision.c
 * (mixed precision's planning) share besides nn/layer.h; not for other modules (they use model.h). */
#ifndef DT_NN_MODEL_INTERNAL_H
#define DT_NN_MODEL_INTERNAL_H

#include <stdint.h>

#include "nn/layer.h"
#include "nn/model.h"
#include "util/arena.h"

/* graph.c: every parameter's boff and the sizes of weights/grads and buffers from the parameters'
 * dtypes; new (zeroed) storage of those sizes, or DT_ERR_NOMEM after one line */
void dt_param_layout(dt_model *m);
int dt_param_storage(dt_model *m, void **weights, void **grads, void **buffers);

/* n values of type t at src (backend memory) as fp32 to host (graph.c) */
void dt_get_f32(const dt_backend *be, dt_dtype t, const void *src, size_t n, float *host);

/* step_io.c: the scalars block (made once) and a plan's labels and host buffer, with room for n labels */
int dt_model_plan_scalars(dt_model *m, int n);
/* profile.c: a mark (the time from the last one is the current kind's, what follows kind's); the
 * profile's memory freed */
void dt_model_prof_record(dt_model *m, int kind);
void dt_model_prof_free(dt_model *m);

/* --- mixed precision's planning (nn/precision.c) --- */

/* the types of every value (m->values[].reduced, .dtype) at the model's opt level; breaks a shared
 * gradient between values of different types (they get copies) */
void dt_prec_value_types(dt_model *m);
/* the casts of every node and of the loss (graph_types.h, dt_cast) at the model's opt level, types and
 * fused schedule: DT_OK or DT_ERR_NOMEM after one line */
int dt_prec_plan(dt_model *m);
/* bytes of m->prec_scratch for a batch of n */
size_t dt_prec_scratch_bytes(const dt_model *m, int n);

#endif
