/* t.h — the tiny test harness every test program uses.
 * CHECK counts an assertion; a test program ends with T_DONE(), which prints
 * "N passed, M failed" (tests/run.sh sums these lines) and exits non-zero on failure. */
#ifndef TOKD_T_H
#define TOKD_T_H
#include <stdio.h>
#include <stdlib.h>

static int t_passed, t_failed;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (cond) {                                                        \
            t_passed++;                                                    \
        } else {                                                           \
            t_failed++;                                                    \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
        }                                                                  \
    } while (0)

#define T_DONE()                                                 \
    do {                                                         \
        printf("%d passed, %d failed\n", t_passed, t_failed);    \
        return t_failed ? 1 : 0;                                 \
    } while (0)

/* Path of the shared reference data (TOKD_SHARED, default ../shared). */
static inline const char *t_shared(void) {
    const char *s = getenv("TOKD_SHARED");
    return s ? s : "../shared";
}
#endif
