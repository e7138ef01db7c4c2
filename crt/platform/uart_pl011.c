/*
 * uart_pl011.c - Arm PL011 UART (also the Stellaris/Tiva UART it derives from).
 *
 * Registers: DR +0x00, FR +0x18 (bit5 TX FIFO full, bit4 RX FIFO empty),
 * IBRD +0x24, FBRD +0x28, LCRH +0x2C, CTL +0x30.
 */
#include "platform_internal.h"

#define UART_DR KILN_REG(KILN_UART_BASE + 0x00u)
#define UART_FR KILN_REG(KILN_UART_BASE + 0x18u)
#define UART_IBRD KILN_REG(KILN_UART_BASE + 0x24u)
#define UART_FBRD KILN_REG(KILN_UART_BASE + 0x28u)
#define UART_LCRH KILN_REG(KILN_UART_BASE + 0x2Cu)
#define UART_CTL KILN_REG(KILN_UART_BASE + 0x30u)

#define FR_TXFF (1u << 5)
#define FR_RXFE (1u << 4)

/* Baud divisor in 1/64ths: clock / (16 * baud), rounded. */
#define BAUD_DIV_X64 ((4u * KILN_UART_CLOCK_HZ + KILN_UART_BAUD / 2u) / KILN_UART_BAUD)

void kiln_uart_init(void)
{
    UART_CTL = 0u;
    UART_IBRD = BAUD_DIV_X64 / 64u;
    UART_FBRD = BAUD_DIV_X64 % 64u;
    UART_LCRH = 0x70u;            /* 8 data bits, FIFOs on, no parity, 1 stop */
    UART_CTL = 0x301u;            /* UARTEN | TXE | RXE */
}

void kiln_platform_putc(uint8_t byte)
{
    while (UART_FR & FR_TXFF) {
    }
    UART_DR = byte;
}

int kiln_platform_getc(void)
{
    if (UART_FR & FR_RXFE) {
        return -1;
    }
    return (int)(UART_DR & 0xFFu);
}
