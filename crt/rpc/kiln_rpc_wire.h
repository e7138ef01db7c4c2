/*
 * kiln_rpc_wire.h - kiln's host-driven RPC wire protocol: every constant both
 * ends agree on. crt/rpc/README.md describes the format byte by byte; the
 * Python twin is kiln.project_gen.rpc_frame / rpc_client. Change both together
 * and bump KILN_RPC_PROTOCOL_VERSION.
 *
 * A frame on the wire is   0x00  COBS(body)  0x00
 * and its body (before COBS) is
 *
 *   offset  size  field
 *   0       1     cmd      request 0x01..0x7C (0x7D..0x7F reserved, never answered);
 *                          response = request | 0x80;
 *                          0xFD boot, 0xFE ack, 0xFF nak (device only)
 *   1       2     seq      request id, little-endian; a response echoes it
 *   3       2     len      payload length, little-endian
 *   5       len   payload  (a response payload starts with a kiln_rpc_status_t)
 *   5+len   2     crc      CRC-16/CCITT-FALSE of bytes [0, 5+len), big-endian
 *
 * All multi-byte payload fields are little-endian.
 */
#ifndef KILN_RPC_WIRE_H
#define KILN_RPC_WIRE_H

#include "kiln_rpc_config.h"

#define KILN_RPC_PROTOCOL_VERSION 1u
#define KILN_RPC_MAGIC "KILN"

/* Largest payload either side sends. A board with little RAM lowers it in
 * kiln_config.h; the handshake tells the host. Each of the server's receive
 * and transmit buffers is KILN_RPC_BODY_MAX bytes. */
#ifndef KILN_RPC_MAX_PAYLOAD
#define KILN_RPC_MAX_PAYLOAD 1024u
#endif
#define KILN_RPC_MIN_PAYLOAD 256u /* the identity block must fit */
#define KILN_RPC_HEADER_BYTES 5u
#define KILN_RPC_CRC_BYTES 2u
#define KILN_RPC_BODY_MAX (KILN_RPC_HEADER_BYTES + KILN_RPC_MAX_PAYLOAD + KILN_RPC_CRC_BYTES)

/* Largest repeat (and warm-up) count TIME and TUNE_RUN accept; larger is
 * KILN_RPC_ERR_ARG. The fuzzer lowers it so that no input runs for minutes. */
#ifndef KILN_RPC_MAX_REPEAT
#define KILN_RPC_MAX_REPEAT 0xFFFFFFFFu
#endif

/* Identity strings (board, build id, model name, model hash) are cut to this. */
#define KILN_RPC_MAX_STRING 48u

/* Requests (host -> device). Payload layouts are in README.md. */
typedef enum {
    KILN_RPC_CMD_HELLO = 0x01,      /* open a session; returns the identity block */
    KILN_RPC_CMD_INFO = 0x02,       /* identity block, no session needed */
    KILN_RPC_CMD_ECHO = 0x03,       /* payload back verbatim */
    KILN_RPC_CMD_TENSOR = 0x04,     /* size and arena offset of one buffer */
    KILN_RPC_CMD_WRITE = 0x05,      /* write a chunk into an input (or tuning) buffer */
    KILN_RPC_CMD_READ = 0x06,       /* read a chunk of an output (or any declared) buffer */
    KILN_RPC_CMD_RUN = 0x07,        /* run the model once on the inputs in place */
    KILN_RPC_CMD_TIME = 0x08,       /* warm-up, then time N runs */
    KILN_RPC_CMD_PROFILE = 0x09,    /* run layer by layer, ticks per layer */
    KILN_RPC_CMD_LAYER = 0x0A,      /* name of one layer */
    KILN_RPC_CMD_TUNE_INFO = 0x0B,  /* one tuning variant: name and buffers */
    KILN_RPC_CMD_TUNE_RUN = 0x0C,   /* warm-up, then time N runs of one variant */
    KILN_RPC_CMD_RESET = 0x0D,      /* 0: end session, zero arena, reset state; 1: leave server;
                                     * 2: reset the model state (kiln_reset) */
    KILN_RPC_CMD_STEP = 0x0E        /* run layers [first, first + count) with kiln_run_layer */
} kiln_rpc_cmd_t;

#define KILN_RPC_RESPONSE_BIT 0x80u
/* Requests from here to 0x7F are never answered: their responses would be 0xFD-0xFF. */
#define KILN_RPC_CMD_RESERVED_FIRST 0x7Du
#define KILN_RPC_FRAME_BOOT 0xFDu /* unsolicited, seq 0: the server (re)started; identity block */
#define KILN_RPC_FRAME_ACK 0xFEu  /* seq of a long request: accepted, now executing */
#define KILN_RPC_FRAME_NAK 0xFFu  /* seq 0xFFFF: a frame arrived damaged; payload = kiln_rpc_frame_status_t */

/* First byte of every response payload. */
typedef enum {
    KILN_RPC_OK = 0,
    KILN_RPC_ERR_UNKNOWN_CMD = 1, /* cmd is not a request this server knows */
    KILN_RPC_ERR_LENGTH = 2,      /* payload length is wrong for cmd */
    KILN_RPC_ERR_RANGE = 3,       /* offset/length falls outside the buffer, or layer out of range */
    KILN_RPC_ERR_ARG = 4,         /* bad buffer space, tensor index, variant id, mode or repeat */
    KILN_RPC_ERR_NO_SESSION = 5,  /* no HELLO since the server started: the device was reset */
    KILN_RPC_ERR_UNSUPPORTED = 6, /* e.g. tuning commands on a build without a tuning table */
    KILN_RPC_ERR_MODEL = 7,       /* kiln_run / kiln_run_layer / a variant returned non-zero */
    KILN_RPC_ERR_INPUT_CRC = 8    /* RUN: inputs in the arena differ from the host's CRC-32 */
} kiln_rpc_status_t;

/* Buffer spaces of TENSOR / WRITE / READ. */
typedef enum {
    KILN_RPC_SPACE_INPUT = 0,  /* model input <index> */
    KILN_RPC_SPACE_OUTPUT = 1, /* model output <index> (read only) */
    KILN_RPC_SPACE_TUNE = 2,   /* buffer <index> of tuning variant <variant> */
    KILN_RPC_SPACE_ARENA = 3   /* index 0: the whole arena, read only (intermediate tensors) */
} kiln_rpc_space_t;

/* HELLO/INFO/BOOT identity block flags. */
#define KILN_RPC_INFO_TUNING 0x01u  /* the build has a tuning table */
#define KILN_RPC_INFO_SESSION 0x02u /* a session is open */
#define KILN_RPC_INFO_INPUTS_OVERWRITTEN 0x04u /* a run writes over the model inputs */
#define KILN_RPC_INFO_STEP 0x08u    /* the server has STEP and the ARENA space */
/* the server has RESET mode 2 (reset the model state) and resets it on HELLO */
#define KILN_RPC_INFO_STATE_RESET 0x10u

/* RUN flags. */
#define KILN_RPC_RUN_CHECK_INPUT 0x01u /* verify the inputs' CRC-32 before running */

#endif /* KILN_RPC_WIRE_H */
