/*
 * kiln_rpc.h - the host-driven mode's entry point.
 *
 * The firmware main of host-driven mode is
 *
 *     kiln_platform_init();
 *     return kiln_rpc_serve();   (or: kiln_rpc_serve(); kiln_platform_exit(0);)
 *
 * kiln_rpc_serve() announces itself with a BOOT frame, then reads requests
 * from kiln_platform_getc() and answers through kiln_platform_putc() until the
 * host sends RESET with mode 1. It owns the arena (KILN_ARENA_BYTES from
 * model.h, 16-byte aligned, static) and allocates nothing. The wire format is
 * in kiln_rpc_wire.h and README.md beside this file.
 */
#ifndef KILN_RPC_H
#define KILN_RPC_H

/* Serve RPC requests; returns only after a RESET request with mode 1, and then
 * returns 0 (an exit code for main). */
int kiln_rpc_serve(void);

#endif /* KILN_RPC_H */
