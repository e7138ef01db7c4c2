/*
 * uart_nrf.c - Nordic nRF51/nRF52 UART (the legacy, non-DMA UART0).
 *
 * Tasks STARTRX +0x000, STARTTX +0x008; events RXDRDY +0x108, TXDRDY +0x11C;
 * ENABLE +0x500 (4 = UART), PSELTXD +0x50C, PSELRXD +0x514, RXD +0x518,
 * TXD +0x51C, BAUDRATE +0x524. The TX pin must be an output driven high
 * before the UART takes it (GPIO OUTSET +0x508, DIRSET +0x518).
 */
#include "platform_internal.h"

#define UART_STARTRX KILN_REG(KILN_UART_BASE + 0x000u)
#define UART_STARTTX KILN_REG(KILN_UART_BASE + 0x008u)
#define UART_RXDRDY KILN_REG(KILN_UART_BASE + 0x108u)
#define UART_TXDRDY KILN_REG(KILN_UART_BASE + 0x11Cu)
#define UART_ENABLE KILN_REG(KILN_UART_BASE + 0x500u)
#define UART_PSELTXD KILN_REG(KILN_UART_BASE + 0x50Cu)
#define UART_PSELRXD KILN_REG(KILN_UART_BASE + 0x514u)
#define UART_RXD KILN_REG(KILN_UART_BASE + 0x518u)
#define UART_TXD KILN_REG(KILN_UART_BASE + 0x51Cu)
#define UART_BAUDRATE KILN_REG(KILN_UART_BASE + 0x524u)

#define GPIO_OUTSET KILN_REG(0x50000508u)
#define GPIO_DIRSET KILN_REG(0x50000518u)

#define BAUDRATE_115200 0x01D7E000u

#if KILN_UART_BAUD != 115200
#error "uart_nrf.c only knows the BAUDRATE register value for 115200 baud"
#endif

void kiln_uart_init(void)
{
    GPIO_OUTSET = 1u << KILN_UART_TX_PIN;
    GPIO_DIRSET = 1u << KILN_UART_TX_PIN;
    UART_PSELTXD = KILN_UART_TX_PIN;
    UART_PSELRXD = KILN_UART_RX_PIN;
    UART_BAUDRATE = BAUDRATE_115200;   /* the one rate kiln uses on every board */
    UART_ENABLE = 4u;
    UART_STARTTX = 1u;
    UART_STARTRX = 1u;
}

void kiln_platform_putc(uint8_t byte)
{
    UART_TXDRDY = 0u;
    UART_TXD = byte;
    while (!UART_TXDRDY) {
    }
}

int kiln_platform_getc(void)
{
    if (!UART_RXDRDY) {
        return -1;
    }
    UART_RXDRDY = 0u;
    return (int)(UART_RXD & 0xFFu);
}
