/*
 * uart_stm32_usart.c - STM32 USART, F1/F2/F4 register layout.
 *
 * Registers: SR +0x00 (bit7 TXE, bit5 RXNE), DR +0x04, BRR +0x08,
 * CR1 +0x0C (bit13 UE, bit3 TE, bit2 RE). The peripheral clock gate and the
 * pin mux are the board's [[init]] pokes.
 */
#include "platform_internal.h"

#define USART_SR KILN_REG(KILN_UART_BASE + 0x00u)
#define USART_DR KILN_REG(KILN_UART_BASE + 0x04u)
#define USART_BRR KILN_REG(KILN_UART_BASE + 0x08u)
#define USART_CR1 KILN_REG(KILN_UART_BASE + 0x0Cu)

#define SR_TXE (1u << 7)
#define SR_RXNE (1u << 5)

void kiln_uart_init(void)
{
    /* Oversampling by 16: BRR holds clock / baud as 12.4 fixed point. */
    USART_BRR = (KILN_UART_CLOCK_HZ + KILN_UART_BAUD / 2u) / KILN_UART_BAUD;
    USART_CR1 = (1u << 13) | (1u << 3) | (1u << 2);
}

void kiln_platform_putc(uint8_t byte)
{
    while (!(USART_SR & SR_TXE)) {
    }
    USART_DR = byte;
}

int kiln_platform_getc(void)
{
    if (!(USART_SR & SR_RXNE)) {
        return -1;
    }
    return (int)(USART_DR & 0xFFu);
}
