/* check.h - the C tests' one assertion macro and their summary line. */
#ifndef KILN_TEST_CHECK_H
#define KILN_TEST_CHECK_H

#include <stdio.h>

static int check_passed;
static int check_failed;

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (cond) {                                                              \
            ++check_passed;                                                      \
        } else {                                                                 \
            ++check_failed;                                                      \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                        \
    } while (0)

#define CHECK_EQ(a, b)                                                           \
    do {                                                                         \
        const long long check_a_ = (long long)(a), check_b_ = (long long)(b);   \
        if (check_a_ == check_b_) {                                              \
            ++check_passed;                                                      \
        } else {                                                                 \
            ++check_failed;                                                      \
            fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %lld, %s == %lld\n", __FILE__, \
                    __LINE__, #a, check_a_, #b, check_b_);                       \
        }                                                                        \
    } while (0)

/* "N passed, N failed" alone on the last line; exit code 1 on any failure. */
static int check_summary(void)
{
    printf("%d passed, %d failed\n", check_passed, check_failed);
    return check_failed ? 1 : 0;
}

#endif /* KILN_TEST_CHECK_H */
