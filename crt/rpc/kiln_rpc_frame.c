/*
 * kiln_rpc_frame.c - CRCs, COBS encoding and the receive state machine.
 * See kiln_rpc_frame.h for the contract and README.md for the wire format.
 */
#include "kiln_rpc_frame.h"

#include "kiln_rpc_wire.h"

uint16_t kiln_rpc_crc16(uint16_t crc, const uint8_t *data, size_t n)
{
    size_t i;
    for (i = 0; i < n; ++i) {
        int bit;
        crc = (uint16_t)(crc ^ ((uint16_t)data[i] << 8));
        for (bit = 0; bit < 8; ++bit) {
            const uint32_t shifted = (uint32_t)crc << 1;
            crc = (uint16_t)((crc & 0x8000u) ? (shifted ^ 0x1021u) : shifted);
        }
    }
    return crc;
}

/* Four bits at a time: a 64-byte table keeps flash small and is ~4x faster
 * than bit by bit. */
static const uint32_t kiln_crc32_nibble[16] = {
    0x00000000u, 0x1DB71064u, 0x3B6E20C8u, 0x26D930ACu, 0x76DC4190u, 0x6B6B51F4u,
    0x4DB26158u, 0x5005713Cu, 0xEDB88320u, 0xF00F9344u, 0xD6D6A3E8u, 0xCB61B38Cu,
    0x9B64C2B0u, 0x86D3D2D4u, 0xA00AE278u, 0xBDBDF21Cu,
};

uint32_t kiln_rpc_crc32(uint32_t crc, const uint8_t *data, size_t n)
{
    size_t i;
    crc = ~crc;
    for (i = 0; i < n; ++i) {
        crc ^= data[i];
        crc = (crc >> 4) ^ kiln_crc32_nibble[crc & 0x0Fu];
        crc = (crc >> 4) ^ kiln_crc32_nibble[crc & 0x0Fu];
    }
    return ~crc;
}

void kiln_rpc_rx_init(kiln_rpc_rx_t *rx, uint8_t *buf, size_t cap)
{
    rx->buf = buf;
    rx->cap = cap;
    rx->len = 0;
    rx->state = KILN_RPC_RX_CODE;
    rx->remaining = 0;
    rx->zero_due = 0;
    rx->any = 0;
}

/* Append one decoded byte; on overflow switch to DISCARD until the delimiter. */
static void kiln_rpc_rx_append(kiln_rpc_rx_t *rx, uint8_t byte)
{
    if (rx->len >= rx->cap) {
        rx->state = KILN_RPC_RX_DISCARD;
        return;
    }
    rx->buf[rx->len++] = byte;
}

/* The delimiter arrived: decide what the bytes since the last one were. */
static int kiln_rpc_rx_end(kiln_rpc_rx_t *rx)
{
    int status;
    if (!rx->any) {
        status = KILN_RPC_FRAME_NONE; /* 00 00: idle line or a frame's leading delimiter */
    } else if (rx->state == KILN_RPC_RX_DISCARD) {
        status = KILN_RPC_FRAME_ERR_OVERFLOW;
    } else if (rx->state == KILN_RPC_RX_DATA) {
        status = KILN_RPC_FRAME_ERR_COBS; /* a block promised more bytes than arrived */
    } else if (rx->len < KILN_RPC_HEADER_BYTES + KILN_RPC_CRC_BYTES) {
        status = KILN_RPC_FRAME_ERR_LENGTH;
    } else if (kiln_rpc_crc16(0xFFFFu, rx->buf, rx->len) != 0) {
        /* The CRC is stored big-endian, so the CRC over body + CRC is 0. */
        status = KILN_RPC_FRAME_ERR_CRC;
    } else {
        const size_t declared = (size_t)rx->buf[3] | ((size_t)rx->buf[4] << 8);
        status = (declared + KILN_RPC_HEADER_BYTES + KILN_RPC_CRC_BYTES == rx->len)
                     ? KILN_RPC_FRAME_OK
                     : KILN_RPC_FRAME_ERR_LENGTH;
    }
    if (status != KILN_RPC_FRAME_OK) {
        rx->len = 0; /* a caller never sees a damaged body */
    }
    rx->state = KILN_RPC_RX_CODE;
    rx->remaining = 0;
    rx->zero_due = 0;
    rx->any = 0;
    return status;
}

int kiln_rpc_rx_push(kiln_rpc_rx_t *rx, uint8_t byte)
{
    if (byte == 0x00u) {
        return kiln_rpc_rx_end(rx);
    }
    if (!rx->any) {
        rx->len = 0; /* first byte of a new frame: forget the last body */
        rx->any = 1;
    }
    switch (rx->state) {
    case KILN_RPC_RX_CODE:
        if (rx->zero_due) {
            kiln_rpc_rx_append(rx, 0x00u); /* the previous block ended in a zero */
            if (rx->state == KILN_RPC_RX_DISCARD) {
                break;
            }
        }
        rx->zero_due = (uint8_t)(byte != 0xFFu);
        rx->remaining = (uint8_t)(byte - 1u);
        if (rx->remaining > 0) {
            rx->state = KILN_RPC_RX_DATA;
        }
        break;
    case KILN_RPC_RX_DATA:
        kiln_rpc_rx_append(rx, byte);
        if (rx->state == KILN_RPC_RX_DISCARD) {
            break;
        }
        if (--rx->remaining == 0) {
            rx->state = KILN_RPC_RX_CODE;
        }
        break;
    default: /* KILN_RPC_RX_DISCARD */
        break;
    }
    return KILN_RPC_FRAME_NONE;
}

size_t kiln_rpc_body_finish(uint8_t *body, uint8_t cmd, uint16_t seq, uint16_t len)
{
    const size_t crc_at = KILN_RPC_HEADER_BYTES + (size_t)len;
    uint16_t crc;
    body[0] = cmd;
    body[1] = (uint8_t)(seq & 0xFFu);
    body[2] = (uint8_t)(seq >> 8);
    body[3] = (uint8_t)(len & 0xFFu);
    body[4] = (uint8_t)(len >> 8);
    crc = kiln_rpc_crc16(0xFFFFu, body, crc_at);
    body[crc_at] = (uint8_t)(crc >> 8);
    body[crc_at + 1] = (uint8_t)(crc & 0xFFu);
    return crc_at + KILN_RPC_CRC_BYTES;
}

void kiln_rpc_frame_send(const uint8_t *body, size_t n, kiln_rpc_put_fn put, void *ctx)
{
    size_t start = 0;
    put(ctx, 0x00u);
    for (;;) {
        size_t end = start;
        size_t i;
        while (end < n && body[end] != 0x00u && end - start < 254u) {
            ++end;
        }
        put(ctx, (uint8_t)(end - start + 1u));
        for (i = start; i < end; ++i) {
            put(ctx, body[i]);
        }
        if (end >= n) {
            break; /* last block: the decoder adds no zero after it */
        }
        /* A zero ends the block (and is implied by code < 0xFF); a full
         * 254-byte block (code 0xFF) implies none. */
        start = (end - start == 254u) ? end : end + 1u;
    }
    put(ctx, 0x00u);
}
