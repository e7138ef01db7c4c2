/*
 * fuzz_rpc.c - libFuzzer target for the RPC frame parser and the command handler.
 *
 * Built by benchmarks/fuzz_rpc.py (and tests/test_rpc_fuzz.py) with
 *   clang -fsanitize=fuzzer,address,undefined -DKILN_RPC_MAX_REPEAT=16 -DFIXTURE_NO_HANG
 * together with the server, the fixture model and fake_platform.c.
 *
 * The first input byte picks a mode:
 *   even: the rest goes to the server byte by byte, as line noise would;
 *   odd:  the rest is a list of requests, each [cmd u8][seq u8][len u16le][payload],
 *         that the harness frames with a valid CRC (so the handler sees them);
 *         bit 1 set: a HELLO opens the session first, so every command is reachable.
 * Invariants checked after every input (a violation traps, which libFuzzer reports):
 * every byte the server sent decodes into valid frames (it never emits a damaged
 * frame), no response payload exceeds KILN_RPC_MAX_PAYLOAD, and the receive state
 * never holds more than its buffer. ASan/UBSan catch out-of-bounds accesses to the
 * arena (a global with redzones) and the frame buffers.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fake_platform.h"
#include "kiln_rpc_server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static kiln_rpc_server_t server;

static void push_byte(void *ctx, uint8_t byte)
{
    (void)ctx;
    kiln_rpc_server_push(&server, byte);
    if (server.rx.len > server.rx.cap) {
        __builtin_trap();
    }
}

/* Every frame the server sent must decode; fake_out is cleared after. */
static void check_output(void)
{
    static uint8_t buf[KILN_RPC_BODY_MAX];
    kiln_rpc_rx_t rx;
    size_t i;
    if (fake_out_len > FAKE_OUT_CAP) {
        __builtin_trap(); /* more output than any request can cause */
    }
    kiln_rpc_rx_init(&rx, buf, sizeof(buf));
    for (i = 0; i < fake_out_len; ++i) {
        const int st = kiln_rpc_rx_push(&rx, fake_out[i]);
        if (st < 0) {
            __builtin_trap();
        }
        if (st == KILN_RPC_FRAME_OK && rx.len > KILN_RPC_BODY_MAX) {
            __builtin_trap();
        }
    }
    fake_out_len = 0;
}

static void send_request(uint8_t cmd, uint16_t seq, const uint8_t *payload, size_t n)
{
    static uint8_t body[KILN_RPC_BODY_MAX];
    size_t len;
    if (n > KILN_RPC_MAX_PAYLOAD) {
        n = KILN_RPC_MAX_PAYLOAD;
    }
    if (n > 0) {
        memcpy(body + KILN_RPC_HEADER_BYTES, payload, n);
    }
    len = kiln_rpc_body_finish(body, cmd, seq, (uint16_t)n);
    kiln_rpc_frame_send(body, len, push_byte, NULL);
    check_output();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t i;
    if (size == 0) {
        return 0;
    }
    fake_out_len = 0;
    kiln_rpc_server_init(&server);
    kiln_rpc_server_announce(&server);
    check_output();
    if ((data[0] & 1u) == 0) {
        for (i = 1; i < size; ++i) {
            push_byte(NULL, data[i]);
            if (fake_out_len > FAKE_OUT_CAP / 2) {
                check_output();
            }
        }
        check_output();
        return 0;
    }
    if (data[0] & 2u) {
        static const uint8_t hello[6] = {1, 2, 3, 4, 0, 4};
        send_request(0x01, 0xFFFE, hello, sizeof(hello));
    }
    i = 1;
    while (i + 4 <= size) {
        const uint8_t cmd = data[i];
        const uint16_t seq = data[i + 1];
        size_t n = (size_t)data[i + 2] | ((size_t)data[i + 3] << 8);
        i += 4;
        if (n > size - i) {
            n = size - i;
        }
        send_request(cmd, seq, data + i, n);
        i += n;
    }
    return 0;
}
