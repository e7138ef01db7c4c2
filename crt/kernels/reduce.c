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
                                 const void *output, int32_t max_count)
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
    return count <= max_count ? KILN_OK : KILN_ERR_ARG;
}

/* The reduction for one element type T (int8_t, int16_t): reduce_s8 / reduce_s16. */
#define KILN_REDUCE_KERNELS(T, SUFFIX, T_MIN, T_MAX)                                            \
    /* acc[j] (+)= p[j] or acc[j] = max(acc[j], p[j]) for j < n; a full block has a                 \
     * constant trip count, which compilers unroll or vectorise. */                                 \
    static void sum_run_##SUFFIX(int32_t *acc, const T *p, int32_t n)                               \
    {                                                                                               \
        if (n == KILN_REDUCE_BLOCK) {                                                               \
            for (int32_t j = 0; j < KILN_REDUCE_BLOCK; ++j) {                                       \
                acc[j] += p[j];                                                                     \
            }                                                                                       \
        } else {                                                                                    \
            for (int32_t j = 0; j < n; ++j) {                                                       \
                acc[j] += p[j];                                                                     \
            }                                                                                       \
        }                                                                                           \
    }                                                                                               \
                                                                                                    \
    static void max_run_##SUFFIX(int32_t *acc, const T *p, int32_t n)                               \
    {                                                                                               \
        if (n == KILN_REDUCE_BLOCK) {                                                               \
            for (int32_t j = 0; j < KILN_REDUCE_BLOCK; ++j) {                                       \
                acc[j] = p[j] > acc[j] ? p[j] : acc[j];                                             \
            }                                                                                       \
        } else {                                                                                    \
            for (int32_t j = 0; j < n; ++j) {                                                       \
                acc[j] = p[j] > acc[j] ? p[j] : acc[j];                                             \
            }                                                                                       \
        }                                                                                           \
    }                                                                                               \
                                                                                                    \
    /* Reduce the n inner elements starting at `base` (n <= KILN_REDUCE_BLOCK) into acc. */         \
    static void reduce_block_##SUFFIX(const kiln_reduce_shape_t *s, reduce_op_t op, const T *base,  \
                             int32_t n, int32_t *acc)                                               \
    {                                                                                               \
        const int32_t init = op == REDUCE_SUM ? 0 : (T_MIN);                                        \
        for (int32_t j = 0; j < n; ++j) {                                                           \
            acc[j] = init;                                                                          \
        }                                                                                           \
        for (int32_t r0 = 0; r0 < s->reduce[0]; ++r0) {                                             \
            for (int32_t r1 = 0; r1 < s->reduce[1]; ++r1) {                                         \
                const T *p = base + (ptrdiff_t)r0 * s->reduce_stride[0] +                           \
                                  (ptrdiff_t)r1 * s->reduce_stride[1];                              \
                for (int32_t r2 = 0; r2 < s->reduce[2]; ++r2) {                                     \
                    if (op == REDUCE_SUM) {                                                         \
                        sum_run_##SUFFIX(acc, p, n);                                                \
                    } else {                                                                        \
                        max_run_##SUFFIX(acc, p, n);                                                \
                    }                                                                               \
                    p += s->reduce_stride[2];                                                       \
                }                                                                                   \
            }                                                                                       \
        }                                                                                           \
    }                                                                                               \
                                                                                                    \
    /* inner == 1: one output; the innermost reduced dimension is walked as a scalar loop. */       \
    static int32_t reduce_one_##SUFFIX(const kiln_reduce_shape_t *s, reduce_op_t op,                \
                                       const T *base)                                               \
    {                                                                                               \
        int32_t acc = op == REDUCE_SUM ? 0 : (T_MIN);                                               \
        const ptrdiff_t step = s->reduce_stride[2];                                                 \
        for (int32_t r0 = 0; r0 < s->reduce[0]; ++r0) {                                             \
            for (int32_t r1 = 0; r1 < s->reduce[1]; ++r1) {                                         \
                const T *p = base + (ptrdiff_t)r0 * s->reduce_stride[0] +                           \
                                  (ptrdiff_t)r1 * s->reduce_stride[1];                              \
                if (op == REDUCE_SUM && step == 1) {                                                \
                    for (int32_t r2 = 0; r2 < s->reduce[2]; ++r2) {                                 \
                        acc += p[r2];                                                               \
                    }                                                                               \
                } else if (op == REDUCE_SUM) {                                                      \
                    for (int32_t r2 = 0; r2 < s->reduce[2]; ++r2) {                                 \
                        acc += p[r2 * step];                                                        \
                    }                                                                               \
                } else {                                                                            \
                    for (int32_t r2 = 0; r2 < s->reduce[2]; ++r2) {                                 \
                        acc = p[r2 * step] > acc ? p[r2 * step] : acc;                              \
                    }                                                                               \
                }                                                                                   \
            }                                                                                       \
        }                                                                                           \
        return acc;                                                                                 \
    }                                                                                               \
                                                                                                    \
    static T finish_##SUFFIX(reduce_op_t op, const kiln_reduce_quant_t *q, int32_t acc)             \
    {                                                                                               \
        if (op == REDUCE_SUM) {                                                                     \
            return (T)kiln_clamp(                                                                   \
                kiln_requantize(acc + q->bias, q->requant.multiplier, q->requant.shift) +           \
                    q->output_offset,                                                               \
                T_MIN, T_MAX);                                                                      \
        }                                                                                           \
        return (T)acc;                                                                              \
    }                                                                                               \
                                                                                                    \
    static kiln_status_t reduce_##SUFFIX(const kiln_reduce_shape_t *s, reduce_op_t op,              \
                                         const kiln_reduce_quant_t *q, const T *input,              \
                                         T *output, int32_t max_count)                              \
    {                                                                                               \
        const kiln_status_t status = check_shape(s, input, output, max_count);                      \
        if (status != KILN_OK) {                                                                    \
            return status;                                                                          \
        }                                                                                           \
        T *out = output;                                                                            \
        for (int32_t o0 = 0; o0 < s->outer[0]; ++o0) {                                              \
            for (int32_t o1 = 0; o1 < s->outer[1]; ++o1) {                                          \
                for (int32_t o2 = 0; o2 < s->outer[2]; ++o2) {                                      \
                    const T *base = input + (ptrdiff_t)o0 * s->outer_stride[0] +                    \
                                         (ptrdiff_t)o1 * s->outer_stride[1] +                       \
                                         (ptrdiff_t)o2 * s->outer_stride[2];                        \
                    if (s->inner == 1) {                                                            \
                        *out++ = finish_##SUFFIX(op, q, reduce_one_##SUFFIX(s, op, base));          \
                        continue;                                                                   \
                    }                                                                               \
                    for (int32_t c0 = 0; c0 < s->inner; c0 += KILN_REDUCE_BLOCK) {                  \
                        const int32_t n = kiln_min_i32(KILN_REDUCE_BLOCK, s->inner - c0);           \
                        int32_t acc[KILN_REDUCE_BLOCK];                                             \
                        reduce_block_##SUFFIX(s, op, base + c0, n, acc);                            \
                        for (int32_t j = 0; j < n; ++j) {                                           \
                            *out++ = finish_##SUFFIX(op, q, acc[j]);                                \
                        }                                                                           \
                    }                                                                               \
                }                                                                                   \
            }                                                                                       \
        }                                                                                           \
        return KILN_OK;                                                                             \
    }

KILN_REDUCE_KERNELS(int8_t, s8, INT8_MIN, INT8_MAX)
KILN_REDUCE_KERNELS(int16_t, s16, INT16_MIN, INT16_MAX)

kiln_status_t kiln_reduce_sum_requant_s8(const kiln_reduce_shape_t *shape,
                                         const kiln_reduce_quant_t *quant,
                                         const int8_t *input, int8_t *output)
{
    if (quant == NULL || quant->requant.shift < -31 || quant->requant.shift > 30 ||
        quant->bias < -(INT32_C(1) << 30) || quant->bias > (INT32_C(1) << 30)) {
        return KILN_ERR_ARG;
    }
    return reduce_s8(shape, REDUCE_SUM, quant, input, output, KILN_REDUCE_MAX_COUNT);
}

kiln_status_t kiln_reduce_sum_requant_s16(const kiln_reduce_shape_t *shape,
                                          const kiln_reduce_quant_t *quant,
                                          const int16_t *input, int16_t *output)
{
    if (quant == NULL || quant->requant.shift < -31 || quant->requant.shift > 30 ||
        quant->bias < -(INT32_C(1) << 30) || quant->bias > (INT32_C(1) << 30)) {
        return KILN_ERR_ARG;
    }
    return reduce_s16(shape, REDUCE_SUM, quant, input, output, KILN_REDUCE_MAX_COUNT_S16);
}

kiln_status_t kiln_reduce_max_s8(const kiln_reduce_shape_t *shape, const int8_t *input,
                                 int8_t *output)
{
    return reduce_s8(shape, REDUCE_MAX, NULL, input, output, KILN_REDUCE_MAX_COUNT);
}
