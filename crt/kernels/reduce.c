/*
 * reduce.c - int8 MEAN, SUM and REDUCE_MAX over a canonical reduction shape
 * (see reduce.h).
 *
 * For each outer index, a block of up to KILN_REDUCE_BLOCK inner elements is
 * reduced into local accumulators: the inner loop runs over contiguous input
 * (vectorisable) and the accumulators cannot alias the output. When the last
 * input axis is reduced (inner == 1), the innermost reduced dimension is the
 * contiguous one and is summed as a plain scalar loop instead.
 */
#include "reduce.h"

#include "kiln_math.h"

#define KILN_REDUCE_BLOCK 32

/* SUM reduces with + and finishes by requantizing; MAX reduces with max and
 * finishes as is. */
typedef enum { REDUCE_SUM, REDUCE_MAX } reduce_op_t;

static kiln_status_t check_shape(const kiln_reduce_shape_t *s, const void *input,
                                 const void *output)
{
    if (s == NULL || input == NULL || output == NULL || s->inner < 1) {
        return KILN_ERR_ARG;
    }
    int64_t count = 1;
    for (int i = 0; i < 3; ++i) {
        if (s->outer[i] < 1 || s->reduce[i] < 1) {
            return KILN_ERR_ARG;
        }
        count *= s->reduce[i];
    }
    return count <= KILN_REDUCE_MAX_COUNT ? KILN_OK : KILN_ERR_ARG;
}

/* acc[j] (+)= p[j] or acc[j] = max(acc[j], p[j]) for j < n; a full block has a
 * constant trip count, which compilers unroll or vectorise. */
static void sum_run(int32_t *acc, const int8_t *p, int32_t n)
{
    if (n == KILN_REDUCE_BLOCK) {
        for (int32_t j = 0; j < KILN_REDUCE_BLOCK; ++j) {
            acc[j] += p[j];
        }
    } else {
        for (int32_t j = 0; j < n; ++j) {
            acc[j] += p[j];
        }
    }
}

static void max_run(int32_t *acc, const int8_t *p, int32_t n)
{
    if (n == KILN_REDUCE_BLOCK) {
        for (int32_t j = 0; j < KILN_REDUCE_BLOCK; ++j) {
            acc[j] = p[j] > acc[j] ? p[j] : acc[j];
        }
    } else {
        for (int32_t j = 0; j < n; ++j) {
            acc[j] = p[j] > acc[j] ? p[j] : acc[j];
        }
    }
}

/* Reduce the n inner elements starting at `base` (n <= KILN_REDUCE_BLOCK) into acc. */
static void reduce_block(const kiln_reduce_shape_t *s, reduce_op_t op, const int8_t *base,
                         int32_t n, int32_t *acc)
{
    const int32_t init = op == REDUCE_SUM ? 0 : INT8_MIN;
    for (int32_t j = 0; j < n; ++j) {
        acc[j] = init;
    }
    for (int32_t r0 = 0; r0 < s->reduce[0]; ++r0) {
        for (int32_t r1 = 0; r1 < s->reduce[1]; ++r1) {
            const int8_t *p = base + (ptrdiff_t)r0 * s->reduce_stride[0] +
                              (ptrdiff_t)r1 * s->reduce_stride[1];
            for (int32_t r2 = 0; r2 < s->reduce[2]; ++r2) {
                if (op == REDUCE_SUM) {
                    sum_run(acc, p, n);
                } else {
                    max_run(acc, p, n);
                }
                p += s->reduce_stride[2];
            }
        }
    }
}

/* inner == 1: one output; the innermost reduced dimension is walked as a scalar loop. */
static int32_t reduce_one(const kiln_reduce_shape_t *s, reduce_op_t op, const int8_t *base)
{
    int32_t acc = op == REDUCE_SUM ? 0 : INT8_MIN;
    const ptrdiff_t step = s->reduce_stride[2];
    for (int32_t r0 = 0; r0 < s->reduce[0]; ++r0) {
        for (int32_t r1 = 0; r1 < s->reduce[1]; ++r1) {
            const int8_t *p = base + (ptrdiff_t)r0 * s->reduce_stride[0] +
                              (ptrdiff_t)r1 * s->reduce_stride[1];
            if (op == REDUCE_SUM && step == 1) {
                for (int32_t r2 = 0; r2 < s->reduce[2]; ++r2) {
                    acc += p[r2];
                }
            } else if (op == REDUCE_SUM) {
                for (int32_t r2 = 0; r2 < s->reduce[2]; ++r2) {
                    acc += p[r2 * step];
                }
            } else {
                for (int32_t r2 = 0; r2 < s->reduce[2]; ++r2) {
                    acc = p[r2 * step] > acc ? p[r2 * step] : acc;
                }
            }
        }
    }
    return acc;
}

static int8_t finish(reduce_op_t op, const kiln_reduce_quant_t *q, int32_t acc)
{
    if (op == REDUCE_SUM) {
        return (int8_t)kiln_clamp(
            kiln_requantize(acc + q->bias, q->requant.multiplier, q->requant.shift) +
                q->output_offset,
            INT8_MIN, INT8_MAX);
    }
    return (int8_t)acc;
}

static kiln_status_t reduce_s8(const kiln_reduce_shape_t *s, reduce_op_t op,
                               const kiln_reduce_quant_t *q, const int8_t *input,
                               int8_t *output)
{
    const kiln_status_t status = check_shape(s, input, output);
    if (status != KILN_OK) {
        return status;
    }
    int8_t *out = output;
    for (int32_t o0 = 0; o0 < s->outer[0]; ++o0) {
        for (int32_t o1 = 0; o1 < s->outer[1]; ++o1) {
            for (int32_t o2 = 0; o2 < s->outer[2]; ++o2) {
                const int8_t *base = input + (ptrdiff_t)o0 * s->outer_stride[0] +
                                     (ptrdiff_t)o1 * s->outer_stride[1] +
                                     (ptrdiff_t)o2 * s->outer_stride[2];
                if (s->inner == 1) {
                    *out++ = finish(op, q, reduce_one(s, op, base));
                    continue;
                }
                for (int32_t c0 = 0; c0 < s->inner; c0 += KILN_REDUCE_BLOCK) {
                    const int32_t n = kiln_min_i32(KILN_REDUCE_BLOCK, s->inner - c0);
                    int32_t acc[KILN_REDUCE_BLOCK];
                    reduce_block(s, op, base + c0, n, acc);
                    for (int32_t j = 0; j < n; ++j) {
                        *out++ = finish(op, q, acc[j]);
                    }
                }
            }
        }
    }
    return KILN_OK;
}

kiln_status_t kiln_reduce_sum_requant_s8(const kiln_reduce_shape_t *shape,
                                         const kiln_reduce_quant_t *quant,
                                         const int8_t *input, int8_t *output)
{
    if (quant == NULL || quant->requant.shift < -31 || quant->requant.shift > 30 ||
        quant->bias < -(INT32_C(1) << 30) || quant->bias > (INT32_C(1) << 30)) {
        return KILN_ERR_ARG;
    }
    return reduce_s8(shape, REDUCE_SUM, quant, input, output);
}

kiln_status_t kiln_reduce_max_s8(const kiln_reduce_shape_t *shape, const int8_t *input,
                                 int8_t *output)
{
    return reduce_s8(shape, REDUCE_MAX, NULL, input, output);
}
