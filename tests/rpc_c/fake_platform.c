/*
 * fake_platform.c - platform hooks for the C tests and the fuzzer: putc
 * appends to a capture buffer, getc has nothing, ticks advance by 7 per read
 * (deterministic, never zero-length), exit aborts (the server must never call it).
 */
#include <stdlib.h>

#include "fake_platform.h"

uint8_t fake_out[FAKE_OUT_CAP];
size_t fake_out_len;
static uint64_t fake_ticks;

void kiln_platform_init(void) { fake_out_len = 0; }

void kiln_platform_putc(uint8_t byte)
{
    if (fake_out_len < FAKE_OUT_CAP) {
        fake_out[fake_out_len] = byte;
    }
    ++fake_out_len; /* counts past the cap so a test can see an overrun */
}

int kiln_platform_getc(void) { return -1; }

uint64_t kiln_platform_ticks(void)
{
    fake_ticks += 7;
    return fake_ticks;
}

uint32_t kiln_platform_tick_hz(void) { return 1000u; }

void kiln_platform_exit(int code)
{
    (void)code;
    abort();
}
