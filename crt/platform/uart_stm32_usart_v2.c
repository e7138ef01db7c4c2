/*
 * uart_stm32_usart_v2.c - STM32 USART and LPUART, F0/F7/L4/H7 register layout.
 *
 * Registers: CR1 +0x00 (bit0 UE, bit3 TE, bit2 RE), BRR +0x0C,
 * ISR +0x1C (bit7 TXE, bit5 RXNE), RDR +0x24, TDR +0x28. A USART's BRR is
 * clock / baud; an LPUART's is 256 * clock / baud (KILN_UART_BRR_SCALE). The
 * clock gate and pin mux are the board's [[init]] pokes.
 */
#include "platform_internal.h"

#ifndef KILN_UART_BRR_SCALE
#define KILN_UART_BRR_SCALE 1u
#endif

#define USART_CR1 KILN_REG(KILN_UART_BASE + 0x00u)
#define USART_BRR KILN_REG(KILN_UART_BASE + 0x0Cu)
#define USART_ISR KILN_REG(KILN_UART_BASE + 0x1Cu)
#define USART_RDR KILN_REG(KILN_UART_BASE + 0x24u)
#define USART_TDR KILN_REG(KILN_UART_BASE + 0x28u)

#define ISR_TXE (1u << 7)
#define ISR_RXNE (1u << 5)

void kiln_uart_init(void)
{
    const uint64_t brr = ((uint64_t)KILN_UART_CLOCK_HZ * KILN_UART_BRR_SCALE
                          + KILN_UART_BAUD / 2u) / KILN_UART_BAUD;
    USART_CR1 = 0u;
    USART_BRR = (uint32_t)brr;
    USART_CR1 = (1u << 3) | (1u << 2) | (1u << 0);
}

void kiln_platform_putc(uint8_t byte)
{
    while (!(USART_ISR & ISR_TXE)) {
    }
    USART_TDR = byte;
}

int kiln_platform_getc(void)
{
    if (!(USART_ISR & ISR_RXNE)) {
        return -1;
    }
    return (int)(USART_RDR & 0xFFu);
}
