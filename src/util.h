/* util.h — small shared helpers: error values, half-precision conversions, timing.
 *
 * Errors in tokd are values, not aborts: a function that can fail takes a `tokd_err *`
 * and fills its message (one line, naming the problem) before returning failure.
 * `assert` is kept for our own invariants only; nothing from outside may trigger one. */
#ifndef TOKD_UTIL_H
#define TOKD_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../include/tokd.h" /* tokd_err */

/* printf-style: writes the message into err (if non-NULL). Always returns -1 so that
 * callers can write `return tokd_seterr(err, "...")`. */
int tokd_seterr(tokd_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Checked size arithmetic: return 0 and store the result, or -1 on overflow. */
static inline int tokd_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}
static inline int tokd_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

/* IEEE half and bfloat16 <-> float, exact (round-to-nearest-even on the way down). */
float tokd_f16_to_f32(uint16_t h);
uint16_t tokd_f32_to_f16(float f);
static inline float tokd_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
uint16_t tokd_f32_to_bf16(float f);

/* Monotonic clock in seconds. */
double tokd_now(void);

/* Allocation that never returns NULL for a non-zero size: on exhaustion it prints one
 * line and exits (memory exhaustion is not recoverable input; sizes from files are
 * validated before they reach here). */
void *tokd_xmalloc(size_t n);
void *tokd_xcalloc(size_t n, size_t sz);
void *tokd_xrealloc(void *p, size_t n);
char *tokd_xstrdup(const char *s);

/* 64-byte aligned allocation for vectors the kernels read; free with free(). */
void *tokd_aligned_alloc(size_t n);

/* Zeroed memory for the large buffers that decode reads every step (the packed
 * weights, the KV cache) and for the read probe that measures the rate they are held
 * to: 2 MiB-aligned and advised as transparent huge pages (MADV_HUGEPAGE), pages
 * committed as they are first touched. On this project's virtual machines a TLB miss walks the guest's
 * and the host's tables, and decode from 4 KiB pages fell now and then to half its rate
 * (the same model loaded twice in one process, alternated: 4 KiB copy 30-65 tok/s where
 * the huge-page copy read 75-92), while the read probe read the same from either. Whole
 * tg runs alternated with 4 KiB pages, medians of six: Q4_0 share 78.5 -> 86.1 %, Q8_0
 * 88.5 -> 95.3 %, Q4_K_M 79.4 -> 83.0 % (BENCHMARKS.md, fourteenth session). Where the
 * kernel has no THP the advice is ignored and the pages stay 4 KiB. NULL when the
 * mapping fails; free with tokd_huge_free and the same n. */
void *tokd_huge_alloc(size_t n);
/* The same, exiting with a message (as tokd_xmalloc does) where the mapping fails. */
void *tokd_xhuge_alloc(size_t n);
void tokd_huge_free(void *p, size_t n);

/* The whole file at path, NUL-terminated (malloc'd; "" when it is empty), its size in *len
 * when len is not NULL; NULL with errno set when it cannot be opened or read. */
char *tokd_read_file(const char *path, size_t *len);
/* The same for what is left to read from f (stdin, a pipe); f stays open. */
char *tokd_read_stream(FILE *f, size_t *len);
/* Writing files whole or not at all: outfile.h (tokd_write_file, tokd_outfile). */

/* Growable byte buffer. Always NUL-terminated (data[len] == 0) once anything was added. */
typedef struct tokd_buf {
    char *data;
    size_t len, cap;
} tokd_buf;
void tokd_buf_append(tokd_buf *b, const void *p, size_t n);
void tokd_buf_appendf(tokd_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void tokd_buf_clear(tokd_buf *b) {
    b->len = 0;
    if (b->data) b->data[0] = 0;
}
void tokd_buf_free(tokd_buf *b);

#endif
