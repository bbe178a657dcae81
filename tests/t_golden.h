/* t_golden.h — helpers shared by the tests that compare with ../shared/golden: reading a
 * whole file, and the metric of ../shared/README.md (KL of the softmaxed golden row
 * against ours, in double precision, plus top-1 agreement). */
#ifndef TOKD_T_GOLDEN_H
#define TOKD_T_GOLDEN_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "util.h"

/* The whole file, NUL-terminated (malloc'd), or NULL; *n = its size. */
static inline char *t_slurp(const char *path, size_t *n) {
    *n = 0;
    return tokd_read_file(path, n);
}

/* KL(softmax(gold) || softmax(ours)) in double; *top1_equal = the argmaxes agree. */
static inline double t_kl_row(const float *gold, const float *ours, int32_t V, int *top1_equal) {
    double mg = -INFINITY, mo = -INFINITY;
    int ig = 0, io = 0;
    for (int32_t t = 0; t < V; t++) {
        if (gold[t] > mg) { mg = gold[t]; ig = t; }
        if (ours[t] > mo) { mo = ours[t]; io = t; }
    }
    double sg = 0, so = 0;
    for (int32_t t = 0; t < V; t++) {
        sg += exp(gold[t] - mg);
        so += exp(ours[t] - mo);
    }
    double lsg = log(sg), lso = log(so), kl = 0;
    for (int32_t t = 0; t < V; t++) {
        double lg = gold[t] - mg - lsg, lo = ours[t] - mo - lso;
        kl += exp(lg) * (lg - lo);
    }
    *top1_equal = ig == io;
    return kl;
}
#endif
