/*
 * test_rpc_frame.c - kiln_rpc_frame.c against golden frames and on damaged input.
 *
 * The golden frames are the table in crt/rpc/README.md; tests/test_rpc_frame.py
 * pins the same bytes on the Python side. Every CRC below was computed with the
 * README's recipe (CRC-16/CCITT-FALSE: poly 0x1021, init 0xFFFF, no reflection,
 * no xorout) over the body without its last two bytes, and is stored big-endian.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kiln_rpc_frame.h"
#include "kiln_rpc_wire.h"

typedef struct {
    const char *name;
    uint8_t cmd;
    uint16_t seq;
    uint8_t payload[16];
    uint16_t payload_len;
    uint16_t crc;
    uint8_t wire[32];
    size_t wire_len;
} golden_t;

static const golden_t goldens[] = {
    /* body 01 0100 0600 78563412 0004, crc16 = 0xF83E */
    {"HELLO", 0x01, 0x0001, {0x78, 0x56, 0x34, 0x12, 0x00, 0x04}, 6, 0xF83E,
     {0x00, 0x03, 0x01, 0x01, 0x02, 0x06, 0x05, 0x78, 0x56, 0x34, 0x12, 0x04, 0x04, 0xf8, 0x3e, 0x00}, 16},
    /* body 03 3412 0300 68 69 00, crc16 = 0x9D6E */
    {"ECHO", 0x03, 0x1234, {0x68, 0x69, 0x00}, 3, 0x9D6E,
     {0x00, 0x05, 0x03, 0x34, 0x12, 0x03, 0x03, 0x68, 0x69, 0x03, 0x9d, 0x6e, 0x00}, 13},
    /* body 85 0201 0100 00, crc16 = 0x9C36 */
    {"WRITE response", 0x85, 0x0102, {0x00}, 1, 0x9C36,
     {0x00, 0x05, 0x85, 0x02, 0x01, 0x01, 0x01, 0x03, 0x9c, 0x36, 0x00}, 11},
    /* body ff ffff 0100 01, crc16 = 0x6CB2 */
    {"NAK", 0xFF, 0xFFFF, {0x01}, 1, 0x6CB2,
     {0x00, 0x05, 0xff, 0xff, 0xff, 0x01, 0x04, 0x01, 0x6c, 0xb2, 0x00}, 11},
    /* body fe 0700 0100 07, crc16 = 0x3F0C */
    {"ACK", 0xFE, 0x0007, {0x07}, 1, 0x3F0C,
     {0x00, 0x03, 0xfe, 0x07, 0x02, 0x01, 0x04, 0x07, 0x3f, 0x0c, 0x00}, 11},
    /* body 06 1000 0a00 00 00 0000 00010000 4000, crc16 = 0xE480 */
    {"READ", 0x06, 0x0010, {0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x40, 0x00}, 10, 0xE480,
     {0x00, 0x03, 0x06, 0x10, 0x02, 0x0a, 0x01, 0x01, 0x01, 0x01, 0x01, 0x02, 0x01, 0x01, 0x02, 0x40,
      0x03, 0xe4, 0x80, 0x00}, 20},
    /* body 0d ff00 0100 01, crc16 = 0x3DED */
    {"RESET", 0x0D, 0x00FF, {0x01}, 1, 0x3DED,
     {0x00, 0x03, 0x0d, 0xff, 0x02, 0x01, 0x04, 0x01, 0x3d, 0xed, 0x00}, 11},
    /* body 0e 2000 0400 0300 0100, crc16 = 0xBE21 */
    {"STEP", 0x0E, 0x0020, {0x03, 0x00, 0x01, 0x00}, 4, 0xBE21,
     {0x00, 0x03, 0x0e, 0x20, 0x02, 0x04, 0x02, 0x03, 0x02, 0x01, 0x03, 0xbe, 0x21, 0x00}, 14},
    /* body 06 2100 0a00 03 00 0000 00060000 4000, crc16 = 0x12C2 */
    {"READ arena", 0x06, 0x0021, {0x03, 0x00, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x40, 0x00}, 10,
     0x12C2,
     {0x00, 0x03, 0x06, 0x21, 0x02, 0x0a, 0x02, 0x03, 0x01, 0x01, 0x01, 0x02, 0x06, 0x01, 0x02, 0x40,
      0x03, 0x12, 0xc2, 0x00}, 20},
};

typedef struct {
    uint8_t buf[4096];
    size_t len;
} sink_t;

static void sink_put(void *ctx, uint8_t byte)
{
    sink_t *s = (sink_t *)ctx;
    if (s->len < sizeof(s->buf)) {
        s->buf[s->len++] = byte;
    }
}

/* Push bytes; return the last non-NONE status (NONE if none). */
static int push_all(kiln_rpc_rx_t *rx, const uint8_t *data, size_t n)
{
    int last = KILN_RPC_FRAME_NONE;
    size_t i;
    for (i = 0; i < n; ++i) {
        const int st = kiln_rpc_rx_push(rx, data[i]);
        if (st != KILN_RPC_FRAME_NONE) {
            last = st;
        }
    }
    return last;
}

static void test_crcs(void)
{
    const uint8_t check[] = "123456789";
    CHECK_EQ(kiln_rpc_crc16(0xFFFFu, check, 9), 0x29B1);
    CHECK_EQ(kiln_rpc_crc32(0, check, 9), 0xCBF43926u);
    /* chaining CRC-32 over pieces equals one pass */
    CHECK_EQ(kiln_rpc_crc32(kiln_rpc_crc32(0, check, 4), check + 4, 5), 0xCBF43926u);
    CHECK_EQ(kiln_rpc_crc32(0, check, 0), 0);
}

static void test_goldens(void)
{
    size_t g;
    for (g = 0; g < sizeof(goldens) / sizeof(goldens[0]); ++g) {
        const golden_t *gd = &goldens[g];
        uint8_t body[64];
        uint8_t rxbuf[64];
        kiln_rpc_rx_t rx;
        sink_t sink;
        size_t n;
        memcpy(body + KILN_RPC_HEADER_BYTES, gd->payload, gd->payload_len);
        n = kiln_rpc_body_finish(body, gd->cmd, gd->seq, gd->payload_len);
        CHECK_EQ(n, gd->payload_len + 7u);
        CHECK_EQ(kiln_rpc_crc16(0xFFFFu, body, n - 2), gd->crc);
        CHECK_EQ(body[n - 2], gd->crc >> 8);
        CHECK_EQ(body[n - 1], gd->crc & 0xFF);
        sink.len = 0;
        kiln_rpc_frame_send(body, n, sink_put, &sink);
        CHECK_EQ(sink.len, gd->wire_len);
        if (sink.len == gd->wire_len && memcmp(sink.buf, gd->wire, gd->wire_len) != 0) {
            fprintf(stderr, "golden %s: wire bytes differ\n", gd->name);
            CHECK(0);
        }
        kiln_rpc_rx_init(&rx, rxbuf, sizeof(rxbuf));
        CHECK_EQ(push_all(&rx, gd->wire, gd->wire_len), KILN_RPC_FRAME_OK);
        CHECK_EQ(rx.len, n);
        CHECK(memcmp(rx.buf, body, n) == 0);
    }
}

/* ECHO seq 0xABCD, payload 1..254, 0x00, "ab": a full 254-byte COBS block. */
static void test_long_golden(void)
{
    static const uint8_t head[] = {0x00, 0xff, 0x03, 0xcd};
    static const uint8_t tail[] = {0xfd, 0xfe, 0x05, 0x61, 0x62, 0x87, 0xa6, 0x00};
    uint8_t body[300];
    uint8_t rxbuf[300];
    kiln_rpc_rx_t rx;
    sink_t sink;
    size_t n, i;
    for (i = 0; i < 254; ++i) {
        body[KILN_RPC_HEADER_BYTES + i] = (uint8_t)(i + 1);
    }
    body[KILN_RPC_HEADER_BYTES + 254] = 0x00;
    body[KILN_RPC_HEADER_BYTES + 255] = 'a';
    body[KILN_RPC_HEADER_BYTES + 256] = 'b';
    n = kiln_rpc_body_finish(body, 0x03, 0xABCD, 257);
    CHECK_EQ(kiln_rpc_crc16(0xFFFFu, body, n - 2), 0x87A6);
    sink.len = 0;
    kiln_rpc_frame_send(body, n, sink_put, &sink);
    CHECK_EQ(sink.len, 268);
    CHECK(memcmp(sink.buf, head, sizeof(head)) == 0);
    CHECK(memcmp(sink.buf + sink.len - sizeof(tail), tail, sizeof(tail)) == 0);
    kiln_rpc_rx_init(&rx, rxbuf, sizeof(rxbuf));
    CHECK_EQ(push_all(&rx, sink.buf, sink.len), KILN_RPC_FRAME_OK);
    CHECK_EQ(rx.len, n);
    CHECK(memcmp(rxbuf, body, n) == 0);
}

static void test_damage(void)
{
    const golden_t *gd = &goldens[1]; /* ECHO */
    uint8_t wire[32];
    uint8_t rxbuf[64];
    kiln_rpc_rx_t rx;
    static const uint8_t empty[] = {0x00, 0x00, 0x00};
    static const uint8_t short_frame[] = {0x00, 0x03, 0x01, 0x02, 0x00};
    static const uint8_t broken_cobs[] = {0x00, 0x09, 0x01, 0x02, 0x00};
    /* a valid CRC over a body whose len field says 4 while 3 payload bytes came */
    uint8_t body[16];
    sink_t sink;
    size_t n;

    kiln_rpc_rx_init(&rx, rxbuf, sizeof(rxbuf));
    CHECK_EQ(push_all(&rx, empty, sizeof(empty)), KILN_RPC_FRAME_NONE);
    CHECK_EQ(push_all(&rx, short_frame, sizeof(short_frame)), KILN_RPC_FRAME_ERR_LENGTH);
    CHECK_EQ(push_all(&rx, broken_cobs, sizeof(broken_cobs)), KILN_RPC_FRAME_ERR_COBS);

    memcpy(wire, gd->wire, gd->wire_len);
    wire[8] ^= 0x01; /* a payload byte */
    CHECK_EQ(push_all(&rx, wire, gd->wire_len), KILN_RPC_FRAME_ERR_CRC);
    CHECK_EQ(rx.len, 0); /* a damaged body is never shown */

    body[5] = 'x';
    body[6] = 'y';
    body[7] = 'z';
    n = kiln_rpc_body_finish(body, 0x03, 1, 3);
    body[3] = 4; /* len field lies; fix the CRC so only the length check can catch it */
    {
        const uint16_t crc = kiln_rpc_crc16(0xFFFFu, body, n - 2);
        body[n - 2] = (uint8_t)(crc >> 8);
        body[n - 1] = (uint8_t)crc;
    }
    sink.len = 0;
    kiln_rpc_frame_send(body, n, sink_put, &sink);
    CHECK_EQ(push_all(&rx, sink.buf, sink.len), KILN_RPC_FRAME_ERR_LENGTH);

    /* after all of that the next good frame decodes */
    CHECK_EQ(push_all(&rx, gd->wire, gd->wire_len), KILN_RPC_FRAME_OK);
}

static void test_overflow(void)
{
    uint8_t small[12];
    uint8_t body[64];
    kiln_rpc_rx_t rx;
    sink_t sink;
    size_t n, i;
    for (i = 0; i < 20; ++i) {
        body[KILN_RPC_HEADER_BYTES + i] = (uint8_t)(i + 1);
    }
    n = kiln_rpc_body_finish(body, 0x03, 2, 20);
    sink.len = 0;
    kiln_rpc_frame_send(body, n, sink_put, &sink);
    kiln_rpc_rx_init(&rx, small, sizeof(small));
    CHECK_EQ(push_all(&rx, sink.buf, sink.len), KILN_RPC_FRAME_ERR_OVERFLOW);
    /* a frame that fits still decodes afterwards */
    CHECK_EQ(push_all(&rx, goldens[3].wire, goldens[3].wire_len), KILN_RPC_FRAME_OK);
    /* 1,000 bytes of 0x55 without a delimiter, then a frame: one error, then OK */
    for (i = 0; i < 1000; ++i) {
        CHECK_EQ(kiln_rpc_rx_push(&rx, 0x55), KILN_RPC_FRAME_NONE);
    }
    CHECK_EQ(kiln_rpc_rx_push(&rx, 0x00), KILN_RPC_FRAME_ERR_OVERFLOW);
    CHECK_EQ(push_all(&rx, goldens[3].wire, goldens[3].wire_len), KILN_RPC_FRAME_OK);
}

/* Random bodies of every length through encode + decode, after random garbage. */
static void test_round_trip(void)
{
    static uint8_t body[KILN_RPC_BODY_MAX];
    static uint8_t rxbuf[KILN_RPC_BODY_MAX];
    static sink_t sink;
    kiln_rpc_rx_t rx;
    uint32_t seed = 12345u;
    size_t len;
    kiln_rpc_rx_init(&rx, rxbuf, sizeof(rxbuf));
    for (len = 0; len <= 700; len += (len < 300 ? 1 : 37)) {
        size_t i, n;
        int last = KILN_RPC_FRAME_NONE;
        for (i = 0; i < len; ++i) {
            seed = seed * 1103515245u + 12345u;
            /* a third zeros, to exercise stuffing */
            body[KILN_RPC_HEADER_BYTES + i] = (seed >> 16) % 3 == 0 ? 0 : (uint8_t)(seed >> 8);
        }
        n = kiln_rpc_body_finish(body, 0x03, (uint16_t)len, (uint16_t)len);
        sink.len = 0;
        for (i = 0; i < len % 17; ++i) { /* garbage before the frame */
            seed = seed * 1103515245u + 12345u;
            sink.buf[sink.len++] = (uint8_t)(seed >> 13);
        }
        kiln_rpc_frame_send(body, n, sink_put, &sink);
        for (i = 0; i < sink.len; ++i) {
            const int st = kiln_rpc_rx_push(&rx, sink.buf[i]);
            if (st == KILN_RPC_FRAME_OK) {
                last = st;
                CHECK_EQ(rx.len, n);
                CHECK(memcmp(rxbuf, body, n) == 0);
            }
        }
        CHECK_EQ(last, KILN_RPC_FRAME_OK);
    }
}

int main(void)
{
    test_crcs();
    test_goldens();
    test_long_golden();
    test_damage();
    test_overflow();
    test_round_trip();
    return check_summary();
}
