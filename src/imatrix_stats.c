/* imatrix_stats.c — see imatrix_stats.h. */
#include "imatrix_stats.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether column j's matrix was reached (its count is above 0), and its E[x²]. */
static bool counted(const tokd_imatrix_entry *e, int64_t j) { return e->counts[j / (e->n / e->n_mat)] > 0; }
static double column_mean(const tokd_imatrix_entry *e, int64_t j) { return e->sums[j] / e->counts[j / (e->n / e->n_mat)]; }

/* The layer of "blk.N." anywhere in the name (-1 if none), and where it starts. */
static int layer_of(const char *name, const char **digits) {
    for (const char *p = strstr(name, "blk."); p; p = strstr(p + 1, "blk.")) {
        const char *d = p + 4, *q = d;
        long v = 0;
        while (*q >= '0' && *q <= '9' && v < 1000000) v = v * 10 + (*q++ - '0');
        if (q > d && *q == '.') {
            if (digits) *digits = d;
            return (int)v;
        }
    }
    return -1;
}

/* The name's tensor part: the dot-separated piece before "weight", else the whole name. */
static void tensor_part(const char *name, const char **t, int *len) {
    *t = name;
    *len = (int)strlen(name);
    const char *prev = NULL;
    for (const char *p = name;;) {
        const char *dot = strchr(p, '.');
        const size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (n == 6 && !strncmp(p, "weight", 6) && prev) {
            *t = prev;
            *len = (int)(p - 1 - prev);
            return;
        }
        if (!dot) return;
        prev = p;
        p = dot + 1;
    }
}

static void entry_stat(const tokd_imatrix_entry *e, tokd_imatrix_stat *s) {
    memset(s, 0, sizeof *s);
    s->entry = e;
    s->layer = layer_of(e->name, NULL);
    tensor_part(e->name, &s->tensor, &s->tensor_len);
    double mean = 0, m2 = 0, energy = 0;
    s->min = INFINITY, s->max = -INFINITY;
    for (int64_t j = 0; j < e->n; j++) {
        if (!counted(e, j)) continue;
        const double v = column_mean(e, j);
        s->n++;
        s->sum += v;
        if (v < s->min) s->min = v;
        if (v > s->max) s->max = v;
        const double d = v - mean;
        mean += d / (double)s->n;
        m2 += d * (v - mean);
        energy += v > 0 ? v : 0;
    }
    if (!s->n) return;
    s->mean = mean;
    s->std = s->n > 1 ? sqrt(fmax(m2 / (double)(s->n - 1), 0)) : 0;
    int64_t outside = 0;
    for (int64_t j = 0; j < e->n; j++) {
        if (!counted(e, j)) continue;
        const double v = column_mean(e, j);
        if (energy > 0 && v > 0) s->entropy -= v / energy * log2(v / energy);
        if (s->std > 0 && fabs((v - mean) / s->std) > 1) outside++;
    }
    s->zd = (double)outside / (double)s->n;
}

/* The E[x²] vector (uncounted matrices as zeros) of e, or NULL for no entry. */
static double *means_of(const tokd_imatrix_entry *e) {
    if (!e) return NULL;
    double *v = malloc(sizeof(double) * (size_t)e->n);
    if (!v) abort();
    for (int64_t j = 0; j < e->n; j++) v[j] = counted(e, j) ? column_mean(e, j) : 0;
    return v;
}

/* Sums for a cosine similarity of a against b, added to acc[3] (a·b, |a|², |b|²). */
static void cos_add(const double *a, const double *b, int64_t n, double acc[3]) {
    for (int64_t i = 0; i < n; i++) acc[0] += a[i] * b[i], acc[1] += a[i] * a[i], acc[2] += b[i] * b[i];
}
static double cos_of(const double acc[3]) {
    if (acc[1] > 0 && acc[2] > 0) return fmax(-1.0, fmin(1.0, acc[0] / (sqrt(acc[1]) * sqrt(acc[2]))));
    return acc[1] == 0 && acc[2] == 0 ? 1.0 : 0.0;
}

/* The entry of the same tensor one layer down ("blk.N." -> "blk.N-1."), or NULL. */
static const tokd_imatrix_entry *previous_layer(const tokd_imatrix *im, const char *name) {
    const char *d;
    const int layer = layer_of(name, &d);
    if (layer <= 0) return NULL;
    const char *rest = d;
    while (*rest >= '0' && *rest <= '9') rest++;
    const size_t n = strlen(name) + 16;
    char *prev = malloc(n);
    if (!prev) abort();
    snprintf(prev, n, "%.*s%d%s", (int)(d - name), name, layer - 1, rest);
    const tokd_imatrix_entry *e = tokd_imatrix_find(im, prev);
    free(prev);
    return e;
}

static int by_tensor_then_sum(const void *pa, const void *pb) {
    const tokd_imatrix_stat *a = pa, *b = pb;
    const int n = a->tensor_len < b->tensor_len ? a->tensor_len : b->tensor_len;
    int c = strncmp(a->tensor, b->tensor, (size_t)n);
    if (!c) c = a->tensor_len - b->tensor_len;
    if (!c) c = a->sum > b->sum ? -1 : a->sum < b->sum;
    return c ? c : strcmp(a->entry->name, b->entry->name);
}

typedef struct {
    int layer;
    size_t index; /* into the report's entries */
} layer_ref;
static int by_layer(const void *pa, const void *pb) {
    const layer_ref *a = pa, *b = pb;
    if (a->layer != b->layer) return a->layer < b->layer ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

void tokd_imatrix_report_make(const tokd_imatrix *im, tokd_imatrix_report *r) {
    memset(r, 0, sizeof *r);
    r->entries = calloc(im->n_entries ? im->n_entries : 1, sizeof *r->entries);
    if (!r->entries) abort();
    for (size_t i = 0; i < im->n_entries; i++) {
        tokd_imatrix_stat *s = &r->entries[r->n_entries];
        entry_stat(&im->entries[i], s);
        if (!s->n) continue;
        const tokd_imatrix_entry *prev = previous_layer(im, s->entry->name);
        if (prev && prev->n == s->entry->n) {
            double *a = means_of(s->entry), *b = means_of(prev);
            cos_add(a, b, s->entry->n, s->cos_sums);
            s->paired = true;
            s->cossim = cos_of(s->cos_sums);
            free(a);
            free(b);
        }
        r->n_entries++;
    }
    qsort(r->entries, r->n_entries, sizeof *r->entries, by_tensor_then_sum);
    /* layers: sums and zd over their entries, the cosine over all of them end to end, in
       the report's order; the entries sorted by layer, so that any layer numbers cost no
       more than the entries do */
    layer_ref *refs = malloc(sizeof *refs * (r->n_entries ? r->n_entries : 1));
    r->layers = calloc(r->n_entries ? r->n_entries : 1, sizeof *r->layers);
    if (!refs || !r->layers) abort();
    size_t n_refs = 0;
    for (size_t i = 0; i < r->n_entries; i++)
        if (r->entries[i].layer >= 0) refs[n_refs++] = (layer_ref){r->entries[i].layer, i};
    qsort(refs, n_refs, sizeof *refs, by_layer);
    for (size_t i = 0; i < n_refs;) {
        tokd_imatrix_layer_stat *l = &r->layers[r->n_layers++];
        l->layer = refs[i].layer;
        double acc[3] = {0, 0, 0};
        bool paired = false;
        for (; i < n_refs && refs[i].layer == l->layer; i++) {
            const tokd_imatrix_stat *s = &r->entries[refs[i].index];
            l->sum += s->sum;
            l->zd += s->zd * (double)s->n;
            l->n += s->n;
            if (s->paired) { /* the vectors end to end: their sums add */
                for (int k = 0; k < 3; k++) acc[k] += s->cos_sums[k];
                paired = true;
            }
        }
        l->zd = l->n ? l->zd / (double)l->n : 0;
        l->cossim = paired ? cos_of(acc) : 0;
    }
    free(refs);
}

void tokd_imatrix_report_free(tokd_imatrix_report *r) {
    free(r->entries);
    free(r->layers);
    memset(r, 0, sizeof *r);
}
