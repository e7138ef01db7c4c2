/*
 * kiln_rpc_config.h - where the RPC server's build-time settings come from.
 *
 * The project generator renders kiln_board.h (KILN_BOARD_NAME) and may render
 * kiln_config.h (KILN_BUILD_ID, KILN_RPC_MAX_PAYLOAD for a board with little
 * RAM, KILN_HAS_TUNING and KILN_TUNE_ARENA_BYTES for a tuning build). Both are
 * optional: every setting has a default in the file that uses it. Included
 * first by kiln_rpc_wire.h so that one value holds in every translation unit.
 */
#ifndef KILN_RPC_CONFIG_H
#define KILN_RPC_CONFIG_H

#if defined(__has_include)
#if __has_include("kiln_config.h")
#include "kiln_config.h"
#endif
#if __has_include("kiln_board.h")
#include "kiln_board.h"
#endif
#else
#include "kiln_config.h" /* a compiler without __has_include needs the file */
#endif

#endif /* KILN_RPC_CONFIG_H */
