/* quantize.c — see quantize.h. */
#include "quantize.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gguf.h"
#include "imatrix.h"
#include "kernels/quants.h"
#include "kernels/types.h"

void tokd_quant_row(uint32_t type, const float *src, void *dst, int64_t n, const float *qw) {
    if (type == GGML_TYPE_Q8_0) { /* as llama.cpp's: no use for an importance matrix */
        tokd_q8_0_from_float_ref(src, dst, n);
        return;
    }
    const tokd_type_traits *tt = tokd_type_get(type);
    if (!qw || !tt->from_float_w) {
        tt->from_float(src, dst, n);
        return;
    }
    tt->from_float_w(src, dst, n, qw);
    /* A block whose importance weights are all 0 (columns the calibration never
     * reached): llama.cpp's quantisers write a NaN scale there (Q2_K, Q4_K, Q5_K, IQ4_NL)
     * or zeros (most others); tokd quantises it as without a matrix, or for the grid
     * types that need one, with equal weights. Every quantiser works super-block by
     * super-block there, so this rewrites that block alone. */
    for (int64_t b = 0; b < n / tt->blck; b++) {
        const float *w = qw + b * tt->blck;
        bool zero = true;
        for (uint32_t i = 0; i < tt->blck && zero; i++) zero = w[i] == 0;
        if (!zero) continue;
        uint8_t *out = (uint8_t *)dst + b * tt->bytes;
        if (tt->from_float) {
            tt->from_float(src + b * tt->blck, out, tt->blck);
        } else {
            float ones[TOKD_QK_K];
            for (uint32_t i = 0; i < tt->blck; i++) ones[i] = 1;
            tt->from_float_w(src + b * tt->blck, out, tt->blck, ones);
        }
    }
}

bool tokd_quant_writable(uint32_t type, bool with_weights) {
    const tokd_type_traits *tt = tokd_type_get(type);
    if (!tt || type == GGML_TYPE_Q8_1 || type == GGML_TYPE_Q8_K) return false;
    return !tokd_type_is_quantized(type) || tt->from_float || (with_weights && tt->from_float_w);
}

/* ---- parallel conversion of a chunk of rows --------------------------------------- */

typedef struct {
    uint32_t type;
    int64_t row0, n_rows, n_per_row;
    const float *qw;       /* importance weights: n_per_row per slice of rows_per_slice rows, or NULL */
    int64_t rows_per_slice, n_slices;
    size_t row_bytes;
    uint8_t *dst;
    float *tmp;            /* one row of floats per thread */
    tokd_row_fill_fn fill;
    void *ctx;
} qjob;

static void qjob_run(void *arg, int ith, int nth) {
    qjob *j = arg;
    float *tmp = j->tmp + (size_t)ith * (size_t)j->n_per_row;
    int64_t per = (j->n_rows + nth - 1) / nth, r0 = per * ith, r1 = r0 + per < j->n_rows ? r0 + per : j->n_rows;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t row = j->row0 + r;
        j->fill(j->ctx, row, tmp, j->n_per_row);
        const float *qw = j->qw ? j->qw + (row / j->rows_per_slice % j->n_slices) * j->n_per_row : NULL;
        tokd_quant_row(j->type, tmp, j->dst + (size_t)r * j->row_bytes, j->n_per_row, qw);
    }
}

int tokd_quant_stream_tensor(tokd_pool *pool, gguf_stream *s, uint32_t type, int64_t n_rows, int64_t n_per_row,
                             const tokd_quant_weights *qw, tokd_row_fill_fn fill, void *ctx, tokd_err *err) {
    const tokd_type_traits *tt = tokd_type_get(type);
    if (!tokd_quant_writable(type, qw && qw->values))
        return tokd_seterr(err, "cannot quantise to type %s%s", ggml_type_name(type),
                           tokd_quant_writable(type, true) ? " without an importance matrix" : "");
    if (n_per_row % tt->blck)
        return tokd_seterr(err, "row length %lld is not a multiple of %s's block of %u", (long long)n_per_row, tt->name, tt->blck);
    qjob j = {.type = type, .n_per_row = n_per_row, .row_bytes = tokd_row_bytes(tt, n_per_row), .fill = fill, .ctx = ctx};
    if (qw && qw->values) {
        j.qw = qw->values;
        j.rows_per_slice = qw->rows_per_slice > 0 ? qw->rows_per_slice : n_rows;
        j.n_slices = qw->n_slices > 0 ? qw->n_slices : 1;
    }
    int nth = tokd_pool_size(pool);
    /* chunks of about 16 MiB of output (at least 4 rows per thread) */
    int64_t chunk = (int64_t)((16u << 20) / (j.row_bytes ? j.row_bytes : 1));
    if (chunk < 4 * nth) chunk = 4 * nth;
    if (chunk > n_rows) chunk = n_rows;
    j.dst = tokd_xmalloc(chunk > 0 ? (size_t)chunk * j.row_bytes : 1);
    j.tmp = tokd_xmalloc((size_t)nth * (size_t)n_per_row * sizeof(float) + 1);
    int rc = 0;
    for (int64_t r = 0; r < n_rows && !rc; r += chunk) {
        j.row0 = r;
        j.n_rows = r + chunk <= n_rows ? chunk : n_rows - r;
        tokd_pool_run(pool, qjob_run, &j);
        rc = gguf_stream_write(s, j.dst, (size_t)j.n_rows * j.row_bytes, err);
    }
    free(j.dst);
    free(j.tmp);
    return rc;
}

/* ---- tokd quantize ---------------------------------------------------------------- */

typedef struct {
    const uint8_t *data;
    size_t row_bytes;
    const tokd_type_traits *src;
} src_rows;

static void fill_from_src(void *ctx, int64_t row, float *out, int64_t n) {
    const src_rows *s = ctx;
    s->src->to_float(s->data + (size_t)row * s->row_bytes, out, n);
}

static char *tensor_name(const gguf_tensor *t) {
    char *s = tokd_xmalloc((size_t)t->name.len + 1);
    memcpy(s, t->name.ptr, (size_t)t->name.len);
    s[t->name.len] = 0;
    return s;
}

/* llama.cpp writes tensors ordered by name (its loader keeps them in a sorted map), then
 * stably grouped by block number, non-block tensors first. Doing the same makes our files
 * byte-identical to its, and its layer counters see the same order. */
static int blk_index(const char *name) {
    int b;
    return sscanf(name, "blk.%d.", &b) == 1 ? b : -1;
}
static int cmp_tensor_order(const void *a, const void *b, void *names) {
    const char *x = ((char **)names)[*(const uint64_t *)a], *y = ((char **)names)[*(const uint64_t *)b];
    int bx = blk_index(x), by = blk_index(y);
    if (bx != by) return bx < by ? -1 : 1;
    return strcmp(x, y);
}

/* A type name given for an override: one tokd can write. */
static int override_type(const char *what, const char *name, uint32_t *out, tokd_err *err) {
    *out = TOKD_QTYPE_NONE;
    if (!name) return 0;
    for (uint32_t id = 0; id < GGML_TYPE_MAX_ID; id++) {
        const char *tn = ggml_type_name(id);
        const tokd_type_traits *tt = tokd_type_get(id);
        if (tn && !strcasecmp(tn, name) && tt && tokd_quant_writable(id, true)) {
            *out = id;
            return 0;
        }
    }
    return tokd_seterr(err, "%s: unknown or unsupported type '%s'", what, name);
}

/* A tensor's importance weights, as llama-quantize picks them: none without an entry
 * (said in the log), and an entry of another size is an error, except for the token
 * embedding (llama.cpp quantizes it without weights then). */
static int tensor_weights(const tokd_imatrix *im, const char *name, const gguf_tensor *t, tokd_quant_weights *qw,
                          FILE *log, tokd_err *err) {
    *qw = (tokd_quant_weights){0};
    if (!im) return 0;
    const tokd_imatrix_entry *e = tokd_imatrix_find(im, name);
    if (!e) {
        if (log) fprintf(log, "    no importance weights for %s\n", name);
        return 0;
    }
    if ((uint64_t)e->n != t->ne[0] * t->ne[2]) {
        if (!strcmp(name, "token_embd.weight")) {
            if (log) fprintf(log, "    importance weights for %s: %lld values, not %llu; not used\n", name, (long long)e->n,
                             (unsigned long long)(t->ne[0] * t->ne[2]));
            return 0;
        }
        return tokd_seterr(err, "tensor '%s': the importance matrix has %lld values for it, the tensor %llu columns x %llu experts",
                           name, (long long)e->n, (unsigned long long)t->ne[0], (unsigned long long)t->ne[2]);
    }
    *qw = (tokd_quant_weights){e->values, (int64_t)t->ne[1], (int64_t)t->ne[2]};
    return 0;
}

int tokd_quantize_file(const char *in, const char *out, const char *type_name, int n_threads, FILE *log, tokd_err *err) {
    return tokd_quantize_file_opts(in, out, type_name, NULL, n_threads, log, err);
}

int tokd_quantize_file_opts(const char *in, const char *out, const char *type_name, const tokd_quantize_opts *opts,
                            int n_threads, FILE *log, tokd_err *err) {
    const tokd_quantize_opts none = {0};
    if (!opts) opts = &none;
    const tokd_qtarget *target = tokd_qtarget_find(type_name);
    if (!target) return tokd_qtarget_unknown(type_name, err);
    uint32_t output_type, embd_type;
    if (override_type("--output-tensor-type", opts->output_type, &output_type, err) ||
        override_type("--token-embedding-type", opts->embd_type, &embd_type, err))
        return -1;
    if (tokd_qtarget_needs_imatrix(target) && !opts->imatrix)
        return tokd_seterr(err, "%s needs an importance matrix, as in llama.cpp: --imatrix FILE (from llama-imatrix)",
                           target->name);
    tokd_imatrix *im = NULL;
    if (opts->imatrix && !(im = tokd_imatrix_load(opts->imatrix, err))) return -1;
    gguf_file *f = gguf_open(in, err);
    if (!f) {
        tokd_imatrix_free(im);
        return -1;
    }
    int rc = -1;
    uint64_t n = f->n_tensors;
    char **names = tokd_xcalloc(n ? (size_t)n : 1, sizeof(char *));
    gguf_stream_tensor *infos = tokd_xcalloc(n ? (size_t)n : 1, sizeof *infos);
    bool *convert = tokd_xcalloc(n ? (size_t)n : 1, sizeof(bool));
    tokd_quant_weights *qws = tokd_xcalloc(n ? (size_t)n : 1, sizeof *qws);
    gguf_writer *meta = gguf_writer_new();
    gguf_stream *s = NULL;
    tokd_pool *pool = NULL;
    uint64_t *order = tokd_xcalloc(n ? (size_t)n : 1, sizeof(uint64_t));
    {
        char **file_names = tokd_xcalloc(n ? (size_t)n : 1, sizeof(char *));
        for (uint64_t i = 0; i < n; i++) {
            file_names[i] = tensor_name(&f->tensors[i]);
            order[i] = i;
        }
        qsort_r(order, (size_t)n, sizeof *order, cmp_tensor_order, file_names);
        for (uint64_t i = 0; i < n; i++) names[i] = file_names[order[i]];
        free(file_names);
    }

    tokd_qmodel model;
    if (tokd_qmodel_read(f, &model, err)) goto done;
    tokd_qplan plan;
    tokd_qplan_init(&plan, target, &model, (const char *const *)names, n);
    plan.pure = opts->pure;
    plan.output_type = output_type;
    plan.embd_type = embd_type;
    plan.has_imatrix = im != NULL;

    /* the keys set below replace the input's (llama.cpp removes a key it sets and
     * appends it, in this order) */
    const char *set_keys[] = {"general.quantization_version", "general.file_type",
                              im ? "quantize.imatrix.file" : NULL,
                              im && im->dataset[0] ? "quantize.imatrix.dataset" : NULL,
                              im ? "quantize.imatrix.entries_count" : NULL,
                              im && im->chunks > 0 ? "quantize.imatrix.chunks_count" : NULL};
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kv[i];
        bool replaced = false;
        for (size_t k = 0; k < sizeof set_keys / sizeof *set_keys; k++)
            if (set_keys[k] && gguf_str_eq(kv->key, set_keys[k])) replaced = true;
        if (!replaced) gguf_writer_copy_kv(meta, kv);
    }
    gguf_writer_set_u32(meta, "general.quantization_version", 2);
    gguf_writer_set_u32(meta, "general.file_type", target->file_type);
    if (im) { /* llama-quantize's record of the matrix; strings cut at 127 bytes as its */
        gguf_writer_set_str_n(meta, "quantize.imatrix.file", opts->imatrix, strnlen(opts->imatrix, 127));
        if (im->dataset[0]) gguf_writer_set_str_n(meta, "quantize.imatrix.dataset", im->dataset, strnlen(im->dataset, 127));
        gguf_writer_set_i32(meta, "quantize.imatrix.entries_count", (int32_t)im->n_entries);
        if (im->chunks > 0) gguf_writer_set_i32(meta, "quantize.imatrix.chunks_count", im->chunks);
    }

    uint64_t bytes_in = 0, bytes_out = 0;
    for (uint64_t i = 0; i < n; i++) {
        const gguf_tensor *t = &f->tensors[order[i]];
        gguf_stream_tensor *o = &infos[i];
        o->name = names[i];
        o->n_dims = t->n_dims;
        for (int d = 0; d < GGUF_MAX_DIMS; d++) o->ne[d] = t->ne[d];
        o->type = t->type;
        o->nbytes = t->nbytes;
        if (tokd_qplan_converts(names[i], t->n_dims)) {
            uint32_t want = tokd_qplan_type(&plan, names[i], t->ne[0]);
            if (want == TOKD_QTYPE_NO_LAYER) {
                tokd_seterr(err, "tensor '%s': an expert tensor's name must give its layer (blk.N. with N < %d)", names[i],
                            model.n_layer);
                goto done;
            }
            if (want != t->type) {
                if (tokd_type_is_quantized(t->type) && !opts->allow_requantize) {
                    tokd_seterr(err,
                                "tensor '%s' is already quantized (%s): tokd quantize needs F32, F16 or BF16 input "
                                "(or --allow-requantize)",
                                names[i], ggml_type_name(t->type));
                    goto done;
                }
                if (!tokd_type_get(t->type)) {
                    tokd_seterr(err, "tensor '%s': cannot read type %s", names[i], ggml_type_name(t->type));
                    goto done;
                }
                const tokd_type_traits *tt = tokd_type_get(want);
                if (t->ne[0] % tt->blck) {
                    tokd_seterr(err, "tensor '%s': rows of %llu are not a multiple of %s's block of %u", names[i],
                                (unsigned long long)t->ne[0], tt->name, tt->blck);
                    goto done;
                }
                if (tensor_weights(im, names[i], t, &qws[i], log, err)) goto done;
                if (!qws[i].values && tokd_qplan_tensor_needs_imatrix(&plan, names[i], want)) {
                    tokd_seterr(err, "tensor '%s': %s needs importance weights, %s", names[i], ggml_type_name(want),
                                im ? "and the matrix has none for it" : "as in llama.cpp: --imatrix FILE (from llama-imatrix)");
                    goto done;
                }
                if (!tokd_quant_writable(want, qws[i].values != NULL)) {
                    tokd_seterr(err, "tensor '%s': tokd cannot write %s%s", names[i], ggml_type_name(want),
                                tokd_quant_writable(want, true) ? " without importance weights" : " yet");
                    goto done;
                }
                uint64_t elems = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
                o->type = want;
                o->nbytes = elems / tt->blck * tt->bytes;
                convert[i] = true;
            }
        }
        bytes_in += t->nbytes;
        bytes_out += o->nbytes;
    }
    s = gguf_stream_create(out, meta, infos, n, err);
    if (!s) goto done;
    pool = tokd_pool_new(n_threads);
    for (uint64_t i = 0; i < n; i++) {
        const gguf_tensor *t = &f->tensors[order[i]];
        if (log)
            fprintf(log, "[%4llu/%4llu] %-32s %-5s -> %-5s [%llu x %llu]\n", (unsigned long long)i + 1,
                    (unsigned long long)n, names[i], ggml_type_name(t->type), ggml_type_name(infos[i].type),
                    (unsigned long long)t->ne[0], (unsigned long long)(t->ne[1] * t->ne[2] * t->ne[3]));
        if (!convert[i]) {
            if (gguf_stream_write(s, t->data, (size_t)t->nbytes, err)) goto done;
            continue;
        }
        const tokd_type_traits *st = tokd_type_get(t->type);
        src_rows sr = {t->data, tokd_row_bytes(st, (int64_t)t->ne[0]), st};
        if (tokd_quant_stream_tensor(pool, s, infos[i].type, (int64_t)(t->ne[1] * t->ne[2] * t->ne[3]), (int64_t)t->ne[0],
                                     &qws[i], fill_from_src, &sr, err)) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            tokd_seterr(err, "tensor '%s': %s", names[i], msg);
            goto done;
        }
    }
    if (gguf_stream_close(s, err)) {
        s = NULL;
        goto done;
    }
    s = NULL;
    if (log)
        fprintf(log, "%s: %.2f MiB -> %.2f MiB (%s)\n", out, (double)bytes_in / (1 << 20), (double)bytes_out / (1 << 20),
                target->name);
    rc = 0;
done:
    gguf_stream_abort(s);
    tokd_pool_free(pool);
    gguf_writer_free(meta);
    for (uint64_t i = 0; i < n; i++) free(names[i]);
    free(names);
    free(order);
    free(infos);
    free(convert);
    free(qws);
    gguf_close(f);
    tokd_imatrix_free(im);
    return rc;
}
