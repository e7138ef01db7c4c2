/*
 * platform.h - the only board-specific surface of kiln's C runtime.
 *
 * Porting kiln to a board means implementing these hooks (crt/platform/ holds
 * one implementation per UART kind and timer kind, plus POSIX for the host
 * board). Everything above this header - kernels, model code, the RPC server,
 * the standalone main - is portable C99.
 */
#ifndef KILN_PLATFORM_H
#define KILN_PLATFORM_H

#include <stdint.h>

/* Bring up what the runtime needs: UART at its configured rate, cycle timer, FPU. */
void kiln_platform_init(void);

/* Write one byte to the serial line, blocking until the UART accepts it. */
void kiln_platform_putc(uint8_t byte);

/* Read one byte from the serial line: 0..255, or -1 at once if none is waiting. */
int kiln_platform_getc(void);

/* Free-running 64-bit tick counter (DWT CYCCNT, SysTick, or a POSIX clock). */
uint64_t kiln_platform_ticks(void);

/* Rate of kiln_platform_ticks() in Hz. */
uint32_t kiln_platform_tick_hz(void);

/* Stop: semihosting exit under QEMU, a halt loop on a board, exit() on POSIX. */
void kiln_platform_exit(int code);

#endif /* KILN_PLATFORM_H */
