/* image.h: decoding images into training crops (libjpeg-turbo), resizing, and the boxes of
 * torchvision's ImageNet augmentations; also what dtpack needs to check and convert images.
 *
 * Pixels are uint8 RGB, row-major, 3 bytes per pixel ("HWC"), rows packed (stride = width * 3).
 * Every function that can fail returns 0, or -1 after writing one reason (no newline) into
 * err[errlen] ("not a JPEG", "truncated: premature end of data", ...); none of them logs, so the
 * caller can name the file, shard or index. None of them allocates in the loader's path
 * (dt_jpeg_decode_box): buffers live in a dt_image_scratch that grows once and is reused. */
#ifndef DT_DATA_IMAGE_H
#define DT_DATA_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "util/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

/* a rectangle in source pixels: columns [x, x + w), rows [y, y + h) */
typedef struct dt_box {
    int x, y, w, h;
} dt_box;

/* per-thread reusable memory for decoding and resizing; zero-initialise, free with dt_image_scratch_free */
typedef struct dt_image_scratch {
    void *buf;
    size_t cap;
} dt_image_scratch;
void dt_image_scratch_free(dt_image_scratch *s);

/* what dt_image_probe found */
enum dt_image_kind {
    DT_IMAGE_JPEG_RGB,   /* a 3-component (YCbCr or RGB) JPEG: stored as it is */
    DT_IMAGE_JPEG_GRAY,  /* a 1-component JPEG: dtpack converts it to an RGB JPEG */
    DT_IMAGE_JPEG_CMYK,  /* a 4-component (CMYK/YCCK) JPEG: dtpack converts it to an RGB JPEG */
    DT_IMAGE_PNG         /* a PNG (whatever its file name says): dtpack converts it to an RGB JPEG */
};

/* Identifies the bytes by content (not by name) and decodes the whole image once to prove it is
 * intact. A corrupt-data warning from libjpeg (premature end of data, bad Huffman code, ...) counts
 * as an error here: ImageNet's truncated files decode "successfully" with a grey bottom otherwise.
 * Empty input, unknown formats, truncated or undecodable data: -1 with the reason. */
int dt_image_probe(const uint8_t *buf, size_t len, enum dt_image_kind *kind, int *w, int *h, char *err, size_t errlen);

/* Decodes a JPEG (any of the kinds above; CMYK as Adobe's inverted convention when the file has an
 * Adobe marker) or a PNG (any bit depth, palette, alpha dropped over black... composited as PIL's
 * convert("RGB") does: alpha ignored) to RGB into a malloc'd buffer *rgb the caller frees. */
int dt_image_decode_rgb(const uint8_t *buf, size_t len, uint8_t **rgb, int *w, int *h, char *err, size_t errlen);

/* Encodes RGB as a baseline JPEG (4:2:0, quality 1..100) into a malloc'd buffer the caller frees. */
int dt_jpeg_encode(const uint8_t *rgb, int w, int h, int quality, uint8_t **out, size_t *len, char *err,
                   size_t errlen);

/* Width and height from a JPEG's header (no decoding). */
int dt_jpeg_size(const uint8_t *buf, size_t len, int *w, int *h, char *err, size_t errlen);

/* The resampling filters of torchvision's InterpolationMode as PIL applies them (Image.resize), which is
 * what its Resize and RandomResizedCrop do to PIL images. Bilinear is 0, so a zeroed config keeps it.
 * All but nearest are PIL's antialiased convolutions in its 8-bit fixed point (the kernel's support
 * widens by the scale factor when shrinking): bilinear (triangle, support 1), bicubic (cubic
 * convolution a = -0.5, support 2), box (support 1/2: the mean of the covered pixels), hamming
 * (sinc times a Hamming window, support 1), lanczos (sinc times sinc(x / 3), support 3). Nearest is
 * PIL's: each output pixel is the source pixel under its centre, no filtering at all. */
enum dt_filter {
    DT_FILTER_BILINEAR = 0,
    DT_FILTER_NEAREST,
    DT_FILTER_BICUBIC,
    DT_FILTER_BOX,
    DT_FILTER_HAMMING,
    DT_FILTER_LANCZOS
};
#define DT_FILTER_COUNT 6
/* torchvision's lower-case name ("nearest", "bilinear", "bicubic", "box", "hamming", "lanczos"; also
 * "nearest-exact", which on PIL images is nearest) to an enum dt_filter; -1 for anything else */
int dt_filter_parse(const char *name);
/* the name of an enum dt_filter ("nearest" for nearest), or "?" for a value that is none */
const char *dt_filter_name(int filter);

/* Resizes RGB src (w x h) to dst (ow x oh) with filter (enum dt_filter) as PIL's Image.resize does;
 * convolutions are separable: rows, then columns. -1 for empty sizes or an unknown filter. */
int dt_image_resize(const uint8_t *src, int w, int h, uint8_t *dst, int ow, int oh, int filter,
                    dt_image_scratch *s);

/* The loader's decode: the box of the JPEG (source pixels), resized to out_w x out_h RGB with filter
 * (enum dt_filter) into out, mirrored left-right when flip: PIL's Image.crop(box).resize(size, filter).
 * Fast paths, both exact up to resampling:
 *   - DCT-domain scaling (libjpeg scale_denom 2, 4 or 8): the largest factor that still leaves the
 *     box at least out_w x out_h after scaling (bilinear); at least twice that (bicubic, lanczos,
 *     hamming), four times (box); none for nearest (jpeg.c says why);
 *   - only the box is decoded: jpeg_crop_scanline for the columns (widened to the iMCU boundary),
 *     jpeg_skip_scanlines for the rows above it, and reading stops after its last row.
 * Gray and CMYK JPEGs are converted to RGB as in dt_image_decode_rgb. A box outside the image is
 * clipped to it (an empty result is an error). Corrupt-data warnings are errors, as in dt_image_probe. */
int dt_jpeg_decode_box(const uint8_t *buf, size_t len, dt_box box, int out_w, int out_h, int filter, int flip,
                       uint8_t *out, dt_image_scratch *s, char *err, size_t errlen);

/* torchvision's RandomResizedCrop.get_params for a W x H image: up to 10 tries of an area fraction
 * uniform in [smin, smax] and a log-uniform aspect ratio in [rmin, rmax] (w = round(sqrt(area*ratio)),
 * h = round(sqrt(area/ratio)); accepted when 0 < w <= W and 0 < h <= H, at a uniform position);
 * else the centre crop of the whole image clamped to the ratio range. Draws from r only. */
dt_box dt_rrc_box(int W, int H, double smin, double smax, double rmin, double rmax, dt_rng *r);

/* Validation: the source box that torchvision's Resize(resize) (shorter side to resize) followed by
 * CenterCrop(crop) keeps, for a W x H image. Decoding that box straight to crop x crop replaces the
 * two steps with one resampling. */
dt_box dt_center_box(int W, int H, int resize, int crop);

#ifdef __cplusplus
}
#endif
#endif
