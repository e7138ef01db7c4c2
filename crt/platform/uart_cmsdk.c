/*
 * uart_cmsdk.c - Arm CMSDK APB UART (MPS2 and MPS3 FPGA images).
 *
 * Registers: DATA +0x00, STATE +0x04 (bit0 TX full, bit1 RX full),
 * CTRL +0x08 (bit0 TX enable, bit1 RX enable), BAUDDIV +0x10 (>= 16).
 */
#include "platform_internal.h"

#define UART_DATA KILN_REG(KILN_UART_BASE + 0x00u)
#define UART_STATE KILN_REG(KILN_UART_BASE + 0x04u)
#define UART_CTRL KILN_REG(KILN_UART_BASE + 0x08u)
#define UART_BAUDDIV KILN_REG(KILN_UART_BASE + 0x10u)

#define STATE_TX_FULL (1u << 0)
#define STATE_RX_FULL (1u << 1)

void kiln_uart_init(void)
{
    UART_BAUDDIV = KILN_UART_CLOCK_HZ / KILN_UART_BAUD;
    UART_CTRL = 0x3u;
}

void kiln_platform_putc(uint8_t byte)
{
    while (UART_STATE & STATE_TX_FULL) {
    }
    UART_DATA = byte;
}

int kiln_platform_getc(void)
{
    if (!(UART_STATE & STATE_RX_FULL)) {
        return -1;
    }
    return (int)(UART_DATA & 0xFFu);
}
