/*
 * conv_mve.c - kiln_conv2d_mve_s8 and kiln_conv2d_mve_im2col_s8
 * (kernels_mve.h): CONV_2D as GEMM on Helium, the receptive field as its KH
 * kernel-row runs (read in place where the window lies inside the input) or
 * gathered into one compact run. Compiled to nothing without MVE, apart from
 * the buffer sizes, which the compiler's scratch sizes are tested against on
 * every target.
 */
#include "conv_mve.h"

/* A kernel row of KW * C values, rounded up to whole 16-byte groups: the stride of
 * the runs in kiln_conv2d_mve_s8's filter and scratch. */
static int32_t row16(const kiln_dims_t *filter_dims)
{
    return (filter_dims->w * filter_dims->c + 15) / 16 * 16;
}

/* Every window lies inside the input, with dilation 1 along the width. */
static int windows_inside(const kiln_conv_params_t *params, const kiln_dims_t *input_dims,
                          const kiln_dims_t *filter_dims, const kiln_dims_t *output_dims)
{
    const int32_t reach_h = (output_dims->h - 1) * params->stride.h +
                            (filter_dims->h - 1) * params->dilation.h;
    const int32_t reach_w = (output_dims->w - 1) * params->stride.w + filter_dims->w - 1;
    return params->padding.h == 0 && params->padding.w == 0 && params->dilation.w == 1 &&
           reach_h < input_dims->h && reach_w < input_dims->w;
}

int32_t kiln_conv2d_mve_s8_get_buffer_size(const kiln_conv_params_t *params,
                                           const kiln_dims_t *input_dims,
                                           const kiln_dims_t *filter_dims,
                                           const kiln_dims_t *output_dims)
{
    if (windows_inside(params, input_dims, filter_dims, output_dims)) {
        return 0;
    }
    return filter_dims->h * row16(filter_dims);
}

int32_t kiln_conv2d_mve_im2col_s8_get_buffer_size(const kiln_conv_params_t *params,
                                                  const kiln_dims_t *input_dims,
                                                  const kiln_dims_t *filter_dims,
                                                  const kiln_dims_t *output_dims)
{
    if (filter_dims->h == 1 && windows_inside(params, input_dims, filter_dims, output_dims)) {
        return 0;       /* one kernel row: the in-place run is already compact */
    }
    return filter_dims->h * filter_dims->w * filter_dims->c;
}

#if defined(KILN_MVE)

/* One receptive field into col, kernel row ky at col + ky * stride (its KW * C
 * values; the rest of a longer stride is never read), padding as the zero
 * point: with dilation 1 along the width a kernel row's in-range taps are one
 * contiguous run of the input row. */
static void im2col(int8_t *col, int32_t stride, const kiln_conv_params_t *p,
                   const kiln_dims_t *in, const int8_t *image, const kiln_dims_t *f,
                   int32_t y0, int32_t x0)
{
    const int32_t c = in->c;
    const int32_t row_bytes = f->w * c;
    const int8x16_t zp = vdupq_n_s8((int8_t)-p->input_offset);
    for (int32_t ky = 0; ky < f->h; ++ky, col += stride) {
        const int32_t iy = y0 + ky * p->dilation.h;
        if (iy < 0 || iy >= in->h) {
            kiln_mve_fill(col, zp, row_bytes);
            continue;
        }
        const int8_t *row = image + (int32_t)iy * in->w * c;
        if (p->dilation.w == 1) {
            /* taps kx in [lo, hi) read input columns x0 + kx in [0, W) */
            const int32_t lo = x0 < 0 ? kiln_min_i32(-x0, f->w) : 0;
            const int32_t hi = kiln_max_i32(lo, kiln_min_i32(f->w, in->w - x0));
            kiln_mve_fill(col, zp, lo * c);
            kiln_mve_copy(col + lo * c, row + (x0 + lo) * c, (hi - lo) * c);
            kiln_mve_fill(col + hi * c, zp, (f->w - hi) * c);
            continue;
        }
        for (int32_t kx = 0; kx < f->w; ++kx) {
            const int32_t ix = x0 + kx * p->dilation.w;
            if (ix < 0 || ix >= in->w) {
                kiln_mve_fill(col + kx * c, zp, c);
            } else {
                kiln_mve_copy(col + kx * c, row + ix * c, c);
            }
        }
    }
}

/* The geometry both kernels share, as plain values: the loops below copy it
 * into locals, which the int8 output stores cannot alias (through a pointer
 * every field would be reloaded after each store). A window is `runs` runs of
 * `len` bytes: read in place (origin rows [0, last_y], columns [0, last_x])
 * in_step apart, or gathered into col col_step apart. */
typedef struct {
    const kiln_conv_params_t *p;        /* for im2col */
    const kiln_dims_t *in, *f;
    int8_t *col;
    int32_t runs, len, col_step, in_step, last_y, last_x, block_bytes;
    int32_t in_w, in_c, in_image, out_n, out_h, out_w, out_c;
    int32_t stride_h, stride_w, pad_h, pad_w, offset, act_min, act_max;
} geometry_t;

/* The first run of the window at (y0, x0) of `image` and the step between runs. */
KILN_MVE_INLINE const int8_t *window(const geometry_t *g, const int8_t *image, int32_t y0,
                                     int32_t x0, int32_t *step)
{
    if (y0 >= 0 && y0 <= g->last_y && x0 >= 0 && x0 <= g->last_x) {
        *step = g->in_step;
        return image + (y0 * g->in_w + x0) * g->in_c;
    }
    im2col(g->col, g->col_step, g->p, g->in, image, g->f, y0, x0);
    *step = g->col_step;
    return g->col;
}

/* One block of four channels: its requantization kept in registers. */
KILN_MVE_INLINE int32x4_t block_output(int32x4_t acc, int32x4_t bias, int32x4_t mult,
                                       int32x4_t left, int32x4_t neg_right, int32_t offset,
                                       int32x4_t lo, int32x4_t hi)
{
    const int32x4_t v = kiln_mve_requantize(vaddq_s32(acc, bias), mult, left, neg_right);
    return vminq_s32(vmaxq_s32(vaddq_n_s32(v, offset), lo), hi);
}

/* Channel blocks outside, pixels inside: a block's filter rows and requantization
 * stay hot while every pixel passes (a window cut by padding is gathered again for
 * every block: few pixels). `one_run` specializes the 1x1 case. */
KILN_MVE_INLINE void conv_rows(const geometry_t *gp, const kiln_mve_quant4_t *quant,
                               const int8_t *input, const int8_t *filter, int8_t *output,
                               int one_run)
{
    const geometry_t g = *gp;
    const int32x4_t lo = vdupq_n_s32(g.act_min), hi = vdupq_n_s32(g.act_max);
    const int32_t out_image = g.out_h * g.out_w * g.out_c;
    for (int32_t b = 0; b < g.out_n; ++b, input += g.in_image, output += out_image) {
        const int8_t *w = filter;
        for (int32_t oc = 0; oc < g.out_c; oc += 4, w += g.block_bytes) {
            const kiln_mve_quant4_t *q = quant + oc / 4;
            const int32x4_t bias = vldrwq_s32(q->bias), mult = vldrwq_s32(q->multiplier);
            const int32x4_t left = vldrwq_s32(q->left_shift);
            const int32x4_t neg_right = vldrwq_s32(q->neg_right_shift);
            const mve_pred16_t lanes = vctp32q((uint32_t)(g.out_c - oc));
            const int whole = g.out_c - oc >= 4;
            int8_t *out = output + oc;
            for (int32_t oy = 0; oy < g.out_h; ++oy) {
                const int32_t y0 = oy * g.stride_h - g.pad_h;
                for (int32_t ox = 0; ox < g.out_w; ++ox, out += g.out_c) {
                    int32_t step;
                    const int8_t *row = window(&g, input, y0, ox * g.stride_w - g.pad_w, &step);
                    const int32x4_t acc = one_run ? kiln_mve_dot4(row, 0, 1, g.len, w)
                                                  : kiln_mve_dot4(row, step, g.runs, g.len, w);
                    const int32x4_t v = block_output(acc, bias, mult, left, neg_right,
                                                     g.offset, lo, hi);
                    if (whole) {
                        vstrbq_s32(out, v);
                    } else {
                        vstrbq_p_s32(out, v, lanes);
                    }
                }
            }
        }
    }
}

static KILN_MVE_NOINLINE void conv_rows_one(const geometry_t *g, const kiln_mve_quant4_t *quant,
                                            const int8_t *input, const int8_t *filter,
                                            int8_t *output)
{
    conv_rows(g, quant, input, filter, output, 1);
}

static KILN_MVE_NOINLINE void conv_rows_many(const geometry_t *g,
                                             const kiln_mve_quant4_t *quant,
                                             const int8_t *input, const int8_t *filter,
                                             int8_t *output)
{
    conv_rows(g, quant, input, filter, output, 0);
}

/* One run per window, every window in place (1x1 filters without padding, the
 * common pointwise layers): conv_rows without the window tests, pixels walked
 * by pointer, so the hot loop keeps its values in registers. */
static KILN_MVE_NOINLINE void conv_in_place(const geometry_t *gp, const kiln_mve_quant4_t *quant,
                                            const int8_t *input, const int8_t *filter,
                                            int8_t *output)
{
    const geometry_t g = *gp;
    const int32x4_t lo = vdupq_n_s32(g.act_min), hi = vdupq_n_s32(g.act_max);
    const int32_t out_image = g.out_h * g.out_w * g.out_c;
    const int32_t px_step = g.stride_w * g.in_c;            /* next pixel in a row */
    const int32_t row_step = g.stride_h * g.in_w * g.in_c;  /* next output row */
    /* Rows that follow on from each other (stride 1, as wide as the input: pointwise
     * layers, their pixel bands) are walked as one row. */
    const int one_row = row_step == g.out_w * px_step;
    const int32_t rows = one_row ? 1 : g.out_h;
    const int32_t cols = one_row ? g.out_h * g.out_w : g.out_w;
    for (int32_t b = 0; b < g.out_n; ++b, input += g.in_image, output += out_image) {
        const int8_t *w = filter;
        for (int32_t oc = 0; oc < g.out_c; oc += 4, w += g.block_bytes) {
            const kiln_mve_quant4_t *q = quant + oc / 4;
            const int32x4_t bias = vldrwq_s32(q->bias), mult = vldrwq_s32(q->multiplier);
            const int32x4_t left = vldrwq_s32(q->left_shift);
            const int32x4_t neg_right = vldrwq_s32(q->neg_right_shift);
            const mve_pred16_t lanes = vctp32q((uint32_t)(g.out_c - oc));
            int8_t *out = output + oc;
            const int8_t *first = input;
            for (int32_t oy = 0; oy < rows; ++oy, first += row_step) {
                const int8_t *row = first;
                for (int32_t ox = 0; ox < cols; ++ox, row += px_step, out += g.out_c) {
                    const int32x4_t v = block_output(kiln_mve_dot4(row, 0, 1, g.len, w), bias,
                                                     mult, left, neg_right, g.offset, lo, hi);
                    vstrbq_p_s32(out, v, lanes);
                }
            }
        }
    }
}

/* A block of four channels times one group x (a pixel of C <= 16 values), the four
 * filter groups at w: the sums moved into lanes 0-3 two at a time, as dot4_x3. */
KILN_MVE_INLINE int32x4_t dot4_x1(int8x16_t x, const int8_t *w)
{
    int32_t a0, a1, a2, a3;
    int32x4_t acc;
    __asm__("vldrb.8 q0, [%[w]]\n\t"
            "vmladav.s8 %[a0], %q[x], q0\n\t"
            "vldrb.8 q0, [%[w], #16]\n\t"
            "vmladav.s8 %[a1], %q[x], q0\n\t"
            "vldrb.8 q0, [%[w], #32]\n\t"
            "vmladav.s8 %[a2], %q[x], q0\n\t"
            "vldrb.8 q0, [%[w], #48]\n\t"
            "vmladav.s8 %[a3], %q[x], q0\n\t"
            "vmov %q[acc][2], %q[acc][0], %[a0], %[a2]\n\t"
            "vmov %q[acc][3], %q[acc][1], %[a1], %[a3]\n"
            : [acc] "=w"(acc), [a0] "=&Te"(a0), [a1] "=&Te"(a1), [a2] "=&Te"(a2),
              [a3] "=&Te"(a3)
            : [x] "w"(x), [w] "r"(w), "m"(*(const int8_t(*)[64])w)
            : "q0");
    return acc;
}

/* conv_in_place for one group a pixel (C <= 16: VWW's 8 -> 16 layer): a pixel is one
 * predicated load (nothing read past it) and dot4_x1, without kiln_mve_dot4's loop. */
static KILN_MVE_NOINLINE void conv_in_place_short(const geometry_t *gp,
                                                  const kiln_mve_quant4_t *quant,
                                                  const int8_t *input, const int8_t *filter,
                                                  int8_t *output)
{
    const geometry_t g = *gp;
    const int32x4_t lo = vdupq_n_s32(g.act_min), hi = vdupq_n_s32(g.act_max);
    const int32_t out_image = g.out_h * g.out_w * g.out_c;
    const int32_t px_step = g.stride_w * g.in_c;
    const int32_t row_step = g.stride_h * g.in_w * g.in_c;
    const int one_row = row_step == g.out_w * px_step;
    const int32_t rows = one_row ? 1 : g.out_h;
    const int32_t cols = one_row ? g.out_h * g.out_w : g.out_w;
    const mve_pred16_t tail = vctp8q((uint32_t)g.len);
    for (int32_t b = 0; b < g.out_n; ++b, input += g.in_image, output += out_image) {
        const int8_t *w = filter;
        for (int32_t oc = 0; oc < g.out_c; oc += 4, w += 64) {
            const kiln_mve_quant4_t *q = quant + oc / 4;
            const int32x4_t bias = vldrwq_s32(q->bias), mult = vldrwq_s32(q->multiplier);
            const int32x4_t left = vldrwq_s32(q->left_shift);
            const int32x4_t neg_right = vldrwq_s32(q->neg_right_shift);
            const mve_pred16_t lanes = vctp32q((uint32_t)(g.out_c - oc));
            int8_t *out = output + oc;
            const int8_t *first = input;
            for (int32_t oy = 0; oy < rows; ++oy, first += row_step) {
                const int8_t *row = first;
                for (int32_t ox = 0; ox < cols; ++ox, row += px_step, out += g.out_c) {
                    const int32x4_t v = block_output(dot4_x1(vldrbq_z_s8(row, tail), w), bias,
                                                     mult, left, neg_right, g.offset, lo, hi);
                    vstrbq_p_s32(out, v, lanes);
                }
            }
        }
    }
}

/* A block of four channels times a window of three runs of one group each, the runs
 * in registers: the twelve filter groups loaded with post-increment (*w moves on by
 * 192) and the sums moved into lanes 0-3 two at a time (GCC 12 spends four moves):
 * "VMOV Qd[2], Qd[0], Rt, Rt2" writes Rt into lane 0 and Rt2 into lane 2 (Rt is the
 * encoding's low-lane register; test_ops_mve's conv cases catch a swap). Accumulators
 * are even registers ("Te"). Overflow as kiln_mve_dot4. */
KILN_MVE_INLINE int32x4_t dot4_x3(int8x16_t x0, int8x16_t x1, int8x16_t x2, const int8_t **wp)
{
    const int8_t *w = *wp;
    int32_t a0, a1, a2, a3;
    int32x4_t acc;
#define KILN_DOT_GROUP(OP, A, X) \
    "vldrb.8 q0, [%[w]], #16\n\t" OP " %[" A "], %q[" X "], q0\n\t"
    __asm__("" KILN_DOT_GROUP("vmladav.s8", "a0", "x0") KILN_DOT_GROUP("vmladav.s8", "a1", "x0")
            KILN_DOT_GROUP("vmladav.s8", "a2", "x0") KILN_DOT_GROUP("vmladav.s8", "a3", "x0")
            KILN_DOT_GROUP("vmladava.s8", "a0", "x1") KILN_DOT_GROUP("vmladava.s8", "a1", "x1")
            KILN_DOT_GROUP("vmladava.s8", "a2", "x1") KILN_DOT_GROUP("vmladava.s8", "a3", "x1")
            KILN_DOT_GROUP("vmladava.s8", "a0", "x2") KILN_DOT_GROUP("vmladava.s8", "a1", "x2")
            KILN_DOT_GROUP("vmladava.s8", "a2", "x2") KILN_DOT_GROUP("vmladava.s8", "a3", "x2")
            "vmov %q[acc][2], %q[acc][0], %[a0], %[a2]\n\t"
            "vmov %q[acc][3], %q[acc][1], %[a1], %[a3]\n"
            : [acc] "=w"(acc), [a0] "=&Te"(a0), [a1] "=&Te"(a1), [a2] "=&Te"(a2),
              [a3] "=&Te"(a3), [w] "+r"(w)
            : [x0] "w"(x0), [x1] "w"(x1), [x2] "w"(x2), "m"(*(const int8_t(*)[192])w)
            : "q0");
#undef KILN_DOT_GROUP
    *wp = w;
    return acc;
}

/* One kernel row a group (KW * C <= 16: VWW's first layer, 3x3 on three channels, nine
 * values a row), pixels outside: each window's runs are loaded once a block with a
 * predicated load (nothing read past a run; the filter's zeros past len meet zeros), and
 * a block of four channels is the four VMLADAVs a run, straight-line code: kiln_mve_dot4's
 * loop and conv_rows' per-block geometry cost more than these few MACs. A window cut by
 * padding is gathered once for every block. `kh` is a constant where it matters (3). */
KILN_MVE_INLINE void conv_short(const geometry_t *gp, const kiln_mve_quant4_t *quant,
                                const int8_t *input, const int8_t *filter, int8_t *output,
                                int32_t kh)
{
    const geometry_t g = *gp;
    const mve_pred16_t tail = vctp8q((uint32_t)g.len);
    for (int32_t b = 0; b < g.out_n; ++b, input += g.in_image) {
        for (int32_t oy = 0; oy < g.out_h; ++oy) {
            const int32_t y0 = oy * g.stride_h - g.pad_h;
            for (int32_t ox = 0; ox < g.out_w; ++ox, output += g.out_c) {
                int32_t step;
                const int8_t *row = window(&g, input, y0, ox * g.stride_w - g.pad_w, &step);
                const int8_t *w = filter;
                const kiln_mve_quant4_t *q = quant;
                /* KH = 3: the window's three runs stay in registers for every block */
                const int8x16_t x0 = vldrbq_z_s8(row, tail);
                const int8x16_t x1 = kh == 3 ? vldrbq_z_s8(row + step, tail) : x0;
                const int8x16_t x2 = kh == 3 ? vldrbq_z_s8(row + 2 * step, tail) : x0;
                for (int32_t oc = 0; oc < g.out_c; oc += 4, ++q) {
                    int32x4_t acc;
                    if (kh == 3) {
                        acc = dot4_x3(x0, x1, x2, &w);
                    } else {
                        int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
                        const int8_t *x = row;
                        for (int32_t r = 0; r < kh; ++r, x += step, w += 64) {
                            const int8x16_t v = vldrbq_z_s8(x, tail);
                            a0 = vmladavaq_s8(a0, v, vldrbq_s8(w));
                            a1 = vmladavaq_s8(a1, v, vldrbq_s8(w + 16));
                            a2 = vmladavaq_s8(a2, v, vldrbq_s8(w + 32));
                            a3 = vmladavaq_s8(a3, v, vldrbq_s8(w + 48));
                        }
                        acc = kiln_mve_lanes4(a0, a1, a2, a3);
                    }
                    vstrbq_p_s32(output + oc,
                                 kiln_mve_output4(acc, q, g.offset, g.act_min, g.act_max),
                                 vctp32q((uint32_t)(g.out_c - oc)));
                }
            }
        }
    }
}

static KILN_MVE_NOINLINE void conv_short3(const geometry_t *g, const kiln_mve_quant4_t *quant,
                                          const int8_t *input, const int8_t *filter,
                                          int8_t *output)
{
    conv_short(g, quant, input, filter, output, 3);
}

static KILN_MVE_NOINLINE void conv_short_any(const geometry_t *g,
                                             const kiln_mve_quant4_t *quant,
                                             const int8_t *input, const int8_t *filter,
                                             int8_t *output)
{
    conv_short(g, quant, input, filter, output, g->runs);
}

/* Pixels outside, channel blocks inside: each window gathered once (compact). */
static KILN_MVE_NOINLINE void conv_pixels(const geometry_t *gp, const kiln_mve_quant4_t *quant,
                                          const int8_t *input, const int8_t *filter,
                                          int8_t *output)
{
    const geometry_t g = *gp;
    for (int32_t b = 0; b < g.out_n; ++b, input += g.in_image) {
        for (int32_t oy = 0; oy < g.out_h; ++oy) {
            const int32_t y0 = oy * g.stride_h - g.pad_h;
            for (int32_t ox = 0; ox < g.out_w; ++ox, output += g.out_c) {
                int32_t step;
                const int8_t *row = window(&g, input, y0, ox * g.stride_w - g.pad_w, &step);
                const int8_t *w = filter;
                const kiln_mve_quant4_t *q = quant;
                for (int32_t oc = 0; oc < g.out_c; oc += 4, w += g.block_bytes, ++q) {
                    const int32x4_t acc = kiln_mve_dot4(row, 0, 1, g.len, w);
                    vstrbq_p_s32(output + oc,
                                 kiln_mve_output4(acc, q, g.offset, g.act_min, g.act_max),
                                 vctp32q((uint32_t)(g.out_c - oc)));
                }
            }
        }
    }
}

/* Both kernels: `compact` gathers every window into one run of K = KH * KW * C
 * (the filter packed as one run), otherwise a window is KH runs of KW * C (the
 * filter packed per kernel row at a 16-byte stride), read in place when it lies
 * inside the input. */
static kiln_status_t conv2d(const kiln_context_t *ctx, const kiln_conv_params_t *params,
                            const kiln_mve_quant4_t *quant,
                            const kiln_dims_t *input_dims, const int8_t *input,
                            const kiln_dims_t *filter_dims, const int8_t *filter,
                            const kiln_dims_t *output_dims, int8_t *output, int compact)
{
    if (params == NULL || quant == NULL || input == NULL || filter == NULL || output == NULL ||
        !kiln_conv_params_valid(params) || !kiln_dims_valid(input_dims) ||
        !kiln_dims_valid(filter_dims) || !kiln_dims_valid(output_dims) ||
        filter_dims->c != input_dims->c || filter_dims->n != output_dims->c ||
        input_dims->n != output_dims->n ||
        !kiln_conv_geometry_valid(params, input_dims, filter_dims, output_dims)) {
        return KILN_ERR_ARG;
    }
    const int32_t scratch =
        compact ? kiln_conv2d_mve_im2col_s8_get_buffer_size(params, input_dims, filter_dims,
                                                            output_dims)
                : kiln_conv2d_mve_s8_get_buffer_size(params, input_dims, filter_dims,
                                                     output_dims);
    if (scratch > 0 && (ctx == NULL || ctx->buf == NULL || ctx->size < scratch)) {
        return KILN_ERR_ARG;
    }
    const int32_t run = filter_dims->w * input_dims->c;     /* one kernel row */
    geometry_t g;
    g.p = params;
    g.in = input_dims;
    g.f = filter_dims;
    g.col = scratch > 0 ? (int8_t *)ctx->buf : NULL;
    g.runs = compact ? 1 : filter_dims->h;
    g.len = compact ? filter_dims->h * run : run;
    g.col_step = compact ? run : row16(filter_dims);
    g.in_step = params->dilation.h * input_dims->w * input_dims->c;
    /* in place: dilation 1 along the width; compact, one kernel row */
    g.last_y = compact && filter_dims->h > 1
                   ? -1 : input_dims->h - 1 - (filter_dims->h - 1) * params->dilation.h;
    g.last_x = params->dilation.w == 1 ? input_dims->w - filter_dims->w : -1;
    g.block_bytes = g.runs * ((g.len + 15) / 16 * 16) * 4;
    g.in_w = input_dims->w;
    g.in_c = input_dims->c;
    g.in_image = input_dims->h * input_dims->w * input_dims->c;
    g.out_n = output_dims->n;
    g.out_h = output_dims->h;
    g.out_w = output_dims->w;
    g.out_c = output_dims->c;
    g.stride_h = params->stride.h;
    g.stride_w = params->stride.w;
    g.pad_h = params->padding.h;
    g.pad_w = params->padding.w;
    g.offset = params->output_offset;
    g.act_min = params->activation.min;
    g.act_max = params->activation.max;
    if (g.col == NULL && (g.last_y < (output_dims->h - 1) * params->stride.h ||
                          g.last_x < (output_dims->w - 1) * params->stride.w)) {
        return KILN_ERR_ARG;        /* a window beyond an unpadded input */
    }
    if (g.runs == 1 && g.col == NULL && g.len <= 16) {
        conv_in_place_short(&g, quant, input, filter, output);
    } else if (g.runs == 1 && g.col == NULL) {
        conv_in_place(&g, quant, input, filter, output);
    } else if (compact) {
        conv_pixels(&g, quant, input, filter, output);
    } else if (g.len <= 16 && g.runs == 3) {
        conv_short3(&g, quant, input, filter, output);
    } else if (g.len <= 16) {
        conv_short_any(&g, quant, input, filter, output);
    } else if (g.runs == 1) {
        conv_rows_one(&g, quant, input, filter, output);
    } else {
        conv_rows_many(&g, quant, input, filter, output);
    }
    return KILN_OK;
}

kiln_status_t kiln_conv2d_mve_s8(const kiln_context_t *ctx, const kiln_conv_params_t *params,
                                 const kiln_mve_quant4_t *quant,
                                 const kiln_dims_t *input_dims, const int8_t *input,
                                 const kiln_dims_t *filter_dims, const int8_t *filter,
                                 const kiln_dims_t *output_dims, int8_t *output)
{
    return conv2d(ctx, params, quant, input_dims, input, filter_dims, filter, output_dims,
                  output, 0);
}

kiln_status_t kiln_conv2d_mve_im2col_s8(const kiln_context_t *ctx,
                                        const kiln_conv_params_t *params,
                                        const kiln_mve_quant4_t *quant,
                                        const kiln_dims_t *input_dims, const int8_t *input,
                                        const kiln_dims_t *filter_dims, const int8_t *filter,
                                        const kiln_dims_t *output_dims, int8_t *output)
{
    return conv2d(ctx, params, quant, input_dims, input, filter_dims, filter, output_dims,
                  output, 1);
}

#endif /* KILN_MVE */
