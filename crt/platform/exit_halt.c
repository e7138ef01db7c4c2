/*
 * exit_halt.c - "exit" on a real board: stop taking interrupts and sleep.
 * The exit code stays in a global so a debugger can read it.
 */
#include "platform_internal.h"

volatile int kiln_exit_code;

void kiln_platform_exit(int code)
{
    kiln_exit_code = code;
    __asm__ volatile("cpsid i" ::: "memory");
    for (;;) {
        __asm__ volatile("wfi");
    }
}
