/* fuzz_gguf.c — libFuzzer target for the GGUF reader: any bytes must either parse into
 * descriptors that all lie inside the buffer, or fail with a message. The same bytes go
 * to the importance-matrix reader (imatrix.h: GGUF or its legacy binary format), which
 * must likewise give entries of finite values or a message, combine with itself, and
 * give --show-statistics' report (imatrix_stats.h) of no more entries and layers than it
 * has. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "imatrix.h"
#include "imatrix_stats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *copy = malloc(size ? size : 1);
    memcpy(copy, data, size);
    tokd_err err;
    gguf_file *f = gguf_open_buffer(copy, size, &err);
    if (f) {
        volatile unsigned sum = 0;
        for (uint64_t i = 0; i < f->n_kv; i++) {
            const gguf_value *v = &f->kv[i].value;
            if (v->type == GGUF_TYPE_STRING && v->v.str.len) sum += (unsigned char)v->v.str.ptr[v->v.str.len - 1];
            if (v->type == GGUF_TYPE_ARRAY && v->v.arr.n) {
                if (v->v.arr.data) sum += (unsigned)gguf_arr_i64(&v->v.arr, v->v.arr.n - 1);
                if (v->v.arr.strs && v->v.arr.strs[v->v.arr.n - 1].len)
                    sum += (unsigned char)v->v.arr.strs[v->v.arr.n - 1].ptr[v->v.arr.strs[v->v.arr.n - 1].len - 1];
            }
        }
        for (uint64_t i = 0; i < f->n_tensors; i++) {
            const gguf_tensor *t = &f->tensors[i];
            const uint8_t *d = t->data;
            if (d < copy || d + t->nbytes > copy + size) abort();
            if (t->nbytes) sum += d[t->nbytes - 1];
        }
        (void)sum;
        gguf_close(f);
    } else if (!err.msg[0]) {
        abort(); /* every failure must say why */
    }
    err.msg[0] = 0;
    tokd_imatrix *im = tokd_imatrix_parse(copy, size, &err);
    if (im) {
        for (size_t i = 0; i < im->n_entries; i++) {
            const tokd_imatrix_entry *e = &im->entries[i];
            if (e->n < 1 || !e->name[0] || tokd_imatrix_find(im, e->name) != e) abort();
            if (e->n_mat < 1 || e->n % e->n_mat) abort();
            for (int64_t k = 0; k < e->n; k++)
                if (!(e->values[k] - e->values[k] == 0)) abort(); /* finite */
        }
        /* combined with itself (tokd imatrix --in-file): same names, same sizes */
        tokd_imatrix *both = tokd_imatrix_new();
        if (tokd_imatrix_combine(both, im, 512, &err) || tokd_imatrix_combine(both, im, 512, &err) ||
            both->n_entries != im->n_entries || both->chunks != (im->chunks > INT_MAX / 2 ? INT_MAX : 2 * im->chunks))
            abort();
        tokd_imatrix_free(both);
        tokd_imatrix_report r;
        tokd_imatrix_report_make(im, &r);
        if (r.n_entries > im->n_entries || r.n_layers > r.n_entries) abort();
        for (size_t i = 1; i < r.n_layers; i++)
            if (r.layers[i].layer <= r.layers[i - 1].layer) abort();
        tokd_imatrix_report_free(&r);
        tokd_imatrix_free(im);
    } else if (!err.msg[0]) {
        abort();
    }
    free(copy);
    return 0;
}
