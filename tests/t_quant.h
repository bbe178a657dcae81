/* t_quant.h — the thread check the grid-quantiser tests share (test_quantize_iq1/2/3).
 * Those quantisers build their search tables on first use; the check runs a test's
 * quantise_all in two threads at once as the program's first calls (so both want the
 * tables while they are built), then once more in this thread, and asks that every
 * type's bytes be the same all three times. */
#ifndef TOKD_T_QUANT_H
#define TOKD_T_QUANT_H
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "t.h"

#define T_QUANT_MAX_TYPES 4

/* One run's inputs (x: the rows, qw: one row of importance weights) and its outputs, one
 * buffer per type. */
typedef struct {
    const float *x, *qw;
    uint8_t *out[T_QUANT_MAX_TYPES];
} t_quant_job;
typedef void (*t_quant_all_fn)(const t_quant_job *job);

typedef struct {
    t_quant_all_fn fn;
    t_quant_job job;
} t_quant_thread_arg;
static void *t_quant_thread_main(void *arg) {
    const t_quant_thread_arg *a = arg;
    a->fn(&a->job);
    return NULL;
}

/* names[t] and out_bytes[t] for the n_types types quantise_all writes (n_types <=
 * T_QUANT_MAX_TYPES). */
static inline void t_quant_threads(t_quant_all_fn quantise_all, size_t n_types, const char *const names[],
                                   const size_t out_bytes[], const float *x, const float *qw) {
    t_quant_thread_arg arg[3];
    for (int k = 0; k < 3; k++) {
        arg[k].fn = quantise_all;
        arg[k].job.x = x, arg[k].job.qw = qw;
        for (size_t t = 0; t < n_types; t++) arg[k].job.out[t] = calloc(1, out_bytes[t]);
    }
    pthread_t th[2];
    int started = 0;
    for (int k = 0; k < 2; k++) started += pthread_create(&th[k], NULL, t_quant_thread_main, &arg[k]) == 0;
    CHECK(started == 2, "%d of 2 threads started", started);
    for (int k = 0; k < started; k++) pthread_join(th[k], NULL);
    quantise_all(&arg[2].job); /* one thread, after */
    for (size_t t = 0; t < n_types; t++)
        for (int k = 0; k < started; k++)
            CHECK(memcmp(arg[k].job.out[t], arg[2].job.out[t], out_bytes[t]) == 0,
                  "%s: thread %d's bytes differ from one thread's", names[t], k);
    for (int k = 0; k < 3; k++)
        for (size_t t = 0; t < n_types; t++) free(arg[k].job.out[t]);
}
#endif
