/*
 * posix_test_platform.c - platform hooks for the host-run RPC tests: stdio is the
 * serial line, like crt/platform/posix.c, with three differences that matter on a
 * busy test machine: getc sleeps in poll() up to 20 ms when no byte is waiting
 * (a spinning process is scheduled late when its answer is due), stdout is
 * flushed at every frame delimiter (0x00) so an ACK leaves before a long
 * computation, and end of input ends the process.
 */
#define _POSIX_C_SOURCE 200809L

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "platform.h"

static unsigned char in_buf[4096];
static size_t in_len, in_pos;

void kiln_platform_init(void)
{
    setvbuf(stdout, NULL, _IOFBF, 1 << 16);
}

void kiln_platform_putc(uint8_t byte)
{
    putchar(byte);
    if (byte == 0x00) {
        fflush(stdout);
    }
}

int kiln_platform_getc(void)
{
    struct pollfd pfd;
    ssize_t n;
    if (in_pos < in_len) {
        return in_buf[in_pos++];
    }
    fflush(stdout);
    pfd.fd = STDIN_FILENO;
    pfd.events = POLLIN;
    pfd.revents = 0;
    if (poll(&pfd, 1, 20) <= 0) {
        return -1;
    }
    n = read(STDIN_FILENO, in_buf, sizeof(in_buf));
    if (n <= 0) {
        kiln_platform_exit(0); /* the host closed the line */
    }
    in_len = (size_t)n;
    in_pos = 1;
    return in_buf[0];
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
