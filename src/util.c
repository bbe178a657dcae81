/* util.c — see util.h. */
#define _POSIX_C_SOURCE 200809L
#include "util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

int tokd_seterr(tokd_err *err, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

float tokd_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    uint32_t u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while ((man & 0x400) == 0);
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t tokd_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000;
    uint32_t aexp = (u >> 23) & 0xff;
    uint32_t man = u & 0x7fffff;
    if (aexp == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    int32_t e = (int32_t)aexp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00);
    if (e <= 0) {
        if (e < -10) return (uint16_t)sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++; /* may carry into exp: correct */
    return (uint16_t)(sign | half);
}

uint16_t tokd_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

double tokd_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void oom(size_t n) {
    fprintf(stderr, "tokd: out of memory allocating %zu bytes\n", n);
    exit(3);
}

void *tokd_xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) oom(n);
    return p;
}
void *tokd_xcalloc(size_t n, size_t sz) {
    void *p = calloc(n ? n : 1, sz ? sz : 1);
    if (!p) oom(n * sz);
    return p;
}
void *tokd_xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) oom(n);
    return q;
}
char *tokd_xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = tokd_xmalloc(n);
    memcpy(p, s, n);
    return p;
}
void *tokd_aligned_alloc(size_t n) {
    size_t rounded = (n + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    if (!p) oom(n);
    return p;
}

#define HUGE_BYTES ((size_t)2 << 20)
static size_t huge_round(size_t n) { return n ? (n + HUGE_BYTES - 1) & ~(HUGE_BYTES - 1) : HUGE_BYTES; }

void *tokd_huge_alloc(size_t n) {
    const size_t len = huge_round(n);
    if (len < n) return NULL;
    /* map one huge page more than asked, then unmap the ends that fall outside the
       2 MiB-aligned middle, so that every huge page of it can be a huge page */
    uint8_t *raw = mmap(NULL, len + HUGE_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    uint8_t *p = (uint8_t *)(((uintptr_t)raw + HUGE_BYTES - 1) & ~(uintptr_t)(HUGE_BYTES - 1));
    if (p > raw) munmap(raw, (size_t)(p - raw));
    if (p + len < raw + len + HUGE_BYTES) munmap(p + len, (size_t)(raw + len + HUGE_BYTES - (p + len)));
#ifdef MADV_HUGEPAGE
    madvise(p, len, MADV_HUGEPAGE); /* advice only: without THP the pages stay 4 KiB */
#endif
    return p;
}

void *tokd_xhuge_alloc(size_t n) {
    void *p = tokd_huge_alloc(n);
    if (!p) oom(n);
    return p;
}

void tokd_huge_free(void *p, size_t n) {
    if (p) munmap(p, huge_round(n));
}

char *tokd_read_stream(FILE *f, size_t *len) {
    tokd_buf b = {0};
    tokd_buf_append(&b, "", 0);
    char chunk[65536];
    size_t n;
    errno = 0;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) tokd_buf_append(&b, chunk, n);
    if (ferror(f)) { /* keep read's errno (EISDIR for a folder); EIO when it left none */
        const int e = errno ? errno : EIO;
        tokd_buf_free(&b);
        errno = e;
        return NULL;
    }
    if (len) *len = b.len;
    return b.data;
}

char *tokd_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *data = tokd_read_stream(f, len);
    fclose(f);
    return data;
}

void tokd_buf_append(tokd_buf *b, const void *p, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1) cap *= 2;
        b->data = tokd_xrealloc(b->data, cap);
        b->cap = cap;
    }
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
}

void tokd_buf_appendf(tokd_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n <= 0) return;
    tokd_buf_append(b, NULL, 0); /* ensure allocated */
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t cap = b->cap;
        while (cap < b->len + (size_t)n + 1) cap *= 2;
        b->data = tokd_xrealloc(b->data, cap);
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void tokd_buf_free(tokd_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
