/*
 * startup_cortexm.c - reset handler and vector table for every Cortex-M board.
 *
 * Reset: enable the FPU (and MVE) where the core has one, copy .data from
 * flash, zero .bss, run main(), and hand its return value to
 * kiln_platform_exit(). Faults print one "KILN FAULT" line (once the UART is
 * up) and exit with KILN_EXIT_FAULT, so a crash under QEMU ends the run
 * instead of hanging until the launcher's timeout.
 *
 * Linker script symbols (templates/linker.ld.j2): _sidata, _sdata, _edata,
 * _sbss, _ebss, __StackTop.
 */
#include "platform_internal.h"

extern uint32_t _sidata, _sdata, _edata, _sbss, _ebss, __StackTop;

int main(void);
void Reset_Handler(void);
void kiln_fault_handler(void);
void SysTick_Handler(void) __attribute__((weak, alias("kiln_fault_handler")));

#define SCB_CPACR KILN_REG(0xE000ED88u)

/* Set by kiln_platform_init(): until then printing a fault could hang on a
 * UART that is not clocked yet. */
volatile int kiln_platform_ready;

void Reset_Handler(void)
{
#if defined(__ARM_FP) || defined(__ARM_FEATURE_MVE)
    /* CP10 and CP11 full access; must precede the first FP instruction, and
     * the compiler may emit one anywhere in main. */
    SCB_CPACR |= 0xFu << 20;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
#endif
    /* Word loops; the empty asm keeps GCC from making them memcpy and memset calls,
     * which would link the C library's (about 470 B) into firmware that may use
     * neither. */
    uint32_t *src = &_sidata;
    for (uint32_t *dst = &_sdata; dst < &_edata;) {
        *dst++ = *src++;
        __asm__("" : "+r"(dst));
    }
    for (uint32_t *dst = &_sbss; dst < &_ebss;) {
        *dst++ = 0u;
        __asm__("" : "+r"(dst));
    }
    kiln_platform_exit(main());
}

static void put_str(const char *s)
{
    while (*s) {
        kiln_platform_putc((uint8_t)*s++);
    }
}

void kiln_fault_handler(void)
{
    if (kiln_platform_ready) {
        uint32_t ipsr;
        __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
        static const char hex[] = "0123456789abcdef";
        char num[3] = {hex[(ipsr >> 4) & 0xFu], hex[ipsr & 0xFu], 0};
        put_str("\nKILN FAULT exception 0x");
        put_str(num);
        put_str("\n");
    }
    kiln_platform_exit(KILN_EXIT_FAULT);
}

typedef void (*kiln_vector_t)(void);

/* The 16 Cortex-M system vectors; kiln enables no device interrupts. */
__attribute__((section(".isr_vector"), used))
const kiln_vector_t kiln_vector_table[16] = {
    (kiln_vector_t)(uintptr_t)&__StackTop,
    Reset_Handler,
    kiln_fault_handler, /* NMI */
    kiln_fault_handler, /* HardFault */
    kiln_fault_handler, /* MemManage */
    kiln_fault_handler, /* BusFault */
    kiln_fault_handler, /* UsageFault */
    kiln_fault_handler, /* SecureFault (v8-M) */
    0,
    0,
    0,
    kiln_fault_handler, /* SVCall */
    kiln_fault_handler, /* DebugMonitor */
    0,
    kiln_fault_handler, /* PendSV */
    SysTick_Handler,
};
