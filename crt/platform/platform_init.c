/* platform_init.c - kiln_platform_init() for bare-metal boards. */
#include "platform_internal.h"

void kiln_platform_init(void)
{
    /* Clock gates first: on real parts a UART register write to an ungated
     * peripheral is lost (or faults), so the board's pokes must come first. */
    kiln_board_init();
    kiln_uart_init();
    kiln_timer_init();
    kiln_platform_ready = 1;
}
