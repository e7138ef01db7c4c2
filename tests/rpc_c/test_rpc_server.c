/*
 * test_rpc_server.c - the RPC server with the fixture model (tests/fixtures/rpc_model)
 * and fake_platform.c: session rules, every command, every bounds check, the
 * retransmission cache. Built twice: plain and with -DKILN_HAS_TUNING (+ kiln_tune.c).
 */
#include <string.h>

#include "check.h"
#include "fake_platform.h"
#include "kiln_rpc_server.h"
#include "kiln_rpc_tune.h"
#include "model.h"

static kiln_rpc_server_t server;
static int server_exit;

/* Responses decoded from fake_out by the last request(). */
typedef struct {
    uint8_t cmd;
    uint16_t seq;
    uint8_t payload[KILN_RPC_MAX_PAYLOAD];
    uint16_t len;
} reply_t;

static reply_t replies[8];
static int num_replies;

static void sink_put(void *ctx, uint8_t byte)
{
    (void)ctx;
    server_exit |= kiln_rpc_server_push(&server, byte) == KILN_RPC_SERVE_EXIT;
}

static void decode_output(void)
{
    static uint8_t buf[KILN_RPC_BODY_MAX];
    kiln_rpc_rx_t rx;
    size_t i;
    num_replies = 0;
    CHECK(fake_out_len <= FAKE_OUT_CAP);
    kiln_rpc_rx_init(&rx, buf, sizeof(buf));
    for (i = 0; i < fake_out_len && i < FAKE_OUT_CAP; ++i) {
        const int st = kiln_rpc_rx_push(&rx, fake_out[i]);
        CHECK(st >= 0); /* the server never sends a damaged frame */
        if (st == KILN_RPC_FRAME_OK && num_replies < 8) {
            reply_t *r = &replies[num_replies++];
            r->cmd = buf[0];
            r->seq = (uint16_t)(buf[1] | (buf[2] << 8));
            r->len = (uint16_t)(buf[3] | (buf[4] << 8));
            memcpy(r->payload, buf + KILN_RPC_HEADER_BYTES, r->len);
        }
    }
    fake_out_len = 0;
}

/* Send one request frame to the server; return its response (the last frame). */
static const reply_t *request(uint8_t cmd, uint16_t seq, const uint8_t *payload, size_t n)
{
    static uint8_t body[KILN_RPC_BODY_MAX];
    size_t len;
    if (n > 0) {
        memcpy(body + KILN_RPC_HEADER_BYTES, payload, n);
    }
    len = kiln_rpc_body_finish(body, cmd, seq, (uint16_t)n);
    fake_out_len = 0;
    kiln_rpc_frame_send(body, len, sink_put, NULL);
    decode_output();
    return num_replies ? &replies[num_replies - 1] : NULL;
}

static int status_of(const reply_t *r) { return r && r->len ? r->payload[0] : -1; }

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static size_t mem_req(uint8_t *p, uint8_t space, uint8_t index, uint16_t variant, uint32_t offset)
{
    p[0] = space;
    p[1] = index;
    p[2] = (uint8_t)variant;
    p[3] = (uint8_t)(variant >> 8);
    p[4] = (uint8_t)offset;
    p[5] = (uint8_t)(offset >> 8);
    p[6] = (uint8_t)(offset >> 16);
    p[7] = (uint8_t)(offset >> 24);
    return 8;
}

static int do_write(uint16_t seq, uint8_t space, uint8_t index, uint16_t variant, uint32_t offset,
                    const uint8_t *data, size_t n)
{
    static uint8_t p[KILN_RPC_MAX_PAYLOAD + 8];
    const size_t h = mem_req(p, space, index, variant, offset);
    memcpy(p + h, data, n);
    return status_of(request(KILN_RPC_CMD_WRITE, seq, p, h + n));
}

static const reply_t *do_read(uint16_t seq, uint8_t space, uint8_t index, uint16_t variant,
                              uint32_t offset, uint16_t len)
{
    uint8_t p[10];
    mem_req(p, space, index, variant, offset);
    p[8] = (uint8_t)len;
    p[9] = (uint8_t)(len >> 8);
    return request(KILN_RPC_CMD_READ, seq, p, 10);
}

static void hello(uint16_t seq)
{
    static const uint8_t p[6] = {0x78, 0x56, 0x34, 0x12, 0x00, 0x04};
    const reply_t *r = request(KILN_RPC_CMD_HELLO, seq, p, 6);
    CHECK_EQ(status_of(r), KILN_RPC_OK);
}

static void test_boot_and_session(void)
{
    const reply_t *r;
    fake_out_len = 0;
    kiln_rpc_server_init(&server);
    kiln_rpc_server_announce(&server);
    decode_output();
    CHECK_EQ(num_replies, 1);
    CHECK_EQ(replies[0].cmd, KILN_RPC_FRAME_BOOT);
    CHECK(memcmp(replies[0].payload + 1, "KILN", 4) == 0);

    /* no session: READ refused, INFO and ECHO answered */
    r = do_read(1, KILN_RPC_SPACE_OUTPUT, 0, 0, 0, 4);
    CHECK_EQ(status_of(r), KILN_RPC_ERR_NO_SESSION);
    r = request(KILN_RPC_CMD_INFO, 2, NULL, 0);
    CHECK_EQ(status_of(r), KILN_RPC_OK);
    CHECK_EQ(r->cmd, KILN_RPC_CMD_INFO | 0x80);
    CHECK_EQ(r->seq, 2);
    CHECK_EQ(r->payload[6] & KILN_RPC_INFO_SESSION, 0);
    r = request(KILN_RPC_CMD_ECHO, 3, (const uint8_t *)"ab\0c", 4);
    CHECK_EQ(status_of(r), KILN_RPC_OK);
    CHECK_EQ(r->len, 5);
    CHECK(memcmp(r->payload + 1, "ab\0c", 4) == 0);

    hello(4);
    r = &replies[num_replies - 1];
    /* identity block: magic, version, flags, max payload, tick hz, arena, ins, outs, layers */
    CHECK(memcmp(r->payload + 1, "KILN", 4) == 0);
    CHECK_EQ(r->payload[5], KILN_RPC_PROTOCOL_VERSION);
    CHECK(r->payload[6] & KILN_RPC_INFO_SESSION);
    CHECK_EQ(r->payload[7] | (r->payload[8] << 8), KILN_RPC_MAX_PAYLOAD);
    CHECK_EQ(rd32(r->payload + 9), 1000);
    CHECK_EQ(rd32(r->payload + 13), KILN_ARENA_BYTES);
    CHECK_EQ(r->payload[17], KILN_NUM_INPUTS);
    CHECK_EQ(r->payload[18], KILN_NUM_OUTPUTS);
    CHECK_EQ(r->payload[19], KILN_NUM_LAYERS);
    CHECK_EQ(rd32(r->payload + 23), 0x12345678u);
    CHECK_EQ(r->payload[27], 4); /* "host" */
    CHECK(memcmp(r->payload + 28, "host", 4) == 0);
}

static void test_lengths_and_unknown(void)
{
    static const uint8_t zeros[16];
    static const struct {
        uint8_t cmd;
        uint8_t bad_len;
    } cases[] = {
        {KILN_RPC_CMD_HELLO, 5},  {KILN_RPC_CMD_INFO, 1},     {KILN_RPC_CMD_TENSOR, 3},
        {KILN_RPC_CMD_WRITE, 7},  {KILN_RPC_CMD_READ, 9},     {KILN_RPC_CMD_RUN, 7},
        {KILN_RPC_CMD_TIME, 9},   {KILN_RPC_CMD_PROFILE, 5},  {KILN_RPC_CMD_LAYER, 3},
        {KILN_RPC_CMD_TUNE_INFO, 1}, {KILN_RPC_CMD_TUNE_RUN, 7}, {KILN_RPC_CMD_RESET, 0},
    };
    size_t i;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        const reply_t *r = request(cases[i].cmd, (uint16_t)(100 + i), zeros, cases[i].bad_len);
        CHECK_EQ(status_of(r), KILN_RPC_ERR_LENGTH);
    }
    CHECK_EQ(status_of(request(0x00, 200, NULL, 0)), KILN_RPC_ERR_UNKNOWN_CMD);
    CHECK_EQ(status_of(request(0x7C, 201, NULL, 0)), KILN_RPC_ERR_UNKNOWN_CMD);
    /* reserved requests (their responses would read as BOOT/ACK/NAK) and response-range
     * frames (an echoing line) get no answer at all */
    CHECK(request(0x7D, 205, NULL, 0) == NULL);
    CHECK(request(0x7F, 206, NULL, 0) == NULL);
    CHECK(request(0x85, 202, zeros, 1) == NULL);
    CHECK(request(KILN_RPC_FRAME_NAK, 0xFFFF, zeros, 1) == NULL);
    /* ECHO of a full payload does not fit status + payload */
    {
        static uint8_t big[KILN_RPC_MAX_PAYLOAD];
        CHECK_EQ(status_of(request(KILN_RPC_CMD_ECHO, 203, big, KILN_RPC_MAX_PAYLOAD)),
                 KILN_RPC_ERR_LENGTH);
        CHECK_EQ(status_of(request(KILN_RPC_CMD_ECHO, 204, big, KILN_RPC_MAX_PAYLOAD - 1)),
                 KILN_RPC_OK);
    }
}

/* Every way to point outside a buffer is RANGE, and nothing is written. */
static void test_bounds(void)
{
    static uint8_t data[KILN_RPC_MAX_PAYLOAD];
    uint8_t *arena = kiln_rpc_arena();
    const uint32_t in0 = KILN_INPUT_0_BYTES;
    const reply_t *r;
    uint8_t p[10];
    memset(data, 0xAB, sizeof(data));
    memset(arena, 0, kiln_rpc_arena_bytes());

    CHECK_EQ(do_write(300, 0, 0, 0, 0, data, 16), KILN_RPC_OK);
    CHECK_EQ(arena[KILN_INPUT_0_OFFSET + 15], 0xAB);
    CHECK_EQ(do_write(301, 0, 0, 0, in0 - 4, data, 4), KILN_RPC_OK);  /* ends exactly at the end */
    CHECK_EQ(do_write(302, 0, 0, 0, in0 - 3, data, 4), KILN_RPC_ERR_RANGE);
    CHECK_EQ(do_write(303, 0, 0, 0, in0, data, 1), KILN_RPC_ERR_RANGE);
    CHECK_EQ(do_write(304, 0, 0, 0, in0, data, 0), KILN_RPC_OK);        /* empty at the end */
    CHECK_EQ(do_write(305, 0, 0, 0, in0 + 1, data, 0), KILN_RPC_ERR_RANGE);
    CHECK_EQ(do_write(306, 0, 0, 0, 0xFFFFFFFFu, data, 1), KILN_RPC_ERR_RANGE);
    CHECK_EQ(do_write(307, 0, 0, 0, 0xFFFFFFF0u, data, 32), KILN_RPC_ERR_RANGE);
    CHECK_EQ(do_write(308, 0, 1, 0, 0, data, 9), KILN_RPC_ERR_RANGE);   /* in1 is 8 bytes */
    CHECK_EQ(do_write(309, 0, 2, 0, 0, data, 1), KILN_RPC_ERR_ARG);     /* no input 2 */
    CHECK_EQ(do_write(310, 0, 255, 0, 0, data, 1), KILN_RPC_ERR_ARG);
    CHECK_EQ(do_write(311, 1, 0, 0, 0, data, 1), KILN_RPC_ERR_ARG);     /* outputs are read-only */
    CHECK_EQ(do_write(312, 3, 0, 0, 0, data, 1), KILN_RPC_ERR_ARG);     /* no space 3 */
    CHECK_EQ(do_write(313, 255, 0, 0, 0, data, 1), KILN_RPC_ERR_ARG);
    /* the rejected writes left in1, out0 and what follows in0 untouched */
    CHECK_EQ(arena[KILN_INPUT_1_OFFSET], 0);
    CHECK_EQ(arena[KILN_OUTPUT_0_OFFSET], 0);

    r = do_read(320, 1, 0, 0, 0, 16);
    CHECK_EQ(status_of(r), KILN_RPC_OK);
    CHECK_EQ(r->len, 17);
    CHECK_EQ(status_of(do_read(321, 1, 1, 0, 0, 5)), KILN_RPC_ERR_RANGE);  /* out1 is 4 bytes */
    CHECK_EQ(status_of(do_read(322, 1, 1, 0, 4, 0)), KILN_RPC_OK);
    CHECK_EQ(status_of(do_read(323, 1, 1, 0, 5, 0)), KILN_RPC_ERR_RANGE);
    CHECK_EQ(status_of(do_read(324, 1, 0, 0, 0xFFFFFFFFu, 2)), KILN_RPC_ERR_RANGE);
    CHECK_EQ(status_of(do_read(325, 0, 0, 0, 0, KILN_RPC_MAX_PAYLOAD)), KILN_RPC_ERR_RANGE);
    CHECK_EQ(status_of(do_read(326, 0, 0, 0, 0, KILN_RPC_MAX_PAYLOAD - 1)), KILN_RPC_OK);
    CHECK_EQ(status_of(do_read(327, 1, 2, 0, 0, 1)), KILN_RPC_ERR_ARG);
    CHECK_EQ(status_of(do_read(328, 0, 0, 0, 0, 0xFFFF)), KILN_RPC_ERR_RANGE);

    /* TENSOR */
    p[0] = 0;
    p[1] = 0;
    p[2] = 0;
    p[3] = 0;
    r = request(KILN_RPC_CMD_TENSOR, 330, p, 4);
    CHECK_EQ(status_of(r), KILN_RPC_OK);
    CHECK_EQ(rd32(r->payload + 1), KILN_INPUT_0_BYTES);
    CHECK_EQ(rd32(r->payload + 5), KILN_INPUT_0_OFFSET);
    CHECK_EQ(r->payload[9], 1);
    p[0] = 1;
    p[1] = 1;
    r = request(KILN_RPC_CMD_TENSOR, 331, p, 4);
    CHECK_EQ(rd32(r->payload + 1), KILN_OUTPUT_1_BYTES);
    CHECK_EQ(r->payload[9], 0);
    p[1] = 9;
    CHECK_EQ(status_of(request(KILN_RPC_CMD_TENSOR, 332, p, 4)), KILN_RPC_ERR_ARG);
}

static uint32_t crc_inputs(void)
{
    const uint8_t *arena = kiln_rpc_arena();
    uint32_t crc = kiln_rpc_crc32(0, arena + KILN_INPUT_0_OFFSET, KILN_INPUT_0_BYTES);
    return kiln_rpc_crc32(crc, arena + KILN_INPUT_1_OFFSET, KILN_INPUT_1_BYTES);
}

static void test_run_time_profile(void)
{
    static uint8_t x0[KILN_INPUT_0_BYTES];
    uint8_t x1[8] = {1, 2, 3, 4, 5, 6, 7, -8 & 0xFF};
    uint8_t p[8];
    const reply_t *r;
    uint32_t crc, i;
    for (i = 0; i < sizeof(x0); ++i) {
        x0[i] = (uint8_t)(i * 7u);
    }
    for (i = 0; i < sizeof(x0); i += 1000) {
        const uint32_t n = sizeof(x0) - i < 1000 ? (uint32_t)sizeof(x0) - i : 1000;
        CHECK_EQ(do_write((uint16_t)(400 + i / 1000), 0, 0, 0, i, x0 + i, n), KILN_RPC_OK);
    }
    CHECK_EQ(do_write(410, 0, 1, 0, 0, x1, 8), KILN_RPC_OK);
    crc = crc_inputs();

    /* wrong input CRC: refused, the CRC found comes back */
    memset(p, 0, sizeof(p));
    p[0] = KILN_RPC_RUN_CHECK_INPUT;
    p[4] = (uint8_t)~crc;
    r = request(KILN_RPC_CMD_RUN, 411, p, 8);
    CHECK_EQ(num_replies, 2); /* ACK, then the answer */
    CHECK_EQ(replies[0].cmd, KILN_RPC_FRAME_ACK);
    CHECK_EQ(replies[0].seq, 411);
    CHECK_EQ(status_of(r), KILN_RPC_ERR_INPUT_CRC);
    CHECK_EQ(rd32(r->payload + 1), crc);

    p[4] = (uint8_t)crc;
    p[5] = (uint8_t)(crc >> 8);
    p[6] = (uint8_t)(crc >> 16);
    p[7] = (uint8_t)(crc >> 24);
    r = request(KILN_RPC_CMD_RUN, 412, p, 8);
    CHECK_EQ(status_of(r), KILN_RPC_OK);
    CHECK_EQ(rd32(r->payload + 1), 0);   /* rc */
    CHECK_EQ(rd32(r->payload + 5), 7);   /* ticks: one fake tick step */
    {
        const uint8_t *arena = kiln_rpc_arena();
        uint32_t out_crc = kiln_rpc_crc32(0, arena + KILN_OUTPUT_0_OFFSET, KILN_OUTPUT_0_BYTES);
        out_crc = kiln_rpc_crc32(out_crc, arena + KILN_OUTPUT_1_OFFSET, KILN_OUTPUT_1_BYTES);
        CHECK_EQ(rd32(r->payload + 13), out_crc);
        CHECK_EQ(arena[KILN_OUTPUT_0_OFFSET + 5], (uint8_t)(x0[5] + 1));
        CHECK_EQ((int32_t)rd32(arena + KILN_OUTPUT_1_OFFSET), 1 + 2 + 3 + 4 + 5 + 6 + 7 - 8 + 0);
        CHECK_EQ(arena[KILN_INPUT_0_OFFSET], 0x5A); /* the fixture clobbered its input */
    }

    /* the same request again (a lost answer): the kept answer, no re-run, no ACK */
    r = request(KILN_RPC_CMD_RUN, 412, p, 8);
    CHECK_EQ(num_replies, 1);
    CHECK_EQ(status_of(r), KILN_RPC_OK);
    /* a new seq with the same payload does run, and sees the clobbered input */
    r = request(KILN_RPC_CMD_RUN, 413, p, 8);
    CHECK_EQ(status_of(r), KILN_RPC_ERR_INPUT_CRC);

    /* TIME: repeat 0 refused; 5 runs after 2 warm-ups, 7 fake ticks each */
    memset(p, 0, sizeof(p));
    CHECK_EQ(status_of(request(KILN_RPC_CMD_TIME, 420, p, 8)), KILN_RPC_ERR_ARG);
    p[0] = 2;
    p[4] = 5;
    r = request(KILN_RPC_CMD_TIME, 421, p, 8);
    CHECK_EQ(status_of(r), KILN_RPC_OK);
    CHECK_EQ(rd32(r->payload + 5), 5);  /* runs */
    CHECK_EQ(rd32(r->payload + 9), 35); /* total */
    CHECK_EQ(rd32(r->payload + 17), 7); /* min */
    CHECK_EQ(rd32(r->payload + 25), 7); /* max */
    CHECK_EQ(rd32(r->payload + 33), 1000);

    /* PROFILE all layers; from layer 1; out of range */
    memset(p, 0, sizeof(p));
    p[2] = 10; /* count 10 > 3 layers: cut */
    r = request(KILN_RPC_CMD_PROFILE, 430, p, 6);
    CHECK_EQ(status_of(r), KILN_RPC_OK);
    CHECK_EQ(r->payload[5], KILN_NUM_LAYERS);
    CHECK_EQ(r->payload[9], KILN_NUM_LAYERS); /* n */
    CHECK_EQ(rd32(r->payload + 11), 21);      /* total */
    CHECK_EQ(rd32(r->payload + 19), 7);
    CHECK_EQ(r->len, 19 + 4 * KILN_NUM_LAYERS);
    p[0] = 1;
    r = request(KILN_RPC_CMD_PROFILE, 431, p, 6);
    CHECK_EQ(r->payload[7], 1);
    CHECK_EQ(r->payload[9], KILN_NUM_LAYERS - 1);
    p[0] = KILN_NUM_LAYERS;
    CHECK_EQ(status_of(request(KILN_RPC_CMD_PROFILE, 432, p, 6)), KILN_RPC_ERR_RANGE);
    p[0] = 0xFF;
    p[1] = 0xFF;
    CHECK_EQ(status_of(request(KILN_RPC_CMD_PROFILE, 433, p, 6)), KILN_RPC_ERR_RANGE);

    /* LAYER names */
    p[0] = 2;
    p[1] = 0;
    r = request(KILN_RPC_CMD_LAYER, 440, p, 2);
    CHECK_EQ(status_of(r), KILN_RPC_OK);
    CHECK_EQ(r->payload[1], 7);
    CHECK(memcmp(r->payload + 2, "clobber", 7) == 0);
    p[0] = KILN_NUM_LAYERS;
    CHECK_EQ(status_of(request(KILN_RPC_CMD_LAYER, 441, p, 2)), KILN_RPC_ERR_RANGE);

    /* a model error is MODEL with its return code */
    x1[0] = 0x7F;
    x1[1] = 0x7F;
    CHECK_EQ(do_write(450, 0, 1, 0, 0, x1, 8), KILN_RPC_OK);
    memset(p, 0, sizeof(p));
    r = request(KILN_RPC_CMD_RUN, 451, p, 8);
    CHECK_EQ(status_of(r), KILN_RPC_ERR_MODEL);
    CHECK_EQ(rd32(r->payload + 1), 3);
    p[4] = 1;
    r = request(KILN_RPC_CMD_TIME, 452, p, 8);
    CHECK_EQ(status_of(r), KILN_RPC_ERR_MODEL);
    CHECK_EQ(rd32(r->payload + 5), 0); /* no run timed */
}

static void test_tuning(void)
{
    uint8_t p[8] = {0, 0, 0, 0, 1, 0, 0, 0};
#ifdef KILN_HAS_TUNING
    static uint8_t data[256];
    const reply_t *r;
    int i;
    r = request(KILN_RPC_CMD_TUNE_INFO, 500, p, 2);
    CHECK_EQ(status_of(r), KILN_RPC_OK);
    CHECK_EQ(r->payload[1], 3);    /* variants */
    CHECK_EQ(r->payload[3], 2);    /* buffers */
    CHECK_EQ(r->payload[4], 0);    /* buffer 0 is an input */
    CHECK_EQ(rd32(r->payload + 5), 256);
    CHECK_EQ(r->payload[13], KILN_TUNE_BUFFER_OUTPUT);
    for (i = 0; i < 256; ++i) {
        data[i] = (uint8_t)i;
    }
    CHECK_EQ(do_write(501, KILN_RPC_SPACE_TUNE, 0, 1, 0, data, 256), KILN_RPC_OK);
    CHECK_EQ(do_write(502, KILN_RPC_SPACE_TUNE, 1, 1, 0, data, 1), KILN_RPC_ERR_ARG); /* output */
    CHECK_EQ(do_write(503, KILN_RPC_SPACE_TUNE, 0, 1, 1, data, 256), KILN_RPC_ERR_RANGE);
    CHECK_EQ(do_write(504, KILN_RPC_SPACE_TUNE, 2, 1, 0, data, 1), KILN_RPC_ERR_ARG);
    CHECK_EQ(do_write(505, KILN_RPC_SPACE_TUNE, 0, 3, 0, data, 1), KILN_RPC_ERR_ARG);
    /* variant 2 declares a buffer outside the arena: refused for I/O and for running */
    CHECK_EQ(do_write(506, KILN_RPC_SPACE_TUNE, 0, 2, 0, data, 1), KILN_RPC_ERR_RANGE);
    p[0] = 2;
    CHECK_EQ(status_of(request(KILN_RPC_CMD_TUNE_RUN, 507, p, 8)), KILN_RPC_ERR_RANGE);
    p[0] = 1;
    r = request(KILN_RPC_CMD_TUNE_RUN, 508, p, 8);
    CHECK_EQ(status_of(r), KILN_RPC_OK);
    CHECK_EQ(rd32(r->payload + 5), 1);
    r = do_read(509, KILN_RPC_SPACE_TUNE, 1, 1, 0, 256);
    CHECK_EQ(status_of(r), KILN_RPC_OK);
    CHECK_EQ(r->payload[1 + 255], 0); /* 255 + 1 wraps */
    CHECK_EQ(r->payload[1 + 9], 10);
    p[0] = 9;
    CHECK_EQ(status_of(request(KILN_RPC_CMD_TUNE_RUN, 510, p, 8)), KILN_RPC_ERR_ARG);
    p[0] = 0;
    p[4] = 0;
    CHECK_EQ(status_of(request(KILN_RPC_CMD_TUNE_RUN, 511, p, 8)), KILN_RPC_ERR_ARG);
#else
    CHECK_EQ(status_of(request(KILN_RPC_CMD_TUNE_INFO, 500, p, 2)), KILN_RPC_ERR_UNSUPPORTED);
    CHECK_EQ(status_of(request(KILN_RPC_CMD_TUNE_RUN, 501, p, 8)), KILN_RPC_ERR_UNSUPPORTED);
    CHECK_EQ(status_of(do_read(502, KILN_RPC_SPACE_TUNE, 0, 0, 0, 1)), KILN_RPC_ERR_UNSUPPORTED);
#endif
}

static void test_noise_and_reset(void)
{
    static const uint8_t garbage[] = {0x13, 0x37, 0x00, 0xFF, 0xFE, 0x01, 0x00, 0x42};
    uint8_t mode;
    uint32_t resets;
    size_t i;
    /* garbage: one NAK per damaged frame, then requests work */
    fake_out_len = 0;
    for (i = 0; i < sizeof(garbage); ++i) {
        kiln_rpc_server_push(&server, garbage[i]);
    }
    decode_output();
    CHECK_EQ(num_replies, 2);
    CHECK_EQ(replies[0].cmd, KILN_RPC_FRAME_NAK);
    CHECK_EQ(replies[0].seq, 0xFFFF);
    CHECK_EQ(status_of(request(KILN_RPC_CMD_INFO, 600, NULL, 0)), KILN_RPC_OK);

    mode = 3;
    CHECK_EQ(status_of(request(KILN_RPC_CMD_RESET, 601, &mode, 1)), KILN_RPC_ERR_ARG);
    /* mode 2 resets the model state and keeps the session; so do HELLO and mode 0 */
    resets = fixture_resets;
    mode = 2;
    CHECK_EQ(status_of(request(KILN_RPC_CMD_RESET, 605, &mode, 1)), KILN_RPC_OK);
    CHECK_EQ(fixture_resets, resets + 1);
    CHECK_EQ(status_of(request(KILN_RPC_CMD_RESET, 605, &mode, 1)), KILN_RPC_OK);
    CHECK_EQ(fixture_resets, resets + 1);      /* a retransmission is not executed again */
    CHECK_EQ(status_of(do_read(606, 1, 0, 0, 0, 1)), KILN_RPC_OK);
    hello(607);
    CHECK_EQ(fixture_resets, resets + 2);
    CHECK(replies[num_replies - 1].payload[6] & KILN_RPC_INFO_STATE_RESET);
    mode = 0;
    CHECK_EQ(status_of(request(KILN_RPC_CMD_RESET, 602, &mode, 1)), KILN_RPC_OK);
    CHECK_EQ(fixture_resets, resets + 3);
    CHECK_EQ(status_of(do_read(603, 1, 0, 0, 0, 1)), KILN_RPC_ERR_NO_SESSION);
    CHECK_EQ(server_exit, 0);
    mode = 1;
    CHECK_EQ(status_of(request(KILN_RPC_CMD_RESET, 604, &mode, 1)), KILN_RPC_OK);
    CHECK_EQ(server_exit, 1);
}

int main(void)
{
    test_boot_and_session();
    test_lengths_and_unknown();
    test_bounds();
    test_run_time_profile();
    test_tuning();
    test_noise_and_reset();
    return check_summary();
}
