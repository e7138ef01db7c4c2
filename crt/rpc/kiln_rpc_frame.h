/*
 * kiln_rpc_frame.h - framing of kiln's RPC: CRC-16/CCITT-FALSE, COBS and the
 * receive state machine. Nothing here knows about commands; see
 * kiln_rpc_wire.h for the frame layout and README.md for worked examples.
 *
 * Receiving: feed every byte from the serial line to kiln_rpc_rx_push(). It
 * decodes COBS on the fly into the caller's buffer (no second copy, nothing
 * allocated) and, at each 0x00 delimiter, validates the frame. Garbage before
 * or between frames costs at most one KILN_RPC_FRAME_ERR_* result and is
 * forgotten at the next 0x00: that is the resynchronisation.
 *
 *          byte != 0                    byte != 0, block done
 *   CODE ─────────────▶ DATA ───────────────────────────────────▶ CODE
 *    ▲ │ (code byte)      │ data byte (buffer full → DISCARD)
 *    │ └──── 0x00 ────────┴──▶ validate frame, report, back to CODE
 *    └────────────── 0x00 ◀── DISCARD (drops bytes until the delimiter)
 */
#ifndef KILN_RPC_FRAME_H
#define KILN_RPC_FRAME_H

#include <stddef.h>
#include <stdint.h>

/* CRC-16/CCITT-FALSE: poly 0x1021, init 0xFFFF, no reflection, no final xor.
 * crc16("123456789") == 0x29B1. Pass 0xFFFF as crc to start. */
uint16_t kiln_rpc_crc16(uint16_t crc, const uint8_t *data, size_t n);

/* CRC-32 (IEEE 802.3, zlib's crc32): reflected poly 0xEDB88320, init and final
 * xor 0xFFFFFFFF. Chain calls by passing the previous result; start with 0.
 * crc32("123456789") == 0xCBF43926. */
uint32_t kiln_rpc_crc32(uint32_t crc, const uint8_t *data, size_t n);

/* Result of kiln_rpc_rx_push(). Negative values double as NAK payloads (negated). */
typedef enum {
    KILN_RPC_FRAME_NONE = 0,          /* byte taken, no frame ended (also: empty frame 00 00) */
    KILN_RPC_FRAME_OK = 1,            /* a valid body of rx->len bytes is in rx->buf */
    KILN_RPC_FRAME_ERR_CRC = -1,      /* the body's CRC-16 does not match */
    KILN_RPC_FRAME_ERR_LENGTH = -2,   /* body shorter than header + CRC, or len field disagrees */
    KILN_RPC_FRAME_ERR_OVERFLOW = -3, /* the body did not fit in the buffer; dropped */
    KILN_RPC_FRAME_ERR_COBS = -4      /* the delimiter came inside a COBS block */
} kiln_rpc_frame_status_t;

typedef enum {
    KILN_RPC_RX_CODE = 0, /* next byte is a COBS code byte */
    KILN_RPC_RX_DATA,     /* inside a COBS block */
    KILN_RPC_RX_DISCARD   /* overflowed: wait for the delimiter */
} kiln_rpc_rx_state_t;

typedef struct {
    uint8_t *buf;        /* decoded body: header, payload, CRC */
    size_t cap;          /* bytes of buf */
    size_t len;          /* bytes decoded so far */
    uint8_t state;       /* kiln_rpc_rx_state_t */
    uint8_t remaining;   /* data bytes left in the current COBS block */
    uint8_t zero_due;    /* the current block ends with an implied zero (code < 0xFF) */
    uint8_t any;         /* a byte other than 0x00 arrived since the last delimiter */
} kiln_rpc_rx_t;

/* Bind rx to buf[cap]; cap must be at least header + CRC (7 bytes). */
void kiln_rpc_rx_init(kiln_rpc_rx_t *rx, uint8_t *buf, size_t cap);

/* Take one byte from the line. Returns a kiln_rpc_frame_status_t: NONE while a
 * frame is in progress; OK with the body in rx->buf[0, rx->len) after its
 * delimiter (valid until the next push); ERR_* when a damaged frame ended. */
int kiln_rpc_rx_push(kiln_rpc_rx_t *rx, uint8_t byte);

/* Fill the header and CRC of a body whose payload (len bytes) is already at
 * body + KILN_RPC_HEADER_BYTES. Returns the body length (len + 7). */
size_t kiln_rpc_body_finish(uint8_t *body, uint8_t cmd, uint16_t seq, uint16_t len);

/* Byte sink for the encoder (kiln_platform_putc in the server, a buffer in tests). */
typedef void (*kiln_rpc_put_fn)(void *ctx, uint8_t byte);

/* Send body[0, n) as 0x00 COBS(body) 0x00. Needs no buffer of its own. */
void kiln_rpc_frame_send(const uint8_t *body, size_t n, kiln_rpc_put_fn put, void *ctx);

#endif /* KILN_RPC_FRAME_H */
