/* Small helpers shared by the C tests. */
#ifndef HOMARS_TEST_CHECK_H
#define HOMARS_TEST_CHECK_H

#include <homars.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int checks_failed;
static int checks_passed;

/* Records one check; prints the failures (with the library's last error). */
#define CHECK(cond, ...)                                                    \
    do {                                                                    \
        if (cond) {                                                         \
            checks_passed++;                                                \
        } else {                                                            \
            checks_failed++;                                                \
            fprintf(stderr, "%s:%d: FAILED: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                   \
            fprintf(stderr, " [last error: %s]\n", homars_last_error());    \
        }                                                                   \
    } while (0)

/* Checks that call returned -code. */
#define CHECK_ERR(call, code)                                               \
    do {                                                                    \
        int r_ = (call);                                                    \
        CHECK(r_ == -(code), "%s returned %d (%s), want -%s", #call, r_,    \
              homars_strerror(r_), #code);                                  \
    } while (0)

/* Checks that call returned 0, or stops the test (nothing after it can
 * work). */
#define MUST(call)                                                          \
    do {                                                                    \
        int r_ = (call);                                                    \
        if (r_ != 0) {                                                      \
            fprintf(stderr, "%s:%d: %s returned %d (%s) [%s]\n", __FILE__,  \
                    __LINE__, #call, r_, homars_strerror(r_),               \
                    homars_last_error());                                   \
            exit(1);                                                        \
        }                                                                   \
    } while (0)

static inline double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* len bytes that depend on tag. */
static uint8_t *pattern(uint64_t tag, size_t len)
{
    uint8_t *p = malloc(len ? len : 1);
    uint64_t x = tag * 0x9E3779B97F4A7C15ull + len + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)(x >> 24);
    }
    return p;
}

/* The closing line the test runner reads; exit status 1 on any failure. */
static int report(const char *name)
{
    printf("%s: %d passed, %d failed\n", name, checks_passed, checks_failed);
    return checks_failed == 0 ? 0 : 1;
}

#endif
