/* fake_platform.h - the capture buffer of fake_platform.c. */
#ifndef FAKE_PLATFORM_H
#define FAKE_PLATFORM_H

#include <stddef.h>
#include <stdint.h>

#include "platform.h"

#define FAKE_OUT_CAP (1u << 16)

extern uint8_t fake_out[FAKE_OUT_CAP];
extern size_t fake_out_len;

#endif /* FAKE_PLATFORM_H */
