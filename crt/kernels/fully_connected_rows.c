/*
 * fully_connected_rows.c - FULLY_CONNECTED blocked several filter rows at a
 * time on packed int16 pairs (SMLAD on cores with the DSP extension, plain C
 * elsewhere), in three variants that differ in the block: two, four or eight
 * rows (kiln_fully_connected_rows2_s8, kiln_fully_connected_rows_s8,
 * kiln_fully_connected_rows8_s8). Semantics and layouts in conv.h,
 * primitives in conv_dsp.h.
 *
 * Each input row is converted once into scratch as int16 pairs (k0, k2),
 * (k1, k3) per group of four k; the filter rows were packed the same way at
 * compile time, with the filter zero point already added (w + filter_offset
 * fits int16), so the inner loop is a plain dual MAC: per group of four k,
 * one LDRD of input, then one LDRD and two SMLAD per row of the block. A
 * larger block shares the input load among more rows; the rows past the last
 * whole block take halving blocks (8: 4, 2, 1), packed in that order.
 *
 * Overflow: |sum (w + filter_offset) * x| <= 128 * sum|w + filter_offset|
 * and the folded bias adds at most |bias| + 128 * that; the compiler checks
 * that these stay below 2^31 (see fully_connected.c).
 *
 * kiln_fully_connected_rows8_p8_s8 keeps the filter int8, as row pairs
 * (conv_dsp.h), and needs no scratch: each group of four input values is
 * widened in registers (one LDR, two SXTB16) and shared by eight rows, whose
 * pair words are widened in place after their raw use: per group one LDR and
 * two SXTB16 of input, then per pair of rows one LDRD, two SXTB16 and four
 * SMLAD.
 *
 * Their per-tensor twins (kiln_fully_connected_rows8_p8_pt_s8,
 * kiln_fully_connected_rows8_pt_s8, kiln_fully_connected_rows6_pt_s8; last
 * section) run every whole block, requantization included, in one asm loop.
 */
#include "conv_dsp.h"

/* The three variants share the converted input row. */
int32_t kiln_fully_connected_rows_s8_get_buffer_size(const kiln_dims_t *filter_dims)
{
    return filter_dims == NULL ? 0 : 2 * kiln_round_up4(filter_dims->c);
}

int32_t kiln_fully_connected_rows2_s8_get_buffer_size(const kiln_dims_t *filter_dims)
{
    return kiln_fully_connected_rows_s8_get_buffer_size(filter_dims);
}

int32_t kiln_fully_connected_rows8_s8_get_buffer_size(const kiln_dims_t *filter_dims)
{
    return kiln_fully_connected_rows_s8_get_buffer_size(filter_dims);
}

/* One row of a block at one group: w points at the row's [A][B]. */
#define FC_ROW(a)                                                                \
    do {                                                                         \
        KILN_LOAD_PAIR(wa, wb, w);                                               \
        a = kiln_smlad(wa, xa, a);                                               \
        a = kiln_smlad(wb, xb, a);                                               \
    } while (0)

/*
 * Eight rows: w is the block (per group: A, B of row 0, then rows 1 .. 7).
 * Eight accumulators, the input pair, the filter pair and both pointers need
 * all fourteen registers Cortex-M has; as in conv2d_gemm.c's dot_4x2 (see
 * there why), on DSP cores the loop over pairs of groups is asm on fixed
 * registers that saves what it uses: w in r0, col in r1, the end of the row
 * in r2 and acc in r3 on entry; accumulators in r4-r11; input words in r2,
 * r3 and filter words in r12, lr.
 */
#if defined(__ARM_FEATURE_DSP)
#define FC_ROW_ASM(r)                                                            \
    "ldrd r12, lr, [r0], #8\n\t"                                                 \
    "smlad " r ", r12, r2, " r "\n\t"                                            \
    "smlad " r ", lr, r3, " r "\n\t"
#define FC_GROUP_8ROWS_ASM                                                       \
    "ldrd r2, r3, [r1], #8\n\t"                                                  \
    FC_ROW_ASM("r4") FC_ROW_ASM("r5") FC_ROW_ASM("r6") FC_ROW_ASM("r7")          \
    FC_ROW_ASM("r8") FC_ROW_ASM("r9") FC_ROW_ASM("r10") FC_ROW_ASM("r11")
#endif

/* The plain C loop of dot_8rows (on DSP cores: its last, odd group). */
static KILN_NOINLINE void dot_8rows_c(const uint32_t *w, const uint32_t *col, int32_t groups4,
                                      int32_t acc[8])
{
    uint32_t xa;
    uint32_t xb;
    uint32_t wa;
    uint32_t wb;
    int32_t a0 = acc[0];
    int32_t a1 = acc[1];
    int32_t a2 = acc[2];
    int32_t a3 = acc[3];
    int32_t a4 = acc[4];
    int32_t a5 = acc[5];
    int32_t a6 = acc[6];
    int32_t a7 = acc[7];
    for (int32_t n = groups4; n > 0; --n) {
        KILN_LOAD_PAIR(xa, xb, col);
        FC_ROW(a0);
        FC_ROW(a1);
        FC_ROW(a2);
        FC_ROW(a3);
        FC_ROW(a4);
        FC_ROW(a5);
        FC_ROW(a6);
        FC_ROW(a7);
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
    acc[4] = a4;
    acc[5] = a5;
    acc[6] = a6;
    acc[7] = a7;
}

static KILN_NOINLINE void dot_8rows(const uint32_t *w, const uint32_t *col, int32_t groups4,
                                    int32_t acc[8])
{
#if defined(__ARM_FEATURE_DSP)
    if (groups4 >= 2) {
        register const uint32_t *w_ __asm__("r0") = w;
        register const uint32_t *col_ __asm__("r1") = col;
        register const uint32_t *end_ __asm__("r2") = col + 4 * (groups4 / 2);  /* 2 a trip */
        register int32_t *acc_ __asm__("r3") = acc;
        __asm__ volatile("push {r2-r11, lr}\n\t"
                         "ldm r3, {r4-r11}\n"
                         "1:\n\t"
                         FC_GROUP_8ROWS_ASM FC_GROUP_8ROWS_ASM
                         "ldr r2, [sp]\n\t"
                         "cmp r1, r2\n\t"
                         "bne 1b\n\t"
                         "ldr r3, [sp, #4]\n\t"
                         "stm r3, {r4-r11}\n\t"
                         "pop {r2-r11, lr}"
                         : "+r"(w_), "+r"(col_)
                         : "r"(end_), "r"(acc_)
                         : "r12", "cc", "memory");  /* reads w and col, updates acc */
        w = w_;
        col = col_;
    }
    if (groups4 % 2 != 0) {
        dot_8rows_c(w, col, 1, acc);
    }
#else
    dot_8rows_c(w, col, groups4, acc);
#endif
}

/* Four rows: w is the block (per group: A, B of row 0, then rows 1, 2, 3). */
static KILN_ALWAYS_INLINE void dot_4rows(const uint32_t *w, const uint32_t *col,
                                         int32_t groups4, int32_t acc[4])
{
    int32_t a0 = acc[0];
    int32_t a1 = acc[1];
    int32_t a2 = acc[2];
    int32_t a3 = acc[3];
    uint32_t xa;
    uint32_t xb;
    uint32_t wa;
    uint32_t wb;
    for (int32_t n = groups4 / 2; n > 0; --n) {     /* two groups per trip */
        KILN_LOAD_PAIR(xa, xb, col);
        FC_ROW(a0);
        FC_ROW(a1);
        FC_ROW(a2);
        FC_ROW(a3);
        KILN_LOAD_PAIR(xa, xb, col);
        FC_ROW(a0);
        FC_ROW(a1);
        FC_ROW(a2);
        FC_ROW(a3);
    }
    if (groups4 % 2 != 0) {
        KILN_LOAD_PAIR(xa, xb, col);
        FC_ROW(a0);
        FC_ROW(a1);
        FC_ROW(a2);
        FC_ROW(a3);
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}

/* Two rows: w is the block (per group: A, B of row 0, then row 1). */
static KILN_ALWAYS_INLINE void dot_2rows(const uint32_t *w, const uint32_t *col,
                                         int32_t groups4, int32_t acc[2])
{
    int32_t a0 = acc[0];
    int32_t a1 = acc[1];
    uint32_t xa;
    uint32_t xb;
    uint32_t wa;
    uint32_t wb;
    for (int32_t n = groups4 / 2; n > 0; --n) {     /* two groups per trip */
        KILN_LOAD_PAIR(xa, xb, col);
        FC_ROW(a0);
        FC_ROW(a1);
        KILN_LOAD_PAIR(xa, xb, col);
        FC_ROW(a0);
        FC_ROW(a1);
    }
    if (groups4 % 2 != 0) {
        KILN_LOAD_PAIR(xa, xb, col);
        FC_ROW(a0);
        FC_ROW(a1);
    }
    acc[0] = a0;
    acc[1] = a1;
}

static KILN_ALWAYS_INLINE int32_t dot_1row(const uint32_t *w, const uint32_t *col,
                                           int32_t groups4, int32_t acc)
{
    uint32_t xa;
    uint32_t xb;
    uint32_t wa;
    uint32_t wb;
    for (int32_t n = groups4; n > 0; --n) {
        KILN_LOAD_PAIR(xa, xb, col);
        FC_ROW(acc);
    }
    return acc;
}
#undef FC_ROW

/* Requantizes acc[0 .. n) of rows u .. u + n - 1 into out[u ..]. */
static KILN_ALWAYS_INLINE void fc_store(const int32_t *acc, int32_t n,
                                        const kiln_requant_fast_t *quant, int32_t out_off,
                                        int32_t act_min, int32_t act_max, int8_t *out)
{
    for (int32_t j = 0; j < n; ++j) {
        out[j] = kiln_output_fast(acc[j], &quant[j], out_off, act_min, act_max, 0);
    }
}

/* Argument checks and the run of one variant; `block` (8, 4 or 2) is a
 * constant in each caller. */
static KILN_ALWAYS_INLINE kiln_status_t fc_rows(const kiln_context_t *ctx,
                                                const kiln_fc_params_t *params,
                                                const kiln_requant_fast_t *quant,
                                                const kiln_dims_t *input_dims,
                                                const int8_t *input,
                                                const kiln_dims_t *filter_dims,
                                                const int32_t *filter, const int32_t *bias,
                                                const kiln_dims_t *output_dims, int8_t *output,
                                                int32_t block)
{
    if (ctx == NULL || params == NULL || quant == NULL || input == NULL || filter == NULL ||
        bias == NULL || output == NULL ||
        !kiln_dims_valid(input_dims) || !kiln_dims_valid(filter_dims) ||
        !kiln_dims_valid(output_dims) || ((uintptr_t)filter & 3u) != 0) {
        return KILN_ERR_ARG;
    }
    if (params->input_offset < -127 || params->input_offset > 128 || params->filter_offset != 0 ||
        params->output_offset < -128 || params->output_offset > 127 ||
        params->activation.min < -128 || params->activation.min > params->activation.max ||
        params->activation.max > 127) {
        return KILN_ERR_ARG;
    }
    const int32_t depth = filter_dims->c;
    const int32_t units = filter_dims->n;
    const int32_t batches = output_dims->n;
    if (input_dims->c != depth || input_dims->n != batches || output_dims->c != units) {
        return KILN_ERR_ARG;
    }
    if (ctx->buf == NULL || ctx->size < kiln_fully_connected_rows_s8_get_buffer_size(filter_dims) ||
        ((uintptr_t)ctx->buf & 3u) != 0) {
        return KILN_ERR_ARG;
    }
    const int32_t groups4 = kiln_round_up4(depth) / 4;
    const int32_t out_off = params->output_offset;
    const int32_t act_min = params->activation.min;
    const int32_t act_max = params->activation.max;
    uint32_t *col = (uint32_t *)ctx->buf;

    for (int32_t bt = 0; bt < batches; ++bt) {
        const int8_t *row = input + (size_t)bt * (size_t)depth;
        /* The row as pairs; a partial last group is padded with zeros (the
         * packed filter is zero there too). */
        for (int32_t g = 0; g < groups4; ++g) {
            uint32_t v;
            if (4 * g + 4 <= depth) {
                v = kiln_load_s8x4(row + 4 * g);
            } else {
                int8_t tail[4] = {0, 0, 0, 0};
                memcpy(tail, row + 4 * g, (size_t)(depth - 4 * g));
                v = kiln_load_s8x4(tail);
            }
            col[2 * g] = kiln_sxtb16(v);
            col[2 * g + 1] = kiln_sxtb16_ror8(v);
        }
        int8_t *out = output + (size_t)bt * (size_t)units;
        const uint32_t *w = (const uint32_t *)filter;
        int32_t u = 0;
        if (block >= 8) {
            for (; u + 8 <= units; u += 8) {
                int32_t acc[8];
                memcpy(acc, bias + u, sizeof acc);
                dot_8rows(w, col, groups4, acc);
                w += 16 * groups4;
                fc_store(acc, 8, quant + u, out_off, act_min, act_max, out + u);
            }
        }
        if (block >= 4) {
            for (; u + 4 <= units; u += 4) {        /* rows8: at most once */
                int32_t acc[4] = {bias[u], bias[u + 1], bias[u + 2], bias[u + 3]};
                dot_4rows(w, col, groups4, acc);
                w += 8 * groups4;
                fc_store(acc, 4, quant + u, out_off, act_min, act_max, out + u);
            }
        }
        for (; u + 2 <= units; u += 2) {            /* rows8, rows4: at most once */
            int32_t acc[2] = {bias[u], bias[u + 1]};
            dot_2rows(w, col, groups4, acc);
            w += 4 * groups4;
            fc_store(acc, 2, quant + u, out_off, act_min, act_max, out + u);
        }
        if (u < units) {
            const int32_t acc = dot_1row(w, col, groups4, bias[u]);
            out[u] = kiln_output_fast(acc, &quant[u], out_off, act_min, act_max, 0);
        }
    }
    return KILN_OK;
}

kiln_status_t kiln_fully_connected_rows_s8(const kiln_context_t *ctx,
                                           const kiln_fc_params_t *params,
                                           const kiln_requant_fast_t *quant,
                                           const kiln_dims_t *input_dims, const int8_t *input,
                                           const kiln_dims_t *filter_dims, const int32_t *filter,
                                           const int32_t *bias,
                                           const kiln_dims_t *output_dims, int8_t *output)
{
    return fc_rows(ctx, params, quant, input_dims, input, filter_dims, filter, bias,
                   output_dims, output, 4);
}

kiln_status_t kiln_fully_connected_rows2_s8(const kiln_context_t *ctx,
                                            const kiln_fc_params_t *params,
                                            const kiln_requant_fast_t *quant,
                                            const kiln_dims_t *input_dims, const int8_t *input,
                                            const kiln_dims_t *filter_dims,
                                            const int32_t *filter, const int32_t *bias,
                                            const kiln_dims_t *output_dims, int8_t *output)
{
    return fc_rows(ctx, params, quant, input_dims, input, filter_dims, filter, bias,
                   output_dims, output, 2);
}

kiln_status_t kiln_fully_connected_rows8_s8(const kiln_context_t *ctx,
                                            const kiln_fc_params_t *params,
                                            const kiln_requant_fast_t *quant,
                                            const kiln_dims_t *input_dims, const int8_t *input,
                                            const kiln_dims_t *filter_dims,
                                            const int32_t *filter, const int32_t *bias,
                                            const kiln_dims_t *output_dims, int8_t *output)
{
    return fc_rows(ctx, params, quant, input_dims, input, filter_dims, filter, bias,
                   output_dims, output, 8);
}

/* --- int8 row pairs, no scratch ---------------------------------------------- */

/* The input group at k = 4g .. 4g + 3 as its pairs (k0, k2), (k1, k3); k past
 * the depth reads as zero (the filter is zero there too). */
static KILN_ALWAYS_INLINE void p8_input(const int8_t *row, int32_t depth, int32_t g,
                                        uint32_t *xa, uint32_t *xb)
{
    uint32_t v;
    if (4 * g + 4 <= depth) {
        v = kiln_load_s8x4(row + 4 * g);
    } else {
        int8_t tail[4] = {0, 0, 0, 0};
        memcpy(tail, row + 4 * g, (size_t)(depth - 4 * g));
        v = kiln_load_s8x4(tail);
    }
    *xa = kiln_sxtb16(v);
    *xb = kiln_sxtb16_ror8(v);
}

/* Groups g0 .. g1 - 1 of `pairs` row pairs (w at group g0: per group [A][B]
 * of each pair); acc[2j] = raw, acc[2j + 1] = even sum of pair j, added to.
 * Returns w past the groups. */
static const uint32_t *p8_groups_c(const uint32_t *w, const int8_t *row, int32_t depth,
                                   int32_t g0, int32_t g1, int32_t pairs, int32_t *acc)
{
    for (int32_t g = g0; g < g1; ++g) {
        uint32_t xa;
        uint32_t xb;
        p8_input(row, depth, g, &xa, &xb);
        for (int32_t j = 0; j < pairs; ++j) {
            const uint32_t wa = w[0];
            const uint32_t wb = w[1];
            w += 2;
            int32_t raw = kiln_smlad_wrap(wa, xa, acc[2 * j]);
            int32_t even = kiln_smlad(kiln_sxtb16(wa), xa, acc[2 * j + 1]);
            raw = kiln_smlad_wrap(wb, xb, raw);
            even = kiln_smlad(kiln_sxtb16(wb), xb, even);
            acc[2 * j] = raw;
            acc[2 * j + 1] = even;
        }
    }
    return w;
}

#if defined(__ARM_FEATURE_DSP)
/* One pair of rows at one group: raw accumulator ra, even re; input pairs in
 * r2, r3, filter words in r12, lr (each widened in place after its raw use). */
#define P8_PAIR_ASM(ra, re)                                                      \
    "ldrd r12, lr, [r0], #8\n\t"                                                 \
    "smlad " ra ", r12, r2, " ra "\n\t"                                          \
    "sxtb16 r12, r12\n\t"                                                        \
    "smlad " re ", r12, r2, " re "\n\t"                                          \
    "smlad " ra ", lr, r3, " ra "\n\t"                                           \
    "sxtb16 lr, lr\n\t"                                                          \
    "smlad " re ", lr, r3, " re "\n\t"
/* A group whose word is in r3 already, then one loaded from the row. */
#define P8_GROUP_BODY_ASM                                                        \
    "sxtb16 r2, r3\n\t"                                                          \
    "sxtb16 r3, r3, ror #8\n\t"                                                  \
    P8_PAIR_ASM("r4", "r5") P8_PAIR_ASM("r6", "r7")                              \
    P8_PAIR_ASM("r8", "r9") P8_PAIR_ASM("r10", "r11")
#define P8_GROUP_8ROWS_ASM                                                       \
    "ldr r3, [r1], #4\n\t"                                                       \
    P8_GROUP_BODY_ASM
#endif

/* What the stores of one output row share. */
typedef struct {
    int32_t out_off;
    int32_t act_min;
    int32_t act_max;
} p8_out_t;

/* Eight rows (four pairs) over every group: w is the block, acc as
 * p8_groups_c's. On DSP cores the whole groups are asm on fixed
 * registers (as dot_8rows: w in r0, the input in r1, its end in r2 and acc in
 * r3 on entry; accumulators in r4-r11), the rest plain C. One copy, shared by
 * both instantiations of p8_block8 (code size). */
static KILN_NOINLINE void p8_8rows(const uint32_t *w, const int8_t *row, int32_t depth,
                                   int32_t groups4, int32_t acc[8])
{
    int32_t g = 0;
#if defined(__ARM_FEATURE_DSP)
    /* Whole groups: eight a trip, the first entered part-way (as
     * conv2d_gemm.c's dot_p8_4x2: a computed BX past (8 - whole % 8) % 8
     * groups of 124 bytes, every instruction of P8_GROUP_8ROWS_ASM being
     * 32-bit, which the .if checks), so no tail code follows the loop. */
    const int32_t whole = depth / 4;
    if (whole > 0) {
        const uint32_t skip = (8u - (uint32_t)whole % 8u) % 8u;
        register const uint32_t *w_ __asm__("r0") = w;
        register const int8_t *x_ __asm__("r1") = row;
        register const int8_t *end_ __asm__("r2") = row + 4 * whole;
        register int32_t *acc_ __asm__("r3") = acc;
        register uint32_t entry_ __asm__("r12") = 124u * skip + 1u;  /* + 1: Thumb */
        __asm__ volatile("push {r2-r12, lr}\n\t"
                         "ldm r3, {r4-r11}\n\t"
                         "adr r2, 1f\n\t"
                         "add r2, r2, r12\n\t"
                         "bx r2\n\t"
                         ".p2align 2\n"
                         "1:\n\t"
                         P8_GROUP_8ROWS_ASM P8_GROUP_8ROWS_ASM
                         P8_GROUP_8ROWS_ASM P8_GROUP_8ROWS_ASM
                         P8_GROUP_8ROWS_ASM P8_GROUP_8ROWS_ASM
                         P8_GROUP_8ROWS_ASM P8_GROUP_8ROWS_ASM
                         "2:\n\t"
                         ".if (2b - 1b) != 992\n\t"
                         ".error \"P8_GROUP_8ROWS_ASM is not 124 bytes\"\n\t"
                         ".endif\n\t"
                         "ldr r2, [sp]\n\t"
                         "cmp r1, r2\n\t"
                         "bne 1b\n\t"
                         "ldr r3, [sp, #4]\n\t"
                         "stm r3, {r4-r11}\n\t"
                         "pop {r2-r12, lr}"
                         : "+r"(w_), "+r"(x_)
                         : "r"(end_), "r"(acc_), "r"(entry_)
                         : "cc", "memory");  /* reads w and row, updates acc */
        w = w_;
        g = whole;
    }
#endif
    if (g < groups4) {
        p8_groups_c(w, row, depth, g, groups4, 4, acc);
    }
}

/* Rows u .. u + 7 (bias, mult, shift and out at row u): their dot products,
 * the odd rows' sums recovered, requantized and stored; full_range a constant
 * (kiln_output_fast). */
static KILN_ALWAYS_INLINE void p8_block8(const uint32_t *w, const int8_t *row, int32_t depth,
                                         int32_t groups4, const int32_t *bias,
                                         const int32_t *mult, const int8_t *shift,
                                         const p8_out_t *o, int8_t *out, uint32_t k40,
                                         int full_range)
{
    int32_t acc[8] = {bias[0], bias[0], bias[2], bias[2], bias[4], bias[4], bias[6], bias[6]};
    p8_8rows(w, row, depth, groups4, acc);
    const p8_out_t k = *o;
    int32_t sums[8];
    sums[0] = acc[1];
    sums[1] = bias[1] + kiln_pair_odd(acc[0], acc[1]);
    sums[2] = acc[3];
    sums[3] = bias[3] + kiln_pair_odd(acc[2], acc[3]);
    sums[4] = acc[5];
    sums[5] = bias[5] + kiln_pair_odd(acc[4], acc[5]);
    sums[6] = acc[7];
    sums[7] = bias[7] + kiln_pair_odd(acc[6], acc[7]);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 8
#endif
    for (int32_t j = 0; j < 8; ++j) {
        out[j] = kiln_output_packed_k(sums[j], mult[j], -(int32_t)shift[j] - 2, k40, k.out_off,
                                      k.act_min, k.act_max, full_range);
    }
}

/* Every whole block of eight rows (w, bias, mult, shift and out at row 0) in
 * one call: the loop keeps its pointers and constants in registers. */
static KILN_ALWAYS_INLINE void p8_blocks8(const uint32_t *w, const int8_t *row, int32_t depth,
                                          int32_t groups4, int32_t units, const int32_t *bias,
                                          const kiln_requant_packed_t *quant, const p8_out_t *o,
                                          int8_t *out, int full_range)
{
    const uint32_t k40 = kiln_opaque_u32(UINT32_C(0x40000000));
    for (int32_t u = 0; u + 8 <= units; u += 8) {
        p8_block8(w, row, depth, groups4, bias + u, quant->multiplier + u, quant->shift + u, o,
                  out + u, k40, full_range);
        w += 8 * groups4;
    }
}

static KILN_NOINLINE void p8_blocks8_full(const uint32_t *w, const int8_t *row, int32_t depth,
                                          int32_t groups4, int32_t units, const int32_t *bias,
                                          const kiln_requant_packed_t *quant, const p8_out_t *o,
                                          int8_t *out)
{
    p8_blocks8(w, row, depth, groups4, units, bias, quant, o, out, 1);
}

static KILN_NOINLINE void p8_blocks8_clamp(const uint32_t *w, const int8_t *row, int32_t depth,
                                           int32_t groups4, int32_t units, const int32_t *bias,
                                           const kiln_requant_packed_t *quant, const p8_out_t *o,
                                           int8_t *out)
{
    p8_blocks8(w, row, depth, groups4, units, bias, quant, o, out, 0);
}

/* Requantizes rows u .. u + n - 1 from their sums into out[u ..]. */
static KILN_ALWAYS_INLINE void p8_store(const int32_t *sums, int32_t n, int32_t u,
                                        const kiln_requant_packed_t *quant, int32_t out_off,
                                        int32_t act_min, int32_t act_max, int8_t *out)
{
    for (int32_t j = 0; j < n; ++j) {
        out[u + j] = kiln_output_packed(sums[j], quant->multiplier[u + j],
                                        kiln_packed_s1(quant, u + j), out_off, act_min, act_max,
                                        0);
    }
}

kiln_status_t kiln_fully_connected_rows8_p8_s8(const kiln_fc_params_t *params,
                                               const kiln_requant_packed_t *quant,
                                               const kiln_dims_t *input_dims,
                                               const int8_t *input,
                                               const kiln_dims_t *filter_dims,
                                               const int32_t *filter, const int32_t *bias,
                                               const kiln_dims_t *output_dims, int8_t *output)
{
    if (params == NULL || !kiln_requant_packed_valid(quant) || input == NULL || filter == NULL ||
        bias == NULL || output == NULL || !kiln_dims_valid(input_dims) ||
        !kiln_dims_valid(filter_dims) || !kiln_dims_valid(output_dims) ||
        ((uintptr_t)filter & 3u) != 0) {
        return KILN_ERR_ARG;
    }
    if (params->input_offset < -127 || params->input_offset > 128 || params->filter_offset != 0 ||
        params->output_offset < -128 || params->output_offset > 127 ||
        params->activation.min < -128 || params->activation.min > params->activation.max ||
        params->activation.max > 127) {
        return KILN_ERR_ARG;
    }
    const int32_t depth = filter_dims->c;
    const int32_t units = filter_dims->n;
    const int32_t batches = output_dims->n;
    if (input_dims->c != depth || input_dims->n != batches || output_dims->c != units) {
        return KILN_ERR_ARG;
    }
    const int32_t groups4 = kiln_round_up4(depth) / 4;
    const int32_t out_off = params->output_offset;
    const int32_t act_min = params->activation.min;
    const int32_t act_max = params->activation.max;
    for (int32_t bt = 0; bt < batches; ++bt) {
        const int8_t *row = input + (size_t)bt * (size_t)depth;
        int8_t *out = output + (size_t)bt * (size_t)units;
        const uint32_t *w = (const uint32_t *)filter;
        int32_t u = 0;
        const p8_out_t o = {out_off, act_min, act_max};
        if (act_min == -128 && act_max == 127) {
            p8_blocks8_full(w, row, depth, groups4, units, bias, quant, &o, out);
        } else {
            p8_blocks8_clamp(w, row, depth, groups4, units, bias, quant, &o, out);
        }
        u = units / 8 * 8;
        w += u * groups4;
        for (; u < units; u += 2) {     /* the last pairs (a lone row with a zero one) */
            int32_t acc[2] = {bias[u], bias[u]};
            w = p8_groups_c(w, row, depth, 0, groups4, 1, acc);
            const int32_t sums[2] = {acc[1], u + 1 < units ? bias[u + 1] +
                                     kiln_pair_odd(acc[0], acc[1]) : 0};
            p8_store(sums, u + 1 < units ? 2 : 1, u, quant, out_off, act_min, act_max, out);
        }
    }
    return KILN_OK;
}

/* --- per-tensor requantization: whole blocks in one asm loop ------------------ */

/*
 * kiln_fully_connected_rows8_p8_pt_s8 (int8 row pairs) and
 * kiln_fully_connected_rows{8,6}_pt_s8 (int16 pairs, doubled, the input widened
 * in registers: no scratch): one multiplier m and shift -e for every row, so
 * the loop over the blocks of rows keeps them in registers and requantizes an
 * output in four instructions (conv.h gives the layouts and the ranges the
 * compiler guarantees). Six int16 rows leave four registers for their words,
 * two rows' per LDM: 18 instructions a group of four k (24 MACs) where eight
 * rows take 27 (32 MACs); the rows past its last six take a two-row loop.
 *
 * With x2 = twice the row's sum (|sum| < 2^30) and K = (2 * output_offset + 1)
 * << (e - 1), one SMMLAR gives r + K, r = floor((x2 * m + 2^31) / 2^32) =
 * floor((sum * m + 2^30) / 2^31), TFLite's rounding doubling high multiply (see
 * kiln_requantize_fast, step 1); then TFLite's rounding division by 2^e plus
 * the output zero point is floor((r - [r < 0] + K) / 2^e) (kiln_dw_output,
 * steps 2 and 3, with the zero point times 2^e inside the floor), one ASR, and
 * the clamp one SSAT. [r < 0] may be [sum < 0] (they differ only at r = 0,
 * where K is an odd multiple of 2^(e - 1) and both floors agree), so the exact
 * form adds sum >> 31 to K first (one ADD). Without it a negative r gives a
 * value <= output_offset all the same, so where activation.min >=
 * output_offset (ReLU) the clamp makes both equal and the ADD is left out.
 * No overflow: |r| < 2^30 and |K| <= 255 * 2^21 (e <= 22).
 * A narrower clamp than [-128, 127] is applied afterwards to the bytes.
 * x2 is the accumulator itself for the int16 filter (weights and bias stored
 * doubled), for int8 pairs the even row's one added to itself and the odd
 * row's raw - even (256 * its sum, bias included: conv.h) shifted by 7.
 */
typedef struct {
    int32_t m;              /* TFLite's multiplier, [2^30, 2^31) */
    int32_t k;              /* (2 * output_offset + 1) << (e - 1) */
    int32_t e;              /* -shift, [2, 22] */
    int8_t *out;
    const int8_t *x_end;    /* past the row's whole groups of four */
    uint32_t entry;         /* where the group loop starts, bytes past its label, + 1 */
    const int8_t *x;        /* the row */
    const int32_t *bias;    /* the first block's accumulator starts */
    int8_t *out_end;        /* past the whole blocks' outputs */
    uint32_t tail;          /* the last partial group, zero-padded (mode bit 1) */
    uint32_t mode;          /* bit 0: exact rounding of negative values; bit 1: a tail */
} pt_args_t;

#if defined(__ARM_FEATURE_DSP)
/* One output from x2 in register x: m in r1, K in r2, e in r3, out in r12. */
#define PT_RQ_ASM(x)                                                             \
    "smmlar " x ", " x ", r1, r2\n\t"                                            \
    "asr " x ", " x ", r3\n\t"                                                   \
    "ssat " x ", #8, " x "\n\t"                                                  \
    "strb " x ", [r12], #1\n\t"
#define PT_RQ_EXACT_ASM(x)                                                       \
    "add lr, r2, " x ", asr #31\n\t"                                             \
    "smmlar " x ", " x ", r1, lr\n\t"                                            \
    "asr " x ", " x ", r3\n\t"                                                   \
    "ssat " x ", #8, " x "\n\t"                                                  \
    "strb " x ", [r12], #1\n\t"
/* A row pair's x2 (raw in ra, even in re), then the even row's output first. */
#define PT_P8_PAIR_ASM(rq, ra, re)                                               \
    "sub " ra ", " ra ", " re "\n\t"                                             \
    "asr " ra ", " ra ", #7\n\t"                                                 \
    "add " re ", " re ", " re "\n\t"                                             \
    rq(re) rq(ra)
#define PT_P8_RQ_ASM(rq)                                                         \
    PT_P8_PAIR_ASM(rq, "r4", "r5") PT_P8_PAIR_ASM(rq, "r6", "r7")                \
    PT_P8_PAIR_ASM(rq, "r8", "r9") PT_P8_PAIR_ASM(rq, "r10", "r11")
#define PT_S16_RQ_ASM(rq)                                                        \
    rq("r4") rq("r5") rq("r6") rq("r7") rq("r8") rq("r9") rq("r10") rq("r11")
/* Int16 pairs, eight rows at one group: the input word in r3. */
#define S16_GROUP_BODY_ASM                                                       \
    "sxtb16 r2, r3\n\t"                                                          \
    "sxtb16 r3, r3, ror #8\n\t"                                                  \
    FC_ROW_ASM("r4") FC_ROW_ASM("r5") FC_ROW_ASM("r6") FC_ROW_ASM("r7")          \
    FC_ROW_ASM("r8") FC_ROW_ASM("r9") FC_ROW_ASM("r10") FC_ROW_ASM("r11")
#define S16_GROUP_ASM "ldr r3, [r1], #4\n\t" S16_GROUP_BODY_ASM
/* Six rows at one group: two rows' four words a LDM (r10, r11, r12, lr), the
 * accumulators r4-r9. */
#define S16_ROWS2_ASM(a, b)                                                      \
    "ldm r0!, {r10, r11, r12, lr}\n\t"                                            \
    "smlad " a ", r10, r2, " a "\n\t"                                            \
    "smlad " a ", r11, r3, " a "\n\t"                                            \
    "smlad " b ", r12, r2, " b "\n\t"                                            \
    "smlad " b ", lr, r3, " b "\n\t"
#define S16_6_GROUP_BODY_ASM                                                     \
    "sxtb16 r2, r3\n\t"                                                          \
    "sxtb16 r3, r3, ror #8\n\t"                                                  \
    S16_ROWS2_ASM("r4", "r5") S16_ROWS2_ASM("r6", "r7") S16_ROWS2_ASM("r8", "r9")
#define S16_6_GROUP_ASM "ldr r3, [r1], #4\n\t" S16_6_GROUP_BODY_ASM
#define PT_S16_6_RQ_ASM(rq) rq("r4") rq("r5") rq("r6") rq("r7") rq("r8") rq("r9")
/* Two rows (the blocks of kiln_fully_connected_rows6_pt_s8 past its last six). */
#define S16_2_GROUP_BODY_ASM                                                     \
    "sxtb16 r2, r3\n\t"                                                          \
    "sxtb16 r3, r3, ror #8\n\t"                                                  \
    S16_ROWS2_ASM("r4", "r5")
#define S16_2_GROUP_ASM "ldr r3, [r1], #4\n\t" S16_2_GROUP_BODY_ASM
#define PT_S16_2_RQ_ASM(rq) rq("r4") rq("r5")

/*
 * The loop over the whole blocks: w in r0, the arguments in r3. Its frame, at
 * sp: m, K, e, out, x_end, entry address, x, bias, out_end (as pt_args_t),
 * after-loop address, tail word, requantization address. Per block: the
 * accumulators r4-r11 from the bias (one LDM), the group loop entered
 * part-way (a computed LDR PC: eight groups a trip, no tail code), the last
 * partial group if any, then the eight outputs. `size` is the bytes of one
 * group (all 32-bit instructions; the .if checks).
 */
#define PT_LOOP_ASM(group, body, rq_relu, rq_exact, size, accs)                  \
    "push {r4-r11, lr}\n\t"                                                      \
    "sub sp, sp, #48\n\t"                                                        \
    "ldm r3, {r4-r11}\n\t"                                                       \
    "adr r2, 1f\n\t"                                                             \
    "add r9, r9, r2\n\t"                                                         \
    "stm sp, {r4-r11}\n\t"                                                       \
    "ldr r4, [r3, #32]\n\t"                                                      \
    "ldr r5, [r3, #36]\n\t"                                                      \
    "ldr r6, [r3, #40]\n\t"                                                      \
    "str r4, [sp, #32]\n\t"                                                      \
    "str r5, [sp, #40]\n\t"                                                      \
    "adr r4, 5f\n\t"                                                             \
    "tst r6, #1\n\t"                                                             \
    "beq 9f\n\t"                                                                 \
    "adr r4, 6f\n"                                                               \
    "9:\n\t"                                                                     \
    "add r4, r4, #1\n\t"                                                         \
    "str r4, [sp, #44]\n\t"                                                      \
    "tst r6, #2\n\t"                                                             \
    "beq 9f\n\t"                                                                 \
    "adr r4, 7f\n\t"                                                             \
    "add r4, r4, #1\n"                                                           \
    "9:\n\t"                                                                     \
    "str r4, [sp, #36]\n"                                                        \
    "3:\n\t"                                                                     \
    "ldr r3, [sp, #28]\n\t"                                                      \
    "ldm r3!, {" accs "}\n\t"                                                    \
    "str r3, [sp, #28]\n\t"                                                      \
    "ldr r1, [sp, #24]\n\t"                                                      \
    "ldr pc, [sp, #20]\n\t"                                                      \
    ".p2align 2\n"                                                               \
    "1:\n\t"                                                                     \
    group group group group group group group group                              \
    "2:\n\t"                                                                     \
    ".if (2b - 1b) != 8 * " #size "\n\t"                                         \
    ".error \"a group is not " #size " bytes\"\n\t"                              \
    ".endif\n\t"                                                                 \
    "ldr r2, [sp, #16]\n\t"                                                      \
    "cmp r1, r2\n\t"                                                             \
    "bne 1b\n\t"                                                                 \
    "ldr pc, [sp, #36]\n"                                                        \
    "7:\n\t"                                                                     \
    "ldr r3, [sp, #40]\n\t"                                                      \
    body                                                                         \
    "ldr pc, [sp, #44]\n"                                                        \
    "5:\n\t"                                                                     \
    "ldm sp, {r1, r2, r3, r12}\n\t"                                              \
    rq_relu                                                                      \
    "b 4f\n"                                                                     \
    "6:\n\t"                                                                     \
    "ldm sp, {r1, r2, r3, r12}\n\t"                                              \
    rq_exact                                                                     \
    "4:\n\t"                                                                     \
    "str r12, [sp, #12]\n\t"                                                     \
    "ldr r1, [sp, #32]\n\t"                                                      \
    "cmp r12, r1\n\t"                                                            \
    "bne 3b\n\t"                                                                 \
    "add sp, sp, #48\n\t"                                                        \
    "pop {r4-r11, lr}"

static KILN_NOINLINE void pt_p8_loop(const uint32_t *w, const pt_args_t *a)
{
    register const uint32_t *w_ __asm__("r0") = w;
    register const pt_args_t *a_ __asm__("r3") = a;
    __asm__ volatile(PT_LOOP_ASM(P8_GROUP_8ROWS_ASM, P8_GROUP_BODY_ASM,
                                 PT_P8_RQ_ASM(PT_RQ_ASM), PT_P8_RQ_ASM(PT_RQ_EXACT_ASM), 124,
                                 "r4-r11")
                     : "+r"(w_), "+r"(a_)
                     :
                     : "r1", "r2", "r12", "cc", "memory");
}

static KILN_NOINLINE void pt_s16_loop(const uint32_t *w, const pt_args_t *a)
{
    register const uint32_t *w_ __asm__("r0") = w;
    register const pt_args_t *a_ __asm__("r3") = a;
    __asm__ volatile(PT_LOOP_ASM(S16_GROUP_ASM, S16_GROUP_BODY_ASM,
                                 PT_S16_RQ_ASM(PT_RQ_ASM), PT_S16_RQ_ASM(PT_RQ_EXACT_ASM), 108,
                                 "r4-r11")
                     : "+r"(w_), "+r"(a_)
                     :
                     : "r1", "r2", "r12", "cc", "memory");
}

static KILN_NOINLINE void pt_s16_6_loop(const uint32_t *w, const pt_args_t *a)
{
    register const uint32_t *w_ __asm__("r0") = w;
    register const pt_args_t *a_ __asm__("r3") = a;
    __asm__ volatile(PT_LOOP_ASM(S16_6_GROUP_ASM, S16_6_GROUP_BODY_ASM,
                                 PT_S16_6_RQ_ASM(PT_RQ_ASM), PT_S16_6_RQ_ASM(PT_RQ_EXACT_ASM),
                                 72, "r4-r9")
                     : "+r"(w_), "+r"(a_)
                     :
                     : "r1", "r2", "r12", "cc", "memory");
}

static KILN_NOINLINE void pt_s16_2_loop(const uint32_t *w, const pt_args_t *a)
{
    register const uint32_t *w_ __asm__("r0") = w;
    register const pt_args_t *a_ __asm__("r3") = a;
    __asm__ volatile(PT_LOOP_ASM(S16_2_GROUP_ASM, S16_2_GROUP_BODY_ASM,
                                 PT_S16_2_RQ_ASM(PT_RQ_ASM), PT_S16_2_RQ_ASM(PT_RQ_EXACT_ASM),
                                 32, "r4-r5")
                     : "+r"(w_), "+r"(a_)
                     :
                     : "r1", "r2", "r12", "cc", "memory");
}
#endif

/* The int16 (doubled) rows' dot products in plain C: `n` rows interleaved per
 * group (w at their block), acc (twice the sums) added to; returns w past them. */
static const uint32_t *pt_s16_rows_c(const uint32_t *w, const int8_t *row, int32_t depth,
                                     int32_t groups4, int32_t n, int32_t *acc)
{
    for (int32_t g = 0; g < groups4; ++g) {
        uint32_t xa;
        uint32_t xb;
        p8_input(row, depth, g, &xa, &xb);
        for (int32_t j = 0; j < n; ++j) {
            acc[j] = kiln_smlad(w[1], xb, kiln_smlad(w[0], xa, acc[j]));
            w += 2;
        }
    }
    return w;
}

/* Rows u .. u + n - 1 (n <= 8) of one input row in plain C from their
 * accumulator starts: each sum, requantized as TFLite does, clamped. */
static const uint32_t *pt_rows_c(const uint32_t *w, const int8_t *row, int32_t depth,
                                 int32_t groups4, int32_t n, const int32_t *bias, int p8,
                                 int32_t m, int32_t s1, const kiln_fc_params_t *params,
                                 int8_t *out)
{
    int32_t acc[8];
    int32_t sums[8];
    memcpy(acc, bias, sizeof(int32_t) * (size_t)(p8 ? (n + 1) / 2 * 2 : n));
    if (p8) {       /* n = 8: four pairs interleaved per group; n <= 2: one pair */
        w = p8_groups_c(w, row, depth, 0, groups4, (n + 1) / 2, acc);
        for (int32_t j = 0; j < n; j += 2) {
            sums[j] = acc[j + 1];
            if (j + 1 < n) {
                sums[j + 1] = kiln_pair_odd(acc[j], acc[j + 1]);
            }
        }
    } else {
        w = pt_s16_rows_c(w, row, depth, groups4, n, acc);
        for (int32_t j = 0; j < n; ++j) {
            sums[j] = acc[j] >> 1;      /* exact: weights and bias doubled */
        }
    }
    for (int32_t j = 0; j < n; ++j) {
        out[j] = kiln_output_packed(sums[j], m, s1, params->output_offset,
                                    params->activation.min, params->activation.max, 0);
    }
    return w;
}

/* Argument checks and the run of the three kernels: rows (8, or 6 for int16) and
 * p8 constants in each (inlined: a firmware links the asm loop of the kernels it
 * calls only). */
static KILN_ALWAYS_INLINE kiln_status_t fc_pt(const kiln_fc_params_t *params,
                                              const kiln_requant_packed_t *quant,
                                              const kiln_dims_t *input_dims,
                                              const int8_t *input,
                                              const kiln_dims_t *filter_dims,
                                              const int32_t *filter, const int32_t *bias,
                                              const kiln_dims_t *output_dims, int8_t *output,
                                              int32_t rows, int p8)
{
    if (params == NULL || !kiln_requant_packed_valid(quant) || input == NULL || filter == NULL ||
        bias == NULL || output == NULL || !kiln_dims_valid(input_dims) ||
        !kiln_dims_valid(filter_dims) || !kiln_dims_valid(output_dims) ||
        ((uintptr_t)filter & 3u) != 0) {
        return KILN_ERR_ARG;
    }
    if (params->filter_offset != 0 || params->output_offset < -128 ||
        params->output_offset > 127 || params->activation.min < -128 ||
        params->activation.min > params->activation.max || params->activation.max > 127 ||
        quant->multiplier[0] < INT32_C(0x40000000) || quant->shift[0] < -22 ||
        quant->shift[0] > -2) {
        return KILN_ERR_ARG;
    }
    const int32_t depth = filter_dims->c;
    const int32_t units = filter_dims->n;
    const int32_t batches = output_dims->n;
    if (input_dims->c != depth || input_dims->n != batches || output_dims->c != units) {
        return KILN_ERR_ARG;
    }
    const int32_t groups4 = kiln_round_up4(depth) / 4;
    const int32_t m = quant->multiplier[0];
    const int32_t e = -(int32_t)quant->shift[0];
#if defined(__ARM_FEATURE_DSP)
    const int32_t out_off = params->output_offset;
    const int32_t act_min = params->activation.min;
    const int32_t act_max = params->activation.max;
#endif
    for (int32_t bt = 0; bt < batches; ++bt) {
        const int8_t *row = input + (size_t)bt * (size_t)depth;
        int8_t *out = output + (size_t)bt * (size_t)units;
        const uint32_t *w = (const uint32_t *)filter;
#if defined(__ARM_FEATURE_DSP)
        int32_t u = 0;
        /* whole blocks, then (rows 6) blocks of two, each in its asm loop */
        for (int32_t b = rows; b >= 2; b = rows == 6 ? b - 4 : 0) {
            const int32_t n = (units - u) / b * b;
            if (n == 0) {
                continue;
            }
            const int32_t full = depth / 4;
            const uint32_t size = p8 ? 124u : b == 8 ? 108u : b == 6 ? 72u : 32u;
            pt_args_t a;
            a.m = m;
            a.k = (int32_t)((uint32_t)(2 * out_off + 1) << (e - 1));
            a.e = e;
            a.out = out + u;
            a.x_end = row + 4 * full;
            a.entry = (full > 0 ? size * ((8u - (uint32_t)full % 8u) % 8u) : 8u * size) + 1u;
            a.x = row;
            a.bias = bias + u;
            a.out_end = out + u + n;
            a.tail = 0;
            a.mode = act_min < out_off ? 1u : 0u;
            if (full < groups4) {
                int8_t tail[4] = {0, 0, 0, 0};
                memcpy(tail, row + 4 * full, (size_t)(depth - 4 * full));
                a.tail = kiln_load_s8x4(tail);
                a.mode |= 2u;
            }
            if (p8) {
                pt_p8_loop(w, &a);
            } else if (b == 8) {
                pt_s16_loop(w, &a);
            } else if (b == 6) {
                pt_s16_6_loop(w, &a);
            } else {
                pt_s16_2_loop(w, &a);
            }
            if (act_min > -128 || act_max < 127) {
                for (int32_t j = u; j < u + n; ++j) {
                    const int32_t v = out[j];
                    out[j] = (int8_t)(v < act_min ? act_min : v > act_max ? act_max : v);
                }
            }
            /* filter words: b rows * groups4 * (2, int16; 1 a row, int8 pairs) */
            w += (size_t)n * (size_t)groups4 * (p8 ? 1u : 2u);
            u += n;
        }
#else
        int32_t u = 0;
        for (; u + rows <= units; u += rows) {
            w = pt_rows_c(w, row, depth, groups4, rows, bias + u, p8, m, e - 2, params,
                          out + u);
        }
#endif
        /* the last rows: p8 pairs (a lone row with a zero one), int16 halving blocks
         * (rows 8: 4, 2, 1; rows 6: 2, 1, the layout conv.h gives) */
        for (int32_t b = p8 || rows == 6 ? 2 : rows / 2; b >= 1; b /= 2) {
            while (units - u >= (p8 ? 1 : b)) {
                const int32_t n = units - u < b ? units - u : b;
                w = pt_rows_c(w, row, depth, groups4, n, bias + u, p8, m, e - 2, params,
                              out + u);
                u += n;
            }
        }
    }
    return KILN_OK;
}

kiln_status_t kiln_fully_connected_rows8_p8_pt_s8(const kiln_fc_params_t *params,
                                                  const kiln_requant_packed_t *quant,
                                                  const kiln_dims_t *input_dims,
                                                  const int8_t *input,
                                                  const kiln_dims_t *filter_dims,
                                                  const int32_t *filter, const int32_t *bias,
                                                  const kiln_dims_t *output_dims, int8_t *output)
{
    return fc_pt(params, quant, input_dims, input, filter_dims, filter, bias, output_dims,
                 output, 8, 1);
}

kiln_status_t kiln_fully_connected_rows8_pt_s8(const kiln_fc_params_t *params,
                                               const kiln_requant_packed_t *quant,
                                               const kiln_dims_t *input_dims,
                                               const int8_t *input,
                                               const kiln_dims_t *filter_dims,
                                               const int32_t *filter, const int32_t *bias,
                                               const kiln_dims_t *output_dims, int8_t *output)
{
    return fc_pt(params, quant, input_dims, input, filter_dims, filter, bias, output_dims,
                 output, 8, 0);
}

kiln_status_t kiln_fully_connected_rows6_pt_s8(const kiln_fc_params_t *params,
                                               const kiln_requant_packed_t *quant,
                                               const kiln_dims_t *input_dims,
                                               const int8_t *input,
                                               const kiln_dims_t *filter_dims,
                                               const int32_t *filter, const int32_t *bias,
                                               const kiln_dims_t *output_dims, int8_t *output)
{
    return fc_pt(params, quant, input_dims, input, filter_dims, filter, bias, output_dims,
                 output, 6, 0);
}
