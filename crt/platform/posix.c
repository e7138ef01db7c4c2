/*
 * posix.c - the platform hooks for the host board: stdio is the serial line.
 *
 * getc waits at most 10 ms for a byte: platform.h asks for a prompt -1 when
 * nothing is waiting, and a short poll keeps an idle host-board firmware from
 * spinning a core at 100% while still answering within milliseconds. At the
 * end of stdin (the host closed the line) the firmware exits. Ticks are
 * CLOCK_MONOTONIC nanoseconds.
 */
#define _POSIX_C_SOURCE 200809L

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "platform.h"

void kiln_platform_init(void)
{
    /* Full buffering: putc is called per byte; flushed on exit and whenever
     * the firmware waits for input. */
    setvbuf(stdout, NULL, _IOFBF, 1 << 16);
}

void kiln_platform_putc(uint8_t byte)
{
    putchar(byte);
    /* Flush at the end of a line or an RPC frame (0x00 delimits COBS frames), so
     * an acknowledgement is not held back while a long command runs. */
    if (byte == 0x00 || byte == '\n') {
        fflush(stdout);
    }
}

int kiln_platform_getc(void)
{
    fflush(stdout);
    struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN, .revents = 0};
    if (poll(&pfd, 1, 10) <= 0 || !(pfd.revents & (POLLIN | POLLHUP))) {
        return -1;
    }
    unsigned char byte;
    const ssize_t n = read(STDIN_FILENO, &byte, 1);
    if (n == 0) {
        kiln_platform_exit(0); /* end of input: nobody can talk to us any more */
    }
    if (n != 1) {
        return -1;
    }
    return byte;
}

uint64_t kiln_platform_ticks(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

uint32_t kiln_platform_tick_hz(void)
{
    return 1000000000u;
}

void kiln_platform_exit(int code)
{
    fflush(stdout);
    exit(code);
}
