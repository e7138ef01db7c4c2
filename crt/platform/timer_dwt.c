/*
 * timer_dwt.c - 64-bit cycle counter from DWT CYCCNT (Cortex-M3/M4/M7/M33/M55).
 *
 * CYCCNT is 32 bits and wraps every 2^32 cycles (20 s at 216 MHz); the upper
 * half is kept in software, so kiln_platform_ticks() must be called at least
 * once per wrap - true of every timing loop kiln runs. Under QEMU CYCCNT
 * reads 0: QEMU boards use timer_systick.c.
 */
#include "platform_internal.h"

#define DEMCR KILN_REG(0xE000EDFCu)
#define DWT_CTRL KILN_REG(0xE0001000u)
#define DWT_CYCCNT KILN_REG(0xE0001004u)
#define DWT_LAR KILN_REG(0xE0001FB0u)

#define DEMCR_TRCENA (1u << 24)
#define CTRL_CYCCNTENA (1u << 0)
#define LAR_UNLOCK 0xC5ACCE55u

static uint32_t s_last;
static uint64_t s_high;

void kiln_timer_init(void)
{
    DEMCR |= DEMCR_TRCENA;
    /* The Cortex-M7 locks DWT writes after reset; the others ignore LAR. */
    DWT_LAR = LAR_UNLOCK;
    DWT_CYCCNT = 0u;
    DWT_CTRL |= CTRL_CYCCNTENA;
    s_last = 0u;
    s_high = 0u;
}

uint64_t kiln_platform_ticks(void)
{
    const uint32_t now = DWT_CYCCNT;
    if (now < s_last) {
        s_high += UINT64_C(1) << 32;
    }
    s_last = now;
    return s_high | now;
}

uint32_t kiln_platform_tick_hz(void)
{
    return KILN_CLOCK_HZ;
}
