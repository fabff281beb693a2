/* kinds.c: the table of node kinds, generated from DT_KINDS (graph_types.h): each kind's dt_kind and its
 * name. A kind's dt_kind is dt_kind_<family>_<KIND>, defined in its family file beside this one,
 * <family>.c: a kind without one, or under another family's name, is a link error. */
#include "config.h"

#include "nn/layer.h"

#define KIND_DECL(kind, name, family) extern const dt_kind dt_kind_##family##_##kind;
DT_KINDS(KIND_DECL)
#undef KIND_DECL

#define KIND_PTR(kind, name, family) [DT_OP_##kind] = &dt_kind_##family##_##kind,
const dt_kind *const dt_kinds[DT_OP_KINDS] = {DT_KINDS(KIND_PTR)};
#undef KIND_PTR

#define KIND_NAME(kind, name, family) [DT_OP_##kind] = name,
const char *const dt_kind_names[DT_OP_KINDS] = {DT_KINDS(KIND_NAME)};
#undef KIND_NAME
