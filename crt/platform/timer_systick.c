/*
 * timer_systick.c - 64-bit tick counter from SysTick at the core clock.
 *
 * SysTick is a 24-bit down-counter: it wraps every 2^24 ticks (0.67 s at
 * 25 MHz), far shorter than one inference on a small core, so the SysTick
 * exception counts wraps and kiln_platform_ticks() combines the two. This is
 * the timer kiln uses under QEMU, where DWT CYCCNT reads 0 but SysTick
 * advances with the instruction count under -icount.
 */
#include "platform_internal.h"

#define SYST_CSR KILN_REG(0xE000E010u)
#define SYST_RVR KILN_REG(0xE000E014u)
#define SYST_CVR KILN_REG(0xE000E018u)
#define SCB_ICSR KILN_REG(0xE000ED04u)

#define CSR_ENABLE (1u << 0)
#define CSR_TICKINT (1u << 1)
#define CSR_CLKSOURCE_CORE (1u << 2)
#define ICSR_PENDSTSET (1u << 26)

#define RELOAD 0x00FFFFFFu

static volatile uint32_t s_wraps;

void SysTick_Handler(void);

void SysTick_Handler(void)
{
    s_wraps++;
}

void kiln_timer_init(void)
{
    SYST_CSR = 0u;
    SYST_RVR = RELOAD;
    SYST_CVR = 0u;
    s_wraps = 0u;
    SYST_CSR = CSR_ENABLE | CSR_TICKINT | CSR_CLKSOURCE_CORE;
}

uint64_t kiln_platform_ticks(void)
{
    uint32_t primask;
    __asm__ volatile("mrs %0, primask\n\tcpsid i" : "=r"(primask)::"memory");
    uint32_t wraps = s_wraps;
    uint32_t value = SYST_CVR;
    /* With interrupts masked a wrap leaves SysTick pending instead of bumping
     * s_wraps: count it here, and re-read the counter so that it is certainly
     * from after the wrap. */
    if (SCB_ICSR & ICSR_PENDSTSET) {
        wraps++;
        value = SYST_CVR;
    }
    __asm__ volatile("msr primask, %0" ::"r"(primask) : "memory");
    return (uint64_t)wraps * (RELOAD + 1u) + (RELOAD - value);
}

uint32_t kiln_platform_tick_hz(void)
{
    return KILN_CLOCK_HZ;
}
