/*
 * exit_semihosting.c - leave QEMU with an exit code through Arm semihosting.
 *
 * SYS_EXIT_EXTENDED (0x20) takes a block {reason, subcode}; with reason
 * ADP_Stopped_ApplicationExit QEMU exits with the subcode as its status.
 * Needs QEMU's -semihosting-config enable=on,target=native. On a real core
 * without a debugger attached the BKPT would fault: real boards link
 * exit_halt.c instead.
 */
#include "platform_internal.h"

#define SYS_EXIT_EXTENDED 0x20u
#define ADP_STOPPED_APPLICATION_EXIT 0x20026u

void kiln_platform_exit(int code)
{
    uint32_t block[2] = {ADP_STOPPED_APPLICATION_EXIT, (uint32_t)code};
    register uint32_t r0 __asm__("r0") = SYS_EXIT_EXTENDED;
    register uint32_t *r1 __asm__("r1") = block;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    for (;;) {
    }
}
