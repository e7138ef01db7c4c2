/*
 * kiln_rpc_server.h - the RPC server's state machine, exposed for the host
 * tests and the fuzzer. Firmware uses kiln_rpc_serve() from kiln_rpc.h.
 *
 * One request at a time: a frame decoded by kiln_rpc_rx_push() is dispatched,
 * its response is sent and kept in tx_buf; a retransmitted request (same seq,
 * cmd and CRC) gets the kept response again without re-executing (a RUN that
 * clobbered its inputs is never run twice by a lost reply).
 *
 * Session: after a (re)start the server answers only HELLO, INFO, ECHO and
 * RESET; anything else gets KILN_RPC_ERR_NO_SESSION, which tells the host the
 * device was reset under it. HELLO opens the session.
 */
#ifndef KILN_RPC_SERVER_H
#define KILN_RPC_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "kiln_rpc_frame.h"
#include "kiln_rpc_wire.h"

typedef struct {
    kiln_rpc_rx_t rx;
    uint8_t rx_buf[KILN_RPC_BODY_MAX];
    uint8_t tx_buf[KILN_RPC_BODY_MAX]; /* the last response body, kept for retransmission */
    size_t tx_len;                     /* 0: nothing kept */
    uint16_t last_seq;                 /* request that produced tx_buf */
    uint16_t last_crc;
    uint8_t last_cmd;
    uint8_t session;                   /* HELLO seen since start/reset */
    uint32_t session_token;            /* the host's token from HELLO */
} kiln_rpc_server_t;

/* Result of kiln_rpc_server_push(). */
typedef enum {
    KILN_RPC_SERVE_CONTINUE = 0, /* keep feeding bytes */
    KILN_RPC_SERVE_EXIT = 1      /* RESET mode 1 was answered: leave the server */
} kiln_rpc_serve_status_t;

/* Reset all state: no session, nothing kept, the arena zeroed. */
void kiln_rpc_server_init(kiln_rpc_server_t *s);

/* Send the unsolicited BOOT frame (seq 0, identity block). */
void kiln_rpc_server_announce(kiln_rpc_server_t *s);

/* Take one byte from the line; dispatch and answer when a frame completes
 * (an ACK frame first for RUN, TIME, PROFILE and TUNE_RUN; a NAK for a damaged
 * frame). Returns a kiln_rpc_serve_status_t. */
int kiln_rpc_server_push(kiln_rpc_server_t *s, uint8_t byte);

/* Handle one valid request body (header + payload + CRC, as kiln_rpc_rx_push
 * accepted it: 7 <= n <= KILN_RPC_BODY_MAX, len field consistent) and build
 * the response body in s->tx_buf; returns its length, or 0 for a frame that
 * gets no answer (a response-range cmd, e.g. the line echoing our frames).
 * *exit_after is set for RESET mode 1. Sends the ACK of long requests itself. */
size_t kiln_rpc_server_handle(kiln_rpc_server_t *s, const uint8_t *body, size_t n,
                              int *exit_after);

/* The arena the server owns (for tests). */
uint8_t *kiln_rpc_arena(void);
uint32_t kiln_rpc_arena_bytes(void);

#endif /* KILN_RPC_SERVER_H */
