/*
 * kiln_rpc_tune.h - the table of kernel variants a tuning build exposes over
 * RPC (TUNE_INFO / TUNE_RUN / WRITE and READ in space KILN_RPC_SPACE_TUNE).
 *
 * A generated tuning file (kiln_tune.c) defines KILN_HAS_TUNING and
 * KILN_TUNE_ARENA_BYTES in kiln_config.h and provides the two symbols below.
 * A build without it leaves KILN_HAS_TUNING undefined; the server then answers
 * every tuning command with KILN_RPC_ERR_UNSUPPORTED and never references
 * these symbols.
 *
 * Each variant runs one kernel on buffers that live in the server's arena at
 * fixed offsets (its inputs, outputs and scratch). The server checks that every
 * declared buffer lies inside the arena before it lets the host touch it.
 * Variant id = index into kiln_tune_variants.
 */
#ifndef KILN_RPC_TUNE_H
#define KILN_RPC_TUNE_H

#include <stdint.h>

#include "kiln_rpc_config.h"

#define KILN_TUNE_BUFFER_OUTPUT 0x01u /* the host reads it; otherwise it writes it */
#define KILN_TUNE_MAX_BUFFERS 8u      /* buffers per variant the protocol can describe */

typedef struct {
    uint32_t offset; /* byte offset inside the arena */
    uint32_t bytes;
    uint8_t flags;   /* KILN_TUNE_BUFFER_* */
} kiln_tune_buffer_t;

/* Runs the variant once on its buffers in arena. Returns 0, or a kernel's
 * non-zero kiln_status_t. */
typedef int (*kiln_tune_fn_t)(uint8_t *arena);

typedef struct {
    const char *name;                  /* e.g. "conv2d_1x1_s8/t12_conv_out" */
    kiln_tune_fn_t run;
    const kiln_tune_buffer_t *buffers; /* num_buffers entries, at most KILN_TUNE_MAX_BUFFERS */
    uint8_t num_buffers;
} kiln_tune_variant_t;

#ifdef KILN_HAS_TUNING
extern const kiln_tune_variant_t kiln_tune_variants[];
extern const uint16_t kiln_tune_num_variants;
#endif

#endif /* KILN_RPC_TUNE_H */
