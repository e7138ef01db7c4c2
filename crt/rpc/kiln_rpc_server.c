/*
 * kiln_rpc_server.c - session, command dispatch and kiln_rpc_serve().
 *
 * Every request payload is parsed with explicit length checks and every
 * host-supplied offset/length is checked against the buffer it names, which
 * is itself checked against the arena, before a byte is copied. Payload
 * layouts are in README.md; constants in kiln_rpc_wire.h.
 */
#include "kiln_rpc.h"
#include "kiln_rpc_server.h"
#include "kiln_rpc_tune.h"

#include <string.h>

#include "model.h"
#include "platform.h"

/* kiln_rpc_config.h (through kiln_rpc_wire.h) brought in kiln_config.h and
 * kiln_board.h where the project has them; defaults for what they leave out: */
#ifndef KILN_BOARD_NAME
#define KILN_BOARD_NAME "unknown"
#endif
#ifndef KILN_BUILD_ID
#define KILN_BUILD_ID "dev"
#endif
#ifndef KILN_MODEL_NAME
#define KILN_MODEL_NAME "model"
#endif
#ifndef KILN_MODEL_HASH
#define KILN_MODEL_HASH ""
#endif
#ifndef KILN_TUNE_ARENA_BYTES
#define KILN_TUNE_ARENA_BYTES 0u
#endif

typedef char kiln_rpc_check_payload[(KILN_RPC_MAX_PAYLOAD >= KILN_RPC_MIN_PAYLOAD &&
                                     KILN_RPC_MAX_PAYLOAD <= 65535u) ? 1 : -1];
typedef char kiln_rpc_check_tensors[(KILN_NUM_INPUTS >= 1 && KILN_NUM_INPUTS <= 8 &&
                                     KILN_NUM_OUTPUTS >= 1 && KILN_NUM_OUTPUTS <= 8) ? 1 : -1];

extern const char *const kiln_layer_names[];

/* LAYER answers status, u8 length, name: keep it inside the payload. */
#define KILN_RPC_MAX_LAYER_NAME (KILN_RPC_MAX_PAYLOAD - 2u > 255u ? 255u : KILN_RPC_MAX_PAYLOAD - 2u)

/* ---- the arena ---------------------------------------------------------- */

#define KILN_RPC_MAX2(a, b) ((a) > (b) ? (a) : (b))
#define KILN_RPC_ARENA_SIZE \
    KILN_RPC_MAX2(KILN_RPC_MAX2((uint32_t)(KILN_ARENA_BYTES), (uint32_t)(KILN_TUNE_ARENA_BYTES)), 16u)

#if defined(__GNUC__) || defined(__clang__)
/* The model's layer count as a variable, not the macro: a model may have 0 layers (a
 * lone RESHAPE aliased away), and `x >= 0u` on the macro trips -Wtype-limits under
 * -Werror; a const object is not a constant expression, so gcc does not fold it. */
static const uint32_t kiln_rpc_num_layers = (uint32_t)KILN_NUM_LAYERS;

static uint8_t kiln_rpc_arena_buf[KILN_RPC_ARENA_SIZE] __attribute__((aligned(16)));
#else
static union {
    uint8_t bytes[KILN_RPC_ARENA_SIZE];
    long double align_;
} kiln_rpc_arena_u;
#define kiln_rpc_arena_buf (kiln_rpc_arena_u.bytes)
#endif

uint8_t *kiln_rpc_arena(void) { return kiln_rpc_arena_buf; }

uint32_t kiln_rpc_arena_bytes(void) { return (uint32_t)KILN_RPC_ARENA_SIZE; }

/* ---- buffers the host may touch ------------------------------------------ */

typedef struct {
    uint32_t offset; /* inside the arena */
    uint32_t bytes;
    uint8_t writable;
} kiln_rpc_region_t;

#define KILN_RPC_REGION(kind, i, w) {KILN_##kind##_##i##_OFFSET, KILN_##kind##_##i##_BYTES, w}

static const kiln_rpc_region_t kiln_rpc_inputs[KILN_NUM_INPUTS] = {
    KILN_RPC_REGION(INPUT, 0, 1),
#if KILN_NUM_INPUTS > 1
    KILN_RPC_REGION(INPUT, 1, 1),
#endif
#if KILN_NUM_INPUTS > 2
    KILN_RPC_REGION(INPUT, 2, 1),
#endif
#if KILN_NUM_INPUTS > 3
    KILN_RPC_REGION(INPUT, 3, 1),
#endif
#if KILN_NUM_INPUTS > 4
    KILN_RPC_REGION(INPUT, 4, 1),
#endif
#if KILN_NUM_INPUTS > 5
    KILN_RPC_REGION(INPUT, 5, 1),
#endif
#if KILN_NUM_INPUTS > 6
    KILN_RPC_REGION(INPUT, 6, 1),
#endif
#if KILN_NUM_INPUTS > 7
    KILN_RPC_REGION(INPUT, 7, 1),
#endif
};

static const kiln_rpc_region_t kiln_rpc_outputs[KILN_NUM_OUTPUTS] = {
    KILN_RPC_REGION(OUTPUT, 0, 0),
#if KILN_NUM_OUTPUTS > 1
    KILN_RPC_REGION(OUTPUT, 1, 0),
#endif
#if KILN_NUM_OUTPUTS > 2
    KILN_RPC_REGION(OUTPUT, 2, 0),
#endif
#if KILN_NUM_OUTPUTS > 3
    KILN_RPC_REGION(OUTPUT, 3, 0),
#endif
#if KILN_NUM_OUTPUTS > 4
    KILN_RPC_REGION(OUTPUT, 4, 0),
#endif
#if KILN_NUM_OUTPUTS > 5
    KILN_RPC_REGION(OUTPUT, 5, 0),
#endif
#if KILN_NUM_OUTPUTS > 6
    KILN_RPC_REGION(OUTPUT, 6, 0),
#endif
#if KILN_NUM_OUTPUTS > 7
    KILN_RPC_REGION(OUTPUT, 7, 0),
#endif
};

static uint16_t kiln_rpc_num_variants(void)
{
#ifdef KILN_HAS_TUNING
    return kiln_tune_num_variants;
#else
    return 0;
#endif
}

/* Find buffer (space, index, variant). Returns KILN_RPC_OK with *out filled,
 * KILN_RPC_ERR_UNSUPPORTED (tuning space without a tuning table),
 * KILN_RPC_ERR_ARG (no such space/index/variant) or KILN_RPC_ERR_RANGE (a
 * declared buffer that does not lie inside the arena). */
static int kiln_rpc_lookup(uint8_t space, uint8_t index, uint16_t variant, kiln_rpc_region_t *out)
{
    if (space == KILN_RPC_SPACE_INPUT) {
        if (index >= KILN_NUM_INPUTS) {
            return KILN_RPC_ERR_ARG;
        }
        *out = kiln_rpc_inputs[index];
    } else if (space == KILN_RPC_SPACE_OUTPUT) {
        if (index >= KILN_NUM_OUTPUTS) {
            return KILN_RPC_ERR_ARG;
        }
        *out = kiln_rpc_outputs[index];
    } else if (space == KILN_RPC_SPACE_TUNE) {
#ifdef KILN_HAS_TUNING
        const kiln_tune_variant_t *v;
        if (variant >= kiln_tune_num_variants) {
            return KILN_RPC_ERR_ARG;
        }
        v = &kiln_tune_variants[variant];
        if (index >= v->num_buffers || index >= KILN_TUNE_MAX_BUFFERS) {
            return KILN_RPC_ERR_ARG;
        }
        out->offset = v->buffers[index].offset;
        out->bytes = v->buffers[index].bytes;
        out->writable = (uint8_t)!(v->buffers[index].flags & KILN_TUNE_BUFFER_OUTPUT);
#else
        (void)variant;
        return KILN_RPC_ERR_UNSUPPORTED;
#endif
    } else if (space == KILN_RPC_SPACE_ARENA) {
        /* The whole arena, read only: the host reads a layer's output where the plan put
         * it (kiln.json), right after STEP ran that layer. */
        if (index != 0) {
            return KILN_RPC_ERR_ARG;
        }
        out->offset = 0;
        out->bytes = (uint32_t)KILN_RPC_ARENA_SIZE;
        out->writable = 0;
    } else {
        return KILN_RPC_ERR_ARG;
    }
    if (out->offset > KILN_RPC_ARENA_SIZE || out->bytes > KILN_RPC_ARENA_SIZE - out->offset) {
        return KILN_RPC_ERR_RANGE;
    }
    return KILN_RPC_OK;
}

/* [offset, offset + n) inside region? Written so that nothing can overflow. */
static int kiln_rpc_span_ok(const kiln_rpc_region_t *r, uint32_t offset, uint32_t n)
{
    return offset <= r->bytes && n <= r->bytes - offset;
}

/* ---- little-endian helpers ---------------------------------------------- */

static uint16_t kiln_rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static uint32_t kiln_rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint8_t *kiln_wr16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    return p + 2;
}

static uint8_t *kiln_wr32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
    return p + 4;
}

static uint8_t *kiln_wr64(uint8_t *p, uint64_t v)
{
    p = kiln_wr32(p, (uint32_t)v);
    return kiln_wr32(p, (uint32_t)(v >> 32));
}

/* A u8 length and at most max bytes of s. */
static uint8_t *kiln_wr_str(uint8_t *p, const char *s, size_t max)
{
    size_t n = 0;
    if (s != NULL) {
        while (n < max && s[n] != '\0') {
            ++n;
        }
        memcpy(p + 1, s, n);
    }
    p[0] = (uint8_t)n;
    return p + 1 + n;
}

/* ---- output ------------------------------------------------------------- */

static void kiln_rpc_put_platform(void *ctx, uint8_t byte)
{
    (void)ctx;
    kiln_platform_putc(byte);
}

/* Send a short frame (ACK, NAK) built on the stack. */
static void kiln_rpc_send_small(uint8_t cmd, uint16_t seq, uint8_t value)
{
    uint8_t body[KILN_RPC_HEADER_BYTES + 1 + KILN_RPC_CRC_BYTES];
    size_t n;
    body[KILN_RPC_HEADER_BYTES] = value;
    n = kiln_rpc_body_finish(body, cmd, seq, 1);
    kiln_rpc_frame_send(body, n, kiln_rpc_put_platform, NULL);
}

/* ---- commands ------------------------------------------------------------ */

/* Identity block (after the status byte): see README.md "HELLO / INFO / BOOT".
 * At most 26 + 4 * (1 + KILN_RPC_MAX_STRING) = 222 bytes. */
static uint8_t *kiln_rpc_identity(const kiln_rpc_server_t *s, uint8_t *p)
{
    uint8_t flags = 0;
#ifdef KILN_HAS_TUNING
    flags |= KILN_RPC_INFO_TUNING;
#endif
    if (s->session) {
        flags |= KILN_RPC_INFO_SESSION;
    }
#if defined(KILN_INPUTS_OVERWRITTEN) && KILN_INPUTS_OVERWRITTEN
    /* The plan lets a layer write over an input: the host must upload again before a
     * run whose outputs it wants (TIME and PROFILE runs consume the inputs too). */
    flags |= KILN_RPC_INFO_INPUTS_OVERWRITTEN;
#endif
    flags |= KILN_RPC_INFO_STEP;
    flags |= KILN_RPC_INFO_STATE_RESET;
    memcpy(p, KILN_RPC_MAGIC, 4);
    p += 4;
    *p++ = (uint8_t)KILN_RPC_PROTOCOL_VERSION;
    *p++ = flags;
    p = kiln_wr16(p, (uint16_t)KILN_RPC_MAX_PAYLOAD);
    p = kiln_wr32(p, kiln_platform_tick_hz());
    p = kiln_wr32(p, (uint32_t)KILN_RPC_ARENA_SIZE);
    *p++ = (uint8_t)KILN_NUM_INPUTS;
    *p++ = (uint8_t)KILN_NUM_OUTPUTS;
    p = kiln_wr16(p, (uint16_t)KILN_NUM_LAYERS);
    p = kiln_wr16(p, kiln_rpc_num_variants());
    p = kiln_wr32(p, s->session_token);
    p = kiln_wr_str(p, KILN_BOARD_NAME, KILN_RPC_MAX_STRING);
    p = kiln_wr_str(p, KILN_BUILD_ID, KILN_RPC_MAX_STRING);
    p = kiln_wr_str(p, KILN_MODEL_NAME, KILN_RPC_MAX_STRING);
    p = kiln_wr_str(p, KILN_MODEL_HASH, KILN_RPC_MAX_STRING);
    return p;
}

/* CRC-32 of all buffers of one space (inputs or outputs), in index order. */
static uint32_t kiln_rpc_crc_space(const kiln_rpc_region_t *regions, int count)
{
    uint32_t crc = 0;
    int i;
    for (i = 0; i < count; ++i) {
        crc = kiln_rpc_crc32(crc, kiln_rpc_arena_buf + regions[i].offset, regions[i].bytes);
    }
    return crc;
}

/* Smallest cost of reading the timer, subtracted by nobody: reported so the
 * host can judge tiny measurements. */
static uint32_t kiln_rpc_timer_overhead(void)
{
    uint64_t best = UINT64_MAX;
    int i;
    for (i = 0; i < 4; ++i) {
        const uint64_t t0 = kiln_platform_ticks();
        const uint64_t t1 = kiln_platform_ticks();
        if (t1 - t0 < best) {
            best = t1 - t0;
        }
    }
    return best > UINT32_MAX ? UINT32_MAX : (uint32_t)best;
}

typedef int (*kiln_rpc_run_fn)(const void *ctx);

static int kiln_rpc_run_model(const void *ctx)
{
    (void)ctx;
    return kiln_run(NULL, NULL, kiln_rpc_arena_buf);
}

#ifdef KILN_HAS_TUNING
static int kiln_rpc_run_variant(const void *ctx)
{
    const kiln_tune_variant_t *v = (const kiln_tune_variant_t *)ctx;
    return v->run(kiln_rpc_arena_buf);
}
#endif

/* warm-up, then time `repeat` calls of fn; writes the TIME response fields
 * after the status byte and returns the status. */
static int kiln_rpc_time(kiln_rpc_run_fn fn, const void *ctx, uint16_t warmup, uint32_t repeat,
                         uint8_t **out)
{
    uint64_t total = 0, lo = UINT64_MAX, hi = 0;
    uint32_t done = 0;
    int rc = 0;
    uint16_t w;
    for (w = 0; w < warmup && rc == 0; ++w) {
        rc = fn(ctx);
    }
    while (rc == 0 && done < repeat) {
        const uint64_t t0 = kiln_platform_ticks();
        uint64_t dt;
        rc = fn(ctx);
        dt = kiln_platform_ticks() - t0;
        if (rc != 0) {
            break;
        }
        total += dt;
        lo = dt < lo ? dt : lo;
        hi = dt > hi ? dt : hi;
        ++done;
    }
    if (done == 0) {
        lo = 0;
    }
    *out = kiln_wr32(*out, (uint32_t)rc);
    *out = kiln_wr32(*out, done);
    *out = kiln_wr64(*out, total);
    *out = kiln_wr64(*out, lo);
    *out = kiln_wr64(*out, hi);
    *out = kiln_wr32(*out, kiln_platform_tick_hz());
    *out = kiln_wr32(*out, kiln_rpc_timer_overhead());
    return rc == 0 ? KILN_RPC_OK : KILN_RPC_ERR_MODEL;
}

/* PROFILE: warm-up runs, then every layer in order, timed one by one; ticks of
 * layers [first, first + count) go into the response (count cut to fit). */
static int kiln_rpc_profile(uint16_t first, uint16_t count, uint16_t warmup, uint8_t **out)
{
    const uint32_t fit = (KILN_RPC_MAX_PAYLOAD - 23u) / 4u;
    uint64_t total = 0;
    uint8_t *p = *out;
    uint8_t *ticks_at;
    uint16_t n, w;
    int32_t layer;
    int rc = 0;
    if ((uint32_t)first >= kiln_rpc_num_layers) {
        return KILN_RPC_ERR_RANGE;
    }
    n = count;
    if ((uint32_t)n > kiln_rpc_num_layers - first) {
        n = (uint16_t)(kiln_rpc_num_layers - first);
    }
    if ((uint32_t)n > fit) {
        n = (uint16_t)fit;
    }
    for (w = 0; w < warmup && rc == 0; ++w) {
        rc = kiln_run(NULL, NULL, kiln_rpc_arena_buf);
    }
    ticks_at = p + 4 + 2 + 2 + 2 + 8; /* after rc, num_layers, first, count, total */
    for (layer = 0; layer < (int32_t)KILN_NUM_LAYERS && rc == 0; ++layer) {
        const uint64_t t0 = kiln_platform_ticks();
        uint64_t dt;
        rc = kiln_run_layer(layer, kiln_rpc_arena_buf);
        dt = kiln_platform_ticks() - t0;
        total += dt;
        if (layer >= (int32_t)first && layer < (int32_t)first + (int32_t)n) {
            kiln_wr32(ticks_at + 4u * (uint32_t)(layer - first),
                      dt > UINT32_MAX ? UINT32_MAX : (uint32_t)dt);
        }
    }
    if (rc != 0) {
        n = 0;
    }
    p = kiln_wr32(p, (uint32_t)rc);
    p = kiln_wr16(p, (uint16_t)KILN_NUM_LAYERS);
    p = kiln_wr16(p, first);
    p = kiln_wr16(p, n);
    p = kiln_wr64(p, total);
    *out = p + 4u * n;
    return rc == 0 ? KILN_RPC_OK : KILN_RPC_ERR_MODEL;
}

/* 1 <= repeat <= KILN_RPC_MAX_REPEAT and warmup <= KILN_RPC_MAX_REPEAT (a
 * variable, not the macro, so that the default limit raises no always-true
 * comparison warnings). */
static const uint32_t kiln_rpc_max_repeat = KILN_RPC_MAX_REPEAT;

static int kiln_rpc_counts_ok(uint32_t repeat, uint32_t warmup)
{
    return repeat >= 1u && repeat <= kiln_rpc_max_repeat && warmup <= kiln_rpc_max_repeat;
}

static int kiln_rpc_is_long(uint8_t cmd)
{
    return cmd == KILN_RPC_CMD_RUN || cmd == KILN_RPC_CMD_TIME || cmd == KILN_RPC_CMD_PROFILE ||
           cmd == KILN_RPC_CMD_TUNE_RUN || cmd == KILN_RPC_CMD_STEP;
}

/* Dispatch one request. `in`/`n` is the payload; the response payload is built
 * at `out` (status byte already reserved at out[-1]); *end gets its end.
 * Returns the status byte. */
static int kiln_rpc_dispatch(kiln_rpc_server_t *s, uint8_t cmd, const uint8_t *in, size_t n,
                             uint8_t *out, uint8_t **end, int *exit_after)
{
    *end = out;
    if (!s->session && cmd != KILN_RPC_CMD_HELLO && cmd != KILN_RPC_CMD_INFO &&
        cmd != KILN_RPC_CMD_ECHO && cmd != KILN_RPC_CMD_RESET) {
        return KILN_RPC_ERR_NO_SESSION;
    }
    switch (cmd) {
    case KILN_RPC_CMD_HELLO:
        /* u32 session token, u16 host max payload (informative) */
        if (n != 6) {
            return KILN_RPC_ERR_LENGTH;
        }
        s->session = 1;
        s->session_token = kiln_rd32(in);
        kiln_reset(); /* a session starts from the model's initial state */
        *end = kiln_rpc_identity(s, out);
        return KILN_RPC_OK;

    case KILN_RPC_CMD_INFO:
        if (n != 0) {
            return KILN_RPC_ERR_LENGTH;
        }
        *end = kiln_rpc_identity(s, out);
        return KILN_RPC_OK;

    case KILN_RPC_CMD_ECHO:
        if (n > KILN_RPC_MAX_PAYLOAD - 1u) {
            return KILN_RPC_ERR_LENGTH;
        }
        memmove(out, in, n);
        *end = out + n;
        return KILN_RPC_OK;

    case KILN_RPC_CMD_TENSOR: {
        /* u8 space, u8 index, u16 variant -> u32 bytes, u32 offset, u8 writable */
        kiln_rpc_region_t r;
        int st;
        if (n != 4) {
            return KILN_RPC_ERR_LENGTH;
        }
        st = kiln_rpc_lookup(in[0], in[1], kiln_rd16(in + 2), &r);
        if (st != KILN_RPC_OK) {
            return st;
        }
        out = kiln_wr32(out, r.bytes);
        out = kiln_wr32(out, r.offset);
        *out++ = r.writable;
        *end = out;
        return KILN_RPC_OK;
    }

    case KILN_RPC_CMD_WRITE: {
        /* u8 space, u8 index, u16 variant, u32 offset, data[n - 8] */
        kiln_rpc_region_t r;
        uint32_t offset, len;
        int st;
        if (n < 8) {
            return KILN_RPC_ERR_LENGTH;
        }
        st = kiln_rpc_lookup(in[0], in[1], kiln_rd16(in + 2), &r);
        if (st != KILN_RPC_OK) {
            return st;
        }
        if (!r.writable) {
            return KILN_RPC_ERR_ARG;
        }
        offset = kiln_rd32(in + 4);
        len = (uint32_t)(n - 8);
        if (!kiln_rpc_span_ok(&r, offset, len)) {
            return KILN_RPC_ERR_RANGE;
        }
        memcpy(kiln_rpc_arena_buf + r.offset + offset, in + 8, len);
        return KILN_RPC_OK;
    }

    case KILN_RPC_CMD_READ: {
        /* u8 space, u8 index, u16 variant, u32 offset, u16 length -> data */
        kiln_rpc_region_t r;
        uint32_t offset, len;
        int st;
        if (n != 10) {
            return KILN_RPC_ERR_LENGTH;
        }
        st = kiln_rpc_lookup(in[0], in[1], kiln_rd16(in + 2), &r);
        if (st != KILN_RPC_OK) {
            return st;
        }
        offset = kiln_rd32(in + 4);
        len = kiln_rd16(in + 8);
        if (len > KILN_RPC_MAX_PAYLOAD - 1u || !kiln_rpc_span_ok(&r, offset, len)) {
            return KILN_RPC_ERR_RANGE;
        }
        memcpy(out, kiln_rpc_arena_buf + r.offset + offset, len);
        *end = out + len;
        return KILN_RPC_OK;
    }

    case KILN_RPC_CMD_RUN: {
        /* u8 flags, u8 pad[3], u32 input crc32 -> i32 rc, u64 ticks, u32 output crc32
         * (or, on KILN_RPC_ERR_INPUT_CRC: u32 crc32 of the inputs found) */
        uint64_t t0, dt;
        int rc;
        if (n != 8) {
            return KILN_RPC_ERR_LENGTH;
        }
        if (in[0] & KILN_RPC_RUN_CHECK_INPUT) {
            const uint32_t found = kiln_rpc_crc_space(kiln_rpc_inputs, KILN_NUM_INPUTS);
            if (found != kiln_rd32(in + 4)) {
                *end = kiln_wr32(out, found);
                return KILN_RPC_ERR_INPUT_CRC;
            }
        }
        t0 = kiln_platform_ticks();
        rc = kiln_run(NULL, NULL, kiln_rpc_arena_buf);
        dt = kiln_platform_ticks() - t0;
        out = kiln_wr32(out, (uint32_t)rc);
        out = kiln_wr64(out, dt);
        out = kiln_wr32(out, kiln_rpc_crc_space(kiln_rpc_outputs, KILN_NUM_OUTPUTS));
        *end = out;
        return rc == 0 ? KILN_RPC_OK : KILN_RPC_ERR_MODEL;
    }

    case KILN_RPC_CMD_TIME: {
        /* u16 warmup, u16 pad, u32 repeat -> see kiln_rpc_time */
        uint32_t repeat;
        int st;
        if (n != 8) {
            return KILN_RPC_ERR_LENGTH;
        }
        repeat = kiln_rd32(in + 4);
        if (!kiln_rpc_counts_ok(repeat, kiln_rd16(in))) {
            return KILN_RPC_ERR_ARG;
        }
        st = kiln_rpc_time(kiln_rpc_run_model, NULL, kiln_rd16(in), repeat, &out);
        *end = out;
        return st;
    }

    case KILN_RPC_CMD_PROFILE: {
        /* u16 first, u16 count, u16 warmup -> see kiln_rpc_profile */
        int st;
        if (n != 6) {
            return KILN_RPC_ERR_LENGTH;
        }
        if (!kiln_rpc_counts_ok(1, kiln_rd16(in + 4))) {
            return KILN_RPC_ERR_ARG;
        }
        st = kiln_rpc_profile(kiln_rd16(in), kiln_rd16(in + 2), kiln_rd16(in + 4), &out);
        *end = out;
        return st;
    }

    case KILN_RPC_CMD_LAYER: {
        /* u16 index -> u8 length, name */
        const uint16_t index = n == 2 ? kiln_rd16(in) : 0;
        if (n != 2) {
            return KILN_RPC_ERR_LENGTH;
        }
        if ((uint32_t)index >= kiln_rpc_num_layers) {
            return KILN_RPC_ERR_RANGE;
        }
        *end = kiln_wr_str(out, kiln_layer_names[index], KILN_RPC_MAX_LAYER_NAME);
        return KILN_RPC_OK;
    }

    case KILN_RPC_CMD_TUNE_INFO: {
        /* u16 variant -> u16 num_variants, u8 num_buffers,
         * num_buffers x (u8 flags, u32 bytes, u32 offset), u8 length, name */
#ifdef KILN_HAS_TUNING
        const kiln_tune_variant_t *v;
        uint8_t i, nb;
        if (n != 2) {
            return KILN_RPC_ERR_LENGTH;
        }
        if (kiln_rd16(in) >= kiln_tune_num_variants) {
            return KILN_RPC_ERR_ARG;
        }
        v = &kiln_tune_variants[kiln_rd16(in)];
        nb = v->num_buffers > KILN_TUNE_MAX_BUFFERS ? (uint8_t)KILN_TUNE_MAX_BUFFERS : v->num_buffers;
        out = kiln_wr16(out, kiln_tune_num_variants);
        *out++ = nb;
        for (i = 0; i < nb; ++i) {
            *out++ = v->buffers[i].flags;
            out = kiln_wr32(out, v->buffers[i].bytes);
            out = kiln_wr32(out, v->buffers[i].offset);
        }
        *end = kiln_wr_str(out, v->name, KILN_RPC_MAX_STRING);
        return KILN_RPC_OK;
#else
        (void)in;
        return n == 2 ? KILN_RPC_ERR_UNSUPPORTED : KILN_RPC_ERR_LENGTH;
#endif
    }

    case KILN_RPC_CMD_TUNE_RUN: {
        /* u16 variant, u16 warmup, u32 repeat -> as TIME */
#ifdef KILN_HAS_TUNING
        const kiln_tune_variant_t *v;
        uint32_t repeat;
        uint8_t i;
        int st;
        if (n != 8) {
            return KILN_RPC_ERR_LENGTH;
        }
        if (kiln_rd16(in) >= kiln_tune_num_variants) {
            return KILN_RPC_ERR_ARG;
        }
        v = &kiln_tune_variants[kiln_rd16(in)];
        repeat = kiln_rd32(in + 4);
        if (!kiln_rpc_counts_ok(repeat, kiln_rd16(in + 2)) || v->run == NULL) {
            return KILN_RPC_ERR_ARG;
        }
        for (i = 0; i < v->num_buffers && i < KILN_TUNE_MAX_BUFFERS; ++i) {
            kiln_rpc_region_t r;
            st = kiln_rpc_lookup(KILN_RPC_SPACE_TUNE, i, kiln_rd16(in), &r);
            if (st != KILN_RPC_OK) {
                return st; /* never run a variant whose buffers leave the arena */
            }
        }
        st = kiln_rpc_time(kiln_rpc_run_variant, v, kiln_rd16(in + 2), repeat, &out);
        *end = out;
        return st;
#else
        (void)in;
        return n == 8 ? KILN_RPC_ERR_UNSUPPORTED : KILN_RPC_ERR_LENGTH;
#endif
    }

    case KILN_RPC_CMD_STEP: {
        /* u16 first, u16 count -> i32 rc, u64 ticks. Layers [first, first + count), in
         * order, on whatever the arena holds: the host steps through a run and reads each
         * layer's output (ARENA space) before a later layer writes over it. */
        uint32_t first, count, layer;
        uint64_t t0, dt;
        int rc = 0;
        if (n != 4) {
            return KILN_RPC_ERR_LENGTH;
        }
        first = kiln_rd16(in);
        count = kiln_rd16(in + 2);
        if (count == 0u || first >= kiln_rpc_num_layers ||
            count > kiln_rpc_num_layers - first) {
            return KILN_RPC_ERR_RANGE;
        }
        t0 = kiln_platform_ticks();
        for (layer = first; layer < first + count && rc == 0; ++layer) {
            rc = kiln_run_layer((int32_t)layer, kiln_rpc_arena_buf);
        }
        dt = kiln_platform_ticks() - t0;
        out = kiln_wr32(out, (uint32_t)rc);
        *end = kiln_wr64(out, dt);
        return rc == 0 ? KILN_RPC_OK : KILN_RPC_ERR_MODEL;
    }

    case KILN_RPC_CMD_RESET:
        /* u8 mode: 0 end the session, zero the arena and reset the model state; 1 leave
         * kiln_rpc_serve(); 2 reset the model state (kiln_reset), the session goes on */
        if (n != 1) {
            return KILN_RPC_ERR_LENGTH;
        }
        if (in[0] == 0) {
            s->session = 0;
            s->session_token = 0;
            memset(kiln_rpc_arena_buf, 0, sizeof(kiln_rpc_arena_buf));
            kiln_reset();
        } else if (in[0] == 1) {
            *exit_after = 1;
        } else if (in[0] == 2) {
            kiln_reset();
        } else {
            return KILN_RPC_ERR_ARG;
        }
        return KILN_RPC_OK;

    default:
        return KILN_RPC_ERR_UNKNOWN_CMD;
    }
}

size_t kiln_rpc_server_handle(kiln_rpc_server_t *s, const uint8_t *body, size_t n, int *exit_after)
{
    const uint8_t cmd = body[0];
    const uint16_t seq = kiln_rd16(body + 1);
    const size_t len = n >= 7u ? n - KILN_RPC_HEADER_BYTES - KILN_RPC_CRC_BYTES : 0u;
    uint8_t *payload = s->tx_buf + KILN_RPC_HEADER_BYTES;
    uint8_t *end;
    int status;
    *exit_after = 0;
    if (n < KILN_RPC_HEADER_BYTES + KILN_RPC_CRC_BYTES || n > KILN_RPC_BODY_MAX ||
        cmd >= KILN_RPC_CMD_RESERVED_FIRST) {
        return 0; /* not a body the receiver accepted, a response / device frame (an
                   * echoing line), or a reserved request whose response would look like
                   * a device frame: not for us */
    }
    if (kiln_rpc_is_long(cmd) && s->session) {
        kiln_rpc_send_small(KILN_RPC_FRAME_ACK, seq, cmd);
    }
    s->tx_len = 0; /* the kept response is overwritten below */
    status = kiln_rpc_dispatch(s, cmd, body + KILN_RPC_HEADER_BYTES, len, payload + 1, &end,
                               exit_after);
    payload[0] = (uint8_t)status;
    s->tx_len = kiln_rpc_body_finish(s->tx_buf, (uint8_t)(cmd | KILN_RPC_RESPONSE_BIT), seq,
                                     (uint16_t)(end - payload));
    s->last_seq = seq;
    s->last_cmd = cmd;
    s->last_crc = (uint16_t)((body[n - 2] << 8) | body[n - 1]);
    return s->tx_len;
}

void kiln_rpc_server_init(kiln_rpc_server_t *s)
{
    memset(s, 0, sizeof(*s));
    kiln_rpc_rx_init(&s->rx, s->rx_buf, sizeof(s->rx_buf));
    memset(kiln_rpc_arena_buf, 0, sizeof(kiln_rpc_arena_buf));
}

void kiln_rpc_server_announce(kiln_rpc_server_t *s)
{
    uint8_t *payload = s->tx_buf + KILN_RPC_HEADER_BYTES;
    uint8_t *end;
    size_t n;
    payload[0] = KILN_RPC_OK;
    end = kiln_rpc_identity(s, payload + 1);
    n = kiln_rpc_body_finish(s->tx_buf, KILN_RPC_FRAME_BOOT, 0, (uint16_t)(end - payload));
    kiln_rpc_frame_send(s->tx_buf, n, kiln_rpc_put_platform, NULL);
    s->tx_len = 0; /* BOOT is never a kept response */
}

int kiln_rpc_server_push(kiln_rpc_server_t *s, uint8_t byte)
{
    const int st = kiln_rpc_rx_push(&s->rx, byte);
    const uint8_t *body = s->rx.buf;
    const size_t n = s->rx.len;
    int exit_after = 0;
    if (st < 0) {
        kiln_rpc_send_small(KILN_RPC_FRAME_NAK, 0xFFFFu, (uint8_t)(-st));
        return KILN_RPC_SERVE_CONTINUE;
    }
    if (st != KILN_RPC_FRAME_OK) {
        return KILN_RPC_SERVE_CONTINUE;
    }
    if (s->tx_len != 0 && body[0] == s->last_cmd && kiln_rd16(body + 1) == s->last_seq &&
        (uint16_t)((body[n - 2] << 8) | body[n - 1]) == s->last_crc) {
        /* A retransmission: our answer was lost. Answer again, do not re-run. */
        kiln_rpc_frame_send(s->tx_buf, s->tx_len, kiln_rpc_put_platform, NULL);
        return KILN_RPC_SERVE_CONTINUE;
    }
    if (kiln_rpc_server_handle(s, body, n, &exit_after) == 0) {
        return KILN_RPC_SERVE_CONTINUE;
    }
    kiln_rpc_frame_send(s->tx_buf, s->tx_len, kiln_rpc_put_platform, NULL);
    return exit_after ? KILN_RPC_SERVE_EXIT : KILN_RPC_SERVE_CONTINUE;
}

int kiln_rpc_serve(void)
{
    static kiln_rpc_server_t server;
    kiln_rpc_server_init(&server);
    kiln_rpc_server_announce(&server);
    for (;;) {
        const int c = kiln_platform_getc();
        if (c >= 0 && kiln_rpc_server_push(&server, (uint8_t)c) == KILN_RPC_SERVE_EXIT) {
            return 0;
        }
    }
}
