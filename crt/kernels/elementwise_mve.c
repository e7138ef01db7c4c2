/*
 * elementwise_mve.c - kiln_add_mve_s8 and kiln_sub_mve_s8 (kernels_mve.h): int8
 * ADD and SUB of two same-shape tensors on Helium, four elements a step
 * (int32 lanes, the width of TFLite's arithmetic). Compiled to nothing
 * without MVE.
 */
#include "conv_mve.h"
#include "elementwise.h"

#if defined(KILN_MVE)

/* kiln_add_params_t's arithmetic (elementwise.h), lane by lane:
 *   a = requant((x1 + input1_offset) << left_shift, input1), b likewise,
 *   y = clamp(requant(a +/- b, output) + output_offset, activation).
 * Every multiplier is below one (shift <= 0): kiln_mve_requantize with no left
 * shift. |a|, |b| < 2^30 (the inputs' scales are at most half the common one),
 * so a +/- b fits int32, as in TFLM. */
static kiln_status_t addsub(const kiln_add_params_t *p, const kiln_dims_t *input1_dims,
                            const int8_t *input1, const kiln_dims_t *input2_dims,
                            const int8_t *input2, const kiln_dims_t *output_dims,
                            int8_t *output, int sub)
{
    if (p == NULL || input1 == NULL || input2 == NULL || output == NULL ||
        input1_dims == NULL || input2_dims == NULL || output_dims == NULL ||
        p->left_shift < 0 || p->left_shift > 22 || p->input1_offset < -127 ||
        p->input1_offset > 128 || p->input2_offset < -127 || p->input2_offset > 128 ||
        p->input1.shift > 0 || p->input1.shift < -31 || p->input2.shift > 0 ||
        p->input2.shift < -31 || p->output.shift > 0 || p->output.shift < -31 ||
        p->activation.min > p->activation.max) {
        return KILN_ERR_ARG;
    }
    const kiln_dims_t *d = output_dims;
    if (d->n < 1 || d->h < 1 || d->w < 1 || d->c < 1 ||
        input1_dims->n != d->n || input1_dims->h != d->h || input1_dims->w != d->w ||
        input1_dims->c != d->c || input2_dims->n != d->n || input2_dims->h != d->h ||
        input2_dims->w != d->w || input2_dims->c != d->c) {
        /* broadcasting: the plain kernels */
        return sub ? kiln_sub_s8(p, input1_dims, input1, input2_dims, input2, output_dims,
                                 output)
                   : kiln_add_s8(p, input1_dims, input1, input2_dims, input2, output_dims,
                                 output);
    }
    const int32_t count = d->n * d->h * d->w * d->c;
    const int32x4_t zero = vdupq_n_s32(0);
    const int32x4_t right1 = vdupq_n_s32(p->input1.shift);
    const int32x4_t right2 = vdupq_n_s32(p->input2.shift);
    const int32x4_t right_out = vdupq_n_s32(p->output.shift);
    const int32x4_t m1 = vdupq_n_s32(p->input1.multiplier);
    const int32x4_t m2 = vdupq_n_s32(p->input2.multiplier);
    const int32x4_t mo = vdupq_n_s32(p->output.multiplier);
    const int32x4_t lo = vdupq_n_s32(p->activation.min), hi = vdupq_n_s32(p->activation.max);
    const int32_t off1 = p->input1_offset, off2 = p->input2_offset;
    const int32_t off_out = p->output_offset, shift = p->left_shift;
    /* Element i is read before it is written: the output may sit on an input. */
    for (int32_t i = 0; i < count; i += 4) {
        const mve_pred16_t lanes = vctp32q((uint32_t)(count - i));
        const int32x4_t x1 = vshlq_r_s32(vaddq_n_s32(vldrbq_z_s32(input1 + i, lanes), off1),
                                         shift);
        const int32x4_t x2 = vshlq_r_s32(vaddq_n_s32(vldrbq_z_s32(input2 + i, lanes), off2),
                                         shift);
        const int32x4_t a = kiln_mve_requantize(x1, m1, zero, right1);
        const int32x4_t b = kiln_mve_requantize(x2, m2, zero, right2);
        const int32x4_t raw = sub ? vsubq_s32(a, b) : vaddq_s32(a, b);
        const int32x4_t y = vaddq_n_s32(kiln_mve_requantize(raw, mo, zero, right_out), off_out);
        vstrbq_p_s32(output + i, vminq_s32(vmaxq_s32(y, lo), hi), lanes);
    }
    return KILN_OK;
}

kiln_status_t kiln_add_mve_s8(const kiln_add_params_t *params,
                              const kiln_dims_t *input1_dims, const int8_t *input1,
                              const kiln_dims_t *input2_dims, const int8_t *input2,
                              const kiln_dims_t *output_dims, int8_t *output)
{
    return addsub(params, input1_dims, input1, input2_dims, input2, output_dims, output, 0);
}

kiln_status_t kiln_sub_mve_s8(const kiln_add_params_t *params,
                              const kiln_dims_t *input1_dims, const int8_t *input1,
                              const kiln_dims_t *input2_dims, const int8_t *input2,
                              const kiln_dims_t *output_dims, int8_t *output)
{
    return addsub(params, input1_dims, input1, input2_dims, input2, output_dims, output, 1);
}

#else

/* ISO C wants a translation unit to declare something. */
typedef int kiln_elementwise_mve_unused_t;

#endif /* KILN_MVE */
