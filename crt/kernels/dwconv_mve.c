/*
 * dwconv_mve.c - kiln_dwconv2d_mve_s8 (kernels_mve.h): DEPTHWISE_CONV_2D with
 * depth multiplier 1 on Helium, sixteen channels a pass (or eight of two pixels), the
 * tap pairs and the output in asm. Compiled to nothing without MVE, apart from the
 * buffer size.
 */
#include "conv_mve.h"

int32_t kiln_dwconv2d_mve_s8_get_buffer_size(const kiln_dims_t *input_dims,
                                             const kiln_dims_t *filter_dims)
{
    return 8 * filter_dims->h * filter_dims->w + input_dims->c;
}

#if defined(KILN_MVE)

/* The pair loop's asm wants four of r0-r7 for its widening loads' addresses, more
 * than an unoptimized build can spare: there the C loop runs. */
#if defined(__OPTIMIZE__)
#define KILN_DW_ASM 1
#else
#define KILN_DW_ASM 0
#endif

#if KILN_DW_ASM
/* The pieces of the tap loop's asm (accumulate_taps): eight channels of one tap (x0, w0)
 * or of a pair of taps (x0, w0 and x1, w1) as int16 products, widened into the int32
 * sums LO (even lanes) and HI (odd lanes); X and W: the address offsets of the channels
 * (", #8" and the filter's half, ", #%c[fh]", for the upper eight of sixteen). */
#define DW_TAP(X, W, LO, HI)                                                                \
    "vldrb.s16 q0, [%[x0]" X "]\n\t"                                                        \
    "vldrb.s16 q1, [%[w0]" W "]\n\t"                                                        \
    "vmul.i16 q0, q0, q1\n\t"                                                                \
    DW_WIDEN(LO, HI)
#define DW_TAP_PAIR(X, W, LO, HI)                                                           \
    "vldrb.s16 q0, [%[x0]" X "]\n\t"                                                        \
    "vldrb.s16 q1, [%[w0]" W "]\n\t"                                                        \
    "vmul.i16 q0, q0, q1\n\t"                                                                \
    "vldrb.s16 q1, [%[x1]" X "]\n\t"                                                        \
    "vldrb.s16 q2, [%[w1]" W "]\n\t"                                                        \
    "vmul.i16 q1, q1, q2\n\t"                                                                \
    "vadd.i16 q0, q0, q1\n\t"                                                                \
    DW_WIDEN(LO, HI)
#define DW_WIDEN(LO, HI)                                                                    \
    "vmovlb.s16 q1, q0\n\t"                                                                  \
    "vadd.i32 %q[" LO "], %q[" LO "], q1\n\t"                                                  \
    "vmovlt.s16 q0, q0\n\t"                                                                  \
    "vadd.i32 %q[" HI "], %q[" HI "], q0\n\t"
/* The pair loop around them: the taps' two addresses from the table, then the weights
 * a pair of taps on. */
#define DW_PAIRS_HEAD                                                                       \
    "wls lr, %[n], 2f\n"                                                                     \
    "1:\n\t"                                                                                 \
    "ldrd %[x0], %[x1], [%[tab]], #8\n\t"                                                   \
    "add %[x0], %[x0], %[base]\n\t"                                                          \
    "add %[x1], %[x1], %[base]\n\t"
#define DW_PAIRS_TAIL                                                                       \
    "add %[w0], %[w0], %[step]\n\t"                                                          \
    "add %[w1], %[w1], %[step]\n\t"                                                          \
    "le lr, 1b\n"                                                                            \
    "2:\n"
#endif

/* Requantize -> + output_offset -> clamp four lanes of sums that start at the
 * folded bias, and store them as bytes at out + offsets (VSTRB.32 scatter,
 * `pred` the lanes kept where `predicated`). */
KILN_MVE_INLINE void output4(int8_t *out, uint32x4_t offsets, int32x4_t acc,
                             const kiln_mve_quant4_t *q, const kiln_conv_params_t *p,
                             mve_pred16_t pred, int predicated)
{
    int32x4_t v = kiln_mve_requantize(acc, vldrwq_s32(q->multiplier), vldrwq_s32(q->left_shift),
                                      vldrwq_s32(q->neg_right_shift));
    v = vaddq_n_s32(v, p->output_offset);
    v = vminq_s32(vmaxq_s32(v, vdupq_n_s32(p->activation.min)), vdupq_n_s32(p->activation.max));
    if (predicated) {
        vstrbq_scatter_offset_p_s32(out, offsets, v, pred);
    } else {
        vstrbq_scatter_offset_s32(out, offsets, v);
    }
}

/* Eight channels' int16 products (or sums of two taps' products) widened into
 * their int32 sums: lo holds the even channels, hi the odd ones. */
KILN_MVE_INLINE void widen_add(int32x4_t *lo, int32x4_t *hi, int16x8_t prod)
{
    *lo = vaddq_s32(*lo, vmovlbq_s16(prod));
    *hi = vaddq_s32(*hi, vmovltq_s16(prod));
}

KILN_MVE_INLINE int16x8_t load8(const int8_t *x, mve_pred16_t pred, int predicated)
{
    return predicated ? vldrbq_z_s16(x, pred) : vldrbq_s16(x);
}

/*
 * Channels [c, c + 16) (`wide`) or [c, c + 8) (`pred` lanes of them where
 * `predicated`) of one output pixel. Tap t reads channel c at taps[t] + c (a
 * border window: a zero-point pixel where the tap is padding), or, inside the
 * input, at origin + offsets[t] + c; w is the filter's channel c of tap 0
 * (stride C per tap). VLDRB.S16 loads eight int8 into int16 lanes; VMUL.I16
 * their products, at most 2^14 in magnitude. With `pairs` (no filter value is
 * -128) a product is at most 128 * 127, so two taps' products add up in int16
 * (|sum| <= 32512) before widening (VMOVLB / VMOVLT.S16) into the int32 sums.
 * The sums are the plain kernel's (conv.h) in another order, exact.
 * Lanes: sums a / b are channels c + (0, 2, 4, 6) / c + (1, 3, 5, 7), c / d
 * the same of c + 8; quant has a block per four lanes in that order.
 */
KILN_MVE_INLINE void channels(int8_t *out, const int8_t *const *taps, const int8_t *origin,
                              const int32_t *offsets, int32_t n_taps, const int8_t *w,
                              int32_t c, int32_t stride, const kiln_mve_quant4_t *q,
                              const kiln_conv_params_t *p, mve_pred16_t pred, int predicated,
                              int border, int pairs, int wide)
{
    /* the second eight lanes' filter and quant: channels c + 8 (wide == 1), or the
     * same channels of the next pixel (wide == 2, C = 8, stride 1: its window is the
     * first one's moved by 8 bytes, its output 8 bytes on) */
    const int32_t fh = wide == 2 ? 0 : 8, qh = wide == 2 ? 0 : 2;
    int32x4_t a = vldrwq_s32(q[0].bias), b = vldrwq_s32(q[1].bias);
    int32x4_t cc = wide ? vldrwq_s32(q[qh].bias) : a, d = wide ? vldrwq_s32(q[qh + 1].bias) : a;
    int32_t t = 0;
#if KILN_DW_ASM
    if (pairs && !predicated && n_taps > 1) {
        /* Tap t's channel c at table[t] + base: offsets from origin + c inside the
         * input, or the border window's pointers from c (32-bit addresses). The
         * pairs as a low-overhead loop (GCC spends a third more on it): per pair
         * and eight channels four loads, two VMUL.I16, one VADD.I16, the widening
         * into the sums (VMOVLB / VMOVLT.S16, VADD.I32). q0-q2 are scratch; the
         * widening loads take their address in r0-r7 ("l"). */
        const int32_t *table = border ? (const int32_t *)(const void *)taps : offsets;
        const uint32_t base = border ? (uint32_t)c : (uint32_t)(uintptr_t)(origin + c);
        const int8_t *w1 = w + stride;
        const int32_t step = 2 * stride, n = n_taps / 2;
        uint32_t x0, x1;
        if (wide) {
            __asm__ volatile(DW_PAIRS_HEAD DW_TAP_PAIR("", "", "a", "b")
                             DW_TAP_PAIR(", #8", ", #%c[fh]", "c", "d") DW_PAIRS_TAIL
                             : [a] "+w"(a), [b] "+w"(b), [c] "+w"(cc), [d] "+w"(d),
                               [tab] "+r"(table), [w0] "+l"(w), [w1] "+l"(w1),
                               [x0] "=&l"(x0), [x1] "=&l"(x1)
                             : [n] "r"(n), [base] "r"(base), [step] "r"(step), [fh] "i"(fh)
                             : "lr", "q0", "q1", "q2", "memory");
        } else {
            __asm__ volatile(DW_PAIRS_HEAD DW_TAP_PAIR("", "", "a", "b") DW_PAIRS_TAIL
                             : [a] "+w"(a), [b] "+w"(b), [tab] "+r"(table), [w0] "+l"(w),
                               [w1] "+l"(w1), [x0] "=&l"(x0), [x1] "=&l"(x1)
                             : [n] "r"(n), [base] "r"(base), [step] "r"(step)
                             : "lr", "q0", "q1", "q2", "memory");
        }
        t = 2 * n;
        if (t < n_taps) {
            /* the last, odd, tap */
            x0 = (uint32_t)table[0] + base;
            if (wide) {
                __asm__ volatile(DW_TAP("", "", "a", "b") DW_TAP(", #8", ", #%c[fh]", "c", "d")
                                 : [a] "+w"(a), [b] "+w"(b), [c] "+w"(cc), [d] "+w"(d)
                                 : [x0] "l"(x0), [w0] "l"(w), [fh] "i"(fh)
                                 : "q0", "q1", "memory");
            } else {
                __asm__ volatile(DW_TAP("", "", "a", "b")
                                 : [a] "+w"(a), [b] "+w"(b)
                                 : [x0] "l"(x0), [w0] "l"(w)
                                 : "q0", "q1", "memory");
            }
            t = n_taps;
        }
    }
#endif
    if (pairs && t == 0) {
        for (; t + 1 < n_taps; t += 2, w += 2 * stride) {
            const int8_t *x0 = (border ? taps[t] : origin + offsets[t]) + c;
            const int8_t *x1 = (border ? taps[t + 1] : origin + offsets[t + 1]) + c;
            widen_add(&a, &b, vaddq_s16(vmulq_s16(load8(x0, pred, predicated),
                                                  load8(w, pred, predicated)),
                                        vmulq_s16(load8(x1, pred, predicated),
                                                  load8(w + stride, pred, predicated))));
            if (wide) {
                widen_add(&cc, &d, vaddq_s16(vmulq_s16(vldrbq_s16(x0 + 8), vldrbq_s16(w + fh)),
                                             vmulq_s16(vldrbq_s16(x1 + 8),
                                                       vldrbq_s16(w + stride + fh))));
            }
        }
    }
    for (; t < n_taps; ++t, w += stride) {
        const int8_t *x = (border ? taps[t] : origin + offsets[t]) + c;
        widen_add(&a, &b, vmulq_s16(load8(x, pred, predicated), load8(w, pred, predicated)));
        if (wide) {
            widen_add(&cc, &d, vmulq_s16(vldrbq_s16(x + 8), vldrbq_s16(w + fh)));
        }
    }
    const uint32x4_t even = vidupq_n_u32(0, 2);
#if KILN_DW_ASM
    if (!predicated) {
        /* output4's steps on each sum in turn, the lanes stored by VSTRB.32 scatters
         * (offsets 0, 2, 4, 6: even channels at out + c, odd ones at out + c + 1); q0
         * is scratch, nrs loaded twice so that one is enough */
#define KILN_DW_OUT(S, Q, O)                                                                  \
        "vldrw.32 q0, [%[q], #" Q " + 32]\n\t"                                                \
        "vshl.s32 %q[" S "], %q[" S "], q0\n\t"                                               \
        "vldrw.32 q0, [%[q], #" Q " + 16]\n\t"                                                \
        "vqrdmulh.s32 %q[" S "], %q[" S "], q0\n\t"                                           \
        "vldrw.32 q0, [%[q], #" Q " + 48]\n\t"                                                \
        "vand q0, %q[" S "], q0\n\t"                                                          \
        "vshr.s32 q0, q0, #31\n\t"                                                            \
        "vqadd.s32 %q[" S "], %q[" S "], q0\n\t"                                              \
        "vldrw.32 q0, [%[q], #" Q " + 48]\n\t"                                                \
        "vrshl.s32 %q[" S "], %q[" S "], q0\n\t"                                              \
        "vadd.i32 %q[" S "], %q[" S "], %[off]\n\t"                                           \
        "vmax.s32 %q[" S "], %q[" S "], %q[lo]\n\t"                                           \
        "vmin.s32 %q[" S "], %q[" S "], %q[hi]\n\t"                                           \
        "vstrb.32 %q[" S "], [%[" O "], %q[at]]\n\t"
        const int32x4_t lo = vdupq_n_s32(p->activation.min), hi = vdupq_n_s32(p->activation.max);
        int8_t *const o = out + c;
        if (wide == 2) {
            __asm__ volatile(KILN_DW_OUT("a", "0", "o0") KILN_DW_OUT("b", "64", "o1")
                             KILN_DW_OUT("c", "0", "o2") KILN_DW_OUT("d", "64", "o3")
                             : [a] "+w"(a), [b] "+w"(b), [c] "+w"(cc), [d] "+w"(d)
                             : [lo] "w"(lo), [hi] "w"(hi), [at] "w"(even),
                               [off] "r"(p->output_offset), [q] "r"(q), [o0] "r"(o),
                               [o1] "r"(o + 1), [o2] "r"(o + 8), [o3] "r"(o + 9)
                             : "q0", "memory");
        } else if (wide) {
            __asm__ volatile(KILN_DW_OUT("a", "0", "o0") KILN_DW_OUT("b", "64", "o1")
                             KILN_DW_OUT("c", "128", "o2") KILN_DW_OUT("d", "192", "o3")
                             : [a] "+w"(a), [b] "+w"(b), [c] "+w"(cc), [d] "+w"(d)
                             : [lo] "w"(lo), [hi] "w"(hi), [at] "w"(even),
                               [off] "r"(p->output_offset), [q] "r"(q), [o0] "r"(o),
                               [o1] "r"(o + 1), [o2] "r"(o + 8), [o3] "r"(o + 9)
                             : "q0", "memory");
        } else {
            __asm__ volatile(KILN_DW_OUT("a", "0", "o0") KILN_DW_OUT("b", "64", "o1")
                             : [a] "+w"(a), [b] "+w"(b)
                             : [lo] "w"(lo), [hi] "w"(hi), [at] "w"(even),
                               [off] "r"(p->output_offset), [q] "r"(q), [o0] "r"(o),
                               [o1] "r"(o + 1)
                             : "q0", "memory");
        }
#undef KILN_DW_OUT
        return;
    }
#endif
    const uint32x4_t odd = vaddq_n_u32(even, 1);
    mve_pred16_t pe = 0, po = 0;
    if (predicated) {
        /* lanes of channels below C: 2k < rem for the even ones, 2k + 1 < rem */
        const int32_t rem = stride - c;
        pe = vcmpltq_n_s32(vreinterpretq_s32_u32(even), rem);
        po = vcmpltq_n_s32(vreinterpretq_s32_u32(odd), rem);
    }
    output4(out + c, even, a, q, p, pe, predicated);
    output4(out + c, odd, b, q + 1, p, po, predicated);
    if (wide) {
        output4(out + c + 8, even, cc, q + qh, p, 0, 0);
        output4(out + c + 8, odd, d, q + qh + 1, p, 0, 0);
    }
}

/* Every channel of one output pixel; `border` and `pairs` as in channels. */
KILN_MVE_INLINE void pixel(int8_t *out, const int8_t *const *taps, const int8_t *origin,
                           const int32_t *offsets, int32_t n_taps, const int8_t *filter,
                           int32_t ch, const kiln_mve_quant4_t *q, const kiln_conv_params_t *p,
                           int border, int pairs)
{
    int32_t c = 0;
    for (; c + 16 <= ch; c += 16, q += 4) {
        channels(out, taps, origin, offsets, n_taps, filter + c, c, ch, q, p, 0, 0, border,
                 pairs, 1);
    }
    if (c + 8 <= ch) {
        channels(out, taps, origin, offsets, n_taps, filter + c, c, ch, q, p, 0, 0, border,
                 pairs, 0);
        c += 8;
        q += 2;
    }
    if (c < ch) {
        channels(out, taps, origin, offsets, n_taps, filter + c, c, ch, q, p,
                 vctp16q((uint32_t)(ch - c)), 1, border, pairs, 0);
    }
}

/* The output pixels of one layer; `pairs` as in channels. */
KILN_MVE_INLINE void layer(const kiln_dwconv_params_t *params, const kiln_mve_quant4_t *quant,
                           const kiln_dims_t *input_dims, const int8_t *input,
                           const kiln_dims_t *filter_dims, const int8_t *filter,
                           const kiln_dims_t *output_dims, int8_t *output,
                           const int8_t **taps, const int32_t *offsets, const int8_t *pad,
                           int pairs)
{
    const kiln_conv_params_t *p = &params->conv;
    const int32_t ch = input_dims->c;
    const int32_t n_taps = filter_dims->h * filter_dims->w;
    /* Windows with origin rows [0, last_y] and columns [0, last_x] are inside. */
    const int32_t last_y = input_dims->h - 1 - (filter_dims->h - 1) * p->dilation.h;
    const int32_t last_x = input_dims->w - 1 - (filter_dims->w - 1) * p->dilation.w;
    /* eight channels at stride 1: two inside pixels a pass (the asm pair loop) */
    const int twins = KILN_DW_ASM && pairs && ch == 8 && p->stride.w == 1 && n_taps > 1;
    for (int32_t b = 0; b < output_dims->n; ++b) {
        const int8_t *image = input + b * input_dims->h * input_dims->w * ch;
        for (int32_t oy = 0; oy < output_dims->h; ++oy) {
            const int32_t y0 = oy * p->stride.h - p->padding.h;
            for (int32_t ox = 0; ox < output_dims->w; ++ox, output += ch) {
                const int32_t x0 = ox * p->stride.w - p->padding.w;
                if (y0 >= 0 && y0 <= last_y && x0 >= 0 && x0 <= last_x) {
                    const int8_t *origin = image + (y0 * input_dims->w + x0) * ch;
                    if (twins && x0 + 1 <= last_x && ox + 1 < output_dims->w) {
                        /* this pixel and the next as the sixteen lanes */
                        channels(output, taps, origin, offsets, n_taps, filter, 0, ch, quant, p,
                                 0, 0, 0, 1, 2);
                        ++ox;
                        output += ch;
                        continue;
                    }
                    pixel(output, taps, origin, offsets, n_taps, filter, ch, quant, p, 0, pairs);
                    continue;
                }
                for (int32_t ky = 0, t = 0; ky < filter_dims->h; ++ky) {
                    const int32_t iy = y0 + ky * p->dilation.h;
                    if (iy < 0 || iy >= input_dims->h) {
                        for (int32_t kx = 0; kx < filter_dims->w; ++kx, ++t) {
                            taps[t] = pad;
                        }
                        continue;
                    }
                    const int8_t *row = image + iy * input_dims->w * ch;
                    for (int32_t kx = 0, ix = x0; kx < filter_dims->w;
                         ++kx, ++t, ix += p->dilation.w) {
                        taps[t] = ix >= 0 && ix < input_dims->w ? row + ix * ch : pad;
                    }
                }
                pixel(output, taps, image, offsets, n_taps, filter, ch, quant, p, 1, pairs);
            }
        }
    }
}

static KILN_MVE_NOINLINE void layer_pairs(const kiln_dwconv_params_t *params,
                                          const kiln_mve_quant4_t *quant,
                                          const kiln_dims_t *input_dims, const int8_t *input,
                                          const kiln_dims_t *filter_dims, const int8_t *filter,
                                          const kiln_dims_t *output_dims, int8_t *output,
                                          const int8_t **taps, const int32_t *offsets,
                                          const int8_t *pad)
{
    layer(params, quant, input_dims, input, filter_dims, filter, output_dims, output, taps,
          offsets, pad, 1);
}

static KILN_MVE_NOINLINE void layer_single(const kiln_dwconv_params_t *params,
                                           const kiln_mve_quant4_t *quant,
                                           const kiln_dims_t *input_dims, const int8_t *input,
                                           const kiln_dims_t *filter_dims, const int8_t *filter,
                                           const kiln_dims_t *output_dims, int8_t *output,
                                           const int8_t **taps, const int32_t *offsets,
                                           const int8_t *pad)
{
    layer(params, quant, input_dims, input, filter_dims, filter, output_dims, output, taps,
          offsets, pad, 0);
}

/* No filter value is -128 (the products of two taps add up in int16). Run on every
 * call (a banded layer's every band): the whole 16-byte groups as a low-overhead loop
 * of three instructions, the rest predicated (its other lanes read as 0). */
static int filter_above_min(const int8_t *filter, int32_t n)
{
    int8x16_t low = vdupq_n_s8(INT8_MAX);
    const int8_t *f = filter;
#if KILN_DW_ASM
    __asm__ volatile("wls lr, %[n], 2f\n"
                     "1:\n\t"
                     "vldrb.8 q0, [%[f]], #16\n\t"
                     "vmin.s8 %q[low], %q[low], q0\n\t"
                     "le lr, 1b\n"
                     "2:\n"
                     : [low] "+w"(low), [f] "+r"(f)
                     : [n] "r"(n / 16), "m"(*(const int8_t(*)[])filter)
                     : "lr", "q0");
#else
    for (int32_t i = 0; i < n / 16; ++i, f += 16) {
        low = vminq_s8(low, vldrbq_s8(f));
    }
#endif
    if (n % 16 != 0) {
        low = vminq_s8(low, vldrbq_z_s8(f, vctp8q((uint32_t)(n % 16))));
    }
    return vminvq_s8(INT8_MAX, low) > INT8_MIN;
}

kiln_status_t kiln_dwconv2d_mve_s8(const kiln_context_t *ctx, const kiln_dwconv_params_t *params,
                                   const kiln_mve_quant4_t *quant,
                                   const kiln_dims_t *input_dims, const int8_t *input,
                                   const kiln_dims_t *filter_dims, const int8_t *filter,
                                   const kiln_dims_t *output_dims, int8_t *output)
{
    if (params == NULL || quant == NULL || input == NULL || filter == NULL || output == NULL ||
        ctx == NULL || ctx->buf == NULL || ((uintptr_t)ctx->buf & 3u) != 0 ||
        !kiln_conv_params_valid(&params->conv) || params->depth_multiplier != 1 ||
        !kiln_dims_valid(input_dims) || !kiln_dims_valid(filter_dims) ||
        !kiln_dims_valid(output_dims) || filter_dims->n != 1 ||
        filter_dims->c != input_dims->c || output_dims->c != input_dims->c ||
        input_dims->n != output_dims->n ||
        !kiln_conv_geometry_valid(&params->conv, input_dims, filter_dims, output_dims) ||
        ctx->size < kiln_dwconv2d_mve_s8_get_buffer_size(input_dims, filter_dims)) {
        return KILN_ERR_ARG;
    }
    const kiln_conv_params_t *p = &params->conv;
    const int32_t ch = input_dims->c;
    const int32_t n_taps = filter_dims->h * filter_dims->w;
    const int8_t **taps = (const int8_t **)ctx->buf;
    int32_t *offsets = (int32_t *)ctx->buf + n_taps;
    int8_t *pad = (int8_t *)ctx->buf + 8 * n_taps;
    kiln_mve_fill(pad, vdupq_n_s8((int8_t)-p->input_offset), ch);
    for (int32_t ky = 0, t = 0; ky < filter_dims->h; ++ky) {
        for (int32_t kx = 0; kx < filter_dims->w; ++kx, ++t) {
            offsets[t] = (ky * p->dilation.h * input_dims->w + kx * p->dilation.w) * ch;
        }
    }
    if (filter_above_min(filter, n_taps * ch)) {
        layer_pairs(params, quant, input_dims, input, filter_dims, filter, output_dims, output,
                    taps, offsets, pad);
    } else {
        layer_single(params, quant, input_dims, input, filter_dims, filter, output_dims,
                     output, taps, offsets, pad);
    }
    return KILN_OK;
}

#endif /* KILN_MVE */
