/*
 * syscalls.c - the few newlib system calls a bare-metal kiln firmware needs.
 *
 * stdout and stderr go to the board's UART, stdin reads it (non-blocking
 * reads wait), the heap grows from the end of .bss up to the stack's
 * reserved block (linker symbols end and __kiln_stack_limit). kiln itself
 * never allocates; these exist so that user code calling printf or malloc
 * links without newlib's nosys stubs and their warnings.
 */
#include <errno.h>
#include <stddef.h>
#include <sys/stat.h>

#include "platform_internal.h"

extern char end, __kiln_stack_limit;

int _write(int fd, const char *buf, int len);
int _read(int fd, char *buf, int len);
void *_sbrk(ptrdiff_t incr);
int _close(int fd);
int _fstat(int fd, struct stat *st);
int _isatty(int fd);
int _lseek(int fd, int offset, int whence);
void _exit(int code);
int _kill(int pid, int sig);
int _getpid(void);

int _write(int fd, const char *buf, int len)
{
    if (fd != 1 && fd != 2) {
        errno = EBADF;
        return -1;
    }
    for (int i = 0; i < len; i++) {
        kiln_platform_putc((uint8_t)buf[i]);
    }
    return len;
}

int _read(int fd, char *buf, int len)
{
    if (fd != 0) {
        errno = EBADF;
        return -1;
    }
    if (len <= 0) {
        return 0;
    }
    int c;
    while ((c = kiln_platform_getc()) < 0) {
    }
    buf[0] = (char)c;
    return 1;
}

void *_sbrk(ptrdiff_t incr)
{
    static char *brk = &end;
    if (incr > &__kiln_stack_limit - brk) {
        errno = ENOMEM;
        return (void *)-1;
    }
    char *old = brk;
    brk += incr;
    return old;
}

int _close(int fd)
{
    (void)fd;
    return -1;
}

int _fstat(int fd, struct stat *st)
{
    (void)fd;
    st->st_mode = S_IFCHR;
    return 0;
}

int _isatty(int fd)
{
    (void)fd;
    return 1;
}

int _lseek(int fd, int offset, int whence)
{
    (void)fd;
    (void)offset;
    (void)whence;
    return 0;
}

void _exit(int code)
{
    kiln_platform_exit(code);
    for (;;) {
    }
}

int _kill(int pid, int sig)
{
    (void)pid;
    (void)sig;
    errno = EINVAL;
    return -1;
}

int _getpid(void)
{
    return 1;
}
