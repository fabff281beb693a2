/* desc.c: the descriptor setters that nn/backend.h declares. They are shape arithmetic (the output
 * size as PyTorch computes it, and the checks that the shape makes sense), the same for every
 * backend, so they live in nn beside the model that plans with them, not in a backend: the model
 * reaches a backend only through its op table. */
#include "config.h"

#include "nn/backend.h"

int dt_conv_desc_set(dt_conv_desc *d, int n, int h, int w, int c, int oc, int kh, int kw, int sh, int sw, int ph,
                     int pw, int dh, int dw, int groups)
{
    if (n < 1 || h < 1 || w < 1 || c < 1 || oc < 1 || kh < 1 || kw < 1 || sh < 1 || sw < 1 || ph < 0 || pw < 0 ||
        dh < 1 || dw < 1 || groups < 1 || c % groups || oc % groups)
        return -1;
    int oh = (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1;
    int ow = (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
    if (h + 2 * ph < dh * (kh - 1) + 1 || w + 2 * pw < dw * (kw - 1) + 1 || oh < 1 || ow < 1)
        return -1;
    *d = (dt_conv_desc){.n = n, .h = h, .w = w, .c = c, .oc = oc, .oh = oh, .ow = ow, .kh = kh, .kw = kw,
                        .sh = sh, .sw = sw, .ph = ph, .pw = pw, .dh = dh, .dw = dw, .groups = groups, .bias = 0,
                        .dx_accumulate = 0, .ys = 0};
    return 0;
}

int dt_pool_desc_set_max(dt_pool_desc *d, int n, int h, int w, int c, int k, int s, int p)
{
    if (n < 1 || h < 1 || w < 1 || c < 1 || k < 1 || k > 16 || s < 1 || p < 0 || 2 * p > k)
        return -1;
    int oh = (h + 2 * p - k) / s + 1, ow = (w + 2 * p - k) / s + 1;
    if (h + 2 * p < k || w + 2 * p < k || oh < 1 || ow < 1)
        return -1;
    *d = (dt_pool_desc){.n = n, .h = h, .w = w, .c = c, .oh = oh, .ow = ow, .kh = k, .kw = k, .sh = s, .sw = s,
                        .ph = p, .pw = p};
    return 0;
}

int dt_pool_desc_set_adaptive(dt_pool_desc *d, int n, int h, int w, int c, int oh, int ow)
{
    if (n < 1 || h < 1 || w < 1 || c < 1 || oh < 1 || ow < 1)
        return -1;
    *d = (dt_pool_desc){.n = n, .h = h, .w = w, .c = c, .oh = oh, .ow = ow};
    return 0;
}
