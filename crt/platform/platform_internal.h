/*
 * platform_internal.h - what the per-kind platform files share.
 *
 * A project links exactly one UART file, one timer file and one exit file
 * (chosen from the board's TOML), plus platform_init.c, startup_cortexm.c and
 * syscalls.c. The board's facts reach them as macros from kiln_board.h, which
 * project_gen renders from boards/<board>.toml.
 */
#ifndef KILN_PLATFORM_INTERNAL_H
#define KILN_PLATFORM_INTERNAL_H

#include <stdint.h>

#include "kiln_board.h"
#include "platform.h"

/* A memory-mapped 32-bit register. */
#define KILN_REG(addr) (*(volatile uint32_t *)(uintptr_t)(addr))

/* Clock gates and pin muxing from the board's [[init]] table (kiln_board.c). */
void kiln_board_init(void);

/* Bring up the UART (kind-specific file). */
void kiln_uart_init(void);

/* Start the tick counter (kind-specific file). */
void kiln_timer_init(void);

/* Nonzero once kiln_platform_init() has run (startup_cortexm.c). */
extern volatile int kiln_platform_ready;

/* Exit codes main and the fault handler pass to kiln_platform_exit(). */
#define KILN_EXIT_OK 0
#define KILN_EXIT_MODEL_ERROR 1
#define KILN_EXIT_FAULT 3

#endif /* KILN_PLATFORM_INTERNAL_H */
