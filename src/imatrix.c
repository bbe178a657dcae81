/* imatrix.c — see imatrix.h. */
#include "imatrix.h"

#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "outfile.h"

/* ---- building the result ---------------------------------------------------------- */

tokd_imatrix *tokd_imatrix_new(void) {
    tokd_imatrix *im = tokd_xcalloc(1, sizeof *im);
    im->dataset = tokd_xcalloc(1, 1);
    return im;
}

/* What llama-quantize takes from a sum and its count as a file stores them (floats): the
 * mean, or 1 for a matrix the calibration never reached. Divided in double and rounded
 * once, which for two floats is their float quotient bit for bit; sums too large for a
 * float (combined ones) are divided as they are. */
static float mean_of(double sum, double count) {
    const float s = (float)sum, c = (float)count;
    if (!(c > 0)) return 1.0f;
    return isfinite(s) && isfinite(c) ? (float)((double)s / (double)c) : (float)(sum / count);
}

static void entry_values(tokd_imatrix_entry *e) {
    const int64_t per = e->n / e->n_mat;
    for (int64_t i = 0; i < e->n; i++) e->values[i] = mean_of(e->sums[i], e->counts[i / per]);
}

static void entry_clear(tokd_imatrix_entry *e) {
    free(e->name);
    free(e->values);
    free(e->sums);
    free(e->counts);
}

/* The index of the entry named name[0 .. name_len), or -1. */
static ptrdiff_t index_of(const tokd_imatrix *im, const char *name, size_t name_len) {
    for (size_t i = 0; i < im->n_entries; i++)
        if (strlen(im->entries[i].name) == name_len && !memcmp(im->entries[i].name, name, name_len)) return (ptrdiff_t)i;
    return -1;
}

static tokd_imatrix_entry *entry_slot(tokd_imatrix *im, const char *name, size_t name_len) {
    const ptrdiff_t i = index_of(im, name, name_len);
    if (i >= 0) {
        entry_clear(&im->entries[i]);
        return &im->entries[i];
    }
    if ((im->n_entries & (im->n_entries - 1)) == 0) /* grow at powers of two */
        im->entries = tokd_xrealloc(im->entries, (im->n_entries ? 2 * im->n_entries : 1) * sizeof *im->entries);
    return &im->entries[im->n_entries++];
}

/* Adds (or, for a name already present, replaces) an entry; takes `sums` and `counts`
 * (n_mat must divide n). */
static tokd_imatrix_entry *add_entry(tokd_imatrix *im, const char *name, size_t name_len, double *sums, int64_t n,
                                     double *counts, int64_t n_mat) {
    tokd_imatrix_entry *e = entry_slot(im, name, name_len);
    e->name = tokd_xmalloc(name_len + 1);
    memcpy(e->name, name, name_len);
    e->name[name_len] = 0;
    e->n = n;
    e->n_mat = n_mat;
    e->sums = sums;
    e->counts = counts;
    e->values = tokd_xmalloc((size_t)n * sizeof(float));
    entry_values(e);
    return e;
}

void tokd_imatrix_add(tokd_imatrix *im, const char *name, const double *sums, int64_t n, const double *counts,
                      int64_t n_mat) {
    double *s = tokd_xmalloc((size_t)n * sizeof *s), *c = tokd_xmalloc((size_t)n_mat * sizeof *c);
    memcpy(s, sums, (size_t)n * sizeof *s);
    memcpy(c, counts, (size_t)n_mat * sizeof *c);
    add_entry(im, name, strlen(name), s, n, c, n_mat);
}

static void add_dataset(tokd_imatrix *im, const char *name, size_t len) {
    if (!len) return;
    im->datasets = tokd_xrealloc(im->datasets, (im->n_datasets + 1) * sizeof *im->datasets);
    char *d = tokd_xmalloc(len + 1);
    memcpy(d, name, len);
    d[len] = 0;
    im->datasets[im->n_datasets++] = d;
    tokd_buf b = {0};
    tokd_buf_appendf(&b, "%s%s%s", im->dataset, im->dataset[0] ? ", " : "", d);
    free(im->dataset);
    im->dataset = b.data;
}

void tokd_imatrix_add_dataset(tokd_imatrix *im, const char *name) { add_dataset(im, name, strlen(name)); }

/* An entry's sums finite, and so its values (a count that is not, as one that is 0 or
 * less, gives 1s, as llama-quantize takes it). */
static int check_finite(const tokd_imatrix_entry *e, tokd_err *err) {
    for (int64_t i = 0; i < e->n; i++)
        if (!isfinite(e->sums[i]) || !isfinite(e->values[i]))
            return tokd_seterr(err, "entry '%s': value %lld is not finite", e->name, (long long)i);
    return 0;
}

/* ---- the legacy binary format ----------------------------------------------------- */

typedef struct {
    const uint8_t *p;
    size_t left;
} reader;

static int read_i32(reader *r, int32_t *v) {
    if (r->left < 4) return -1;
    memcpy(v, r->p, 4);
    r->p += 4;
    r->left -= 4;
    return 0;
}

static tokd_imatrix *parse_legacy(const uint8_t *data, size_t size, tokd_err *err) {
    reader r = {data, size};
    int32_t n_entries;
    if (read_i32(&r, &n_entries) || n_entries < 1) {
        tokd_seterr(err, "no entries (not an importance matrix?)");
        return NULL;
    }
    tokd_imatrix *im = tokd_imatrix_new();
    im->counts_are_calls = true;
    for (int32_t i = 0; i < n_entries; i++) {
        int32_t len, ncall, nval;
        if (read_i32(&r, &len) || len < 1 || (size_t)len > r.left || len > 4096) {
            tokd_seterr(err, "entry %d: bad name length", (int)i + 1);
            goto fail;
        }
        const char *name = (const char *)r.p;
        if (memchr(name, 0, (size_t)len)) {
            tokd_seterr(err, "entry %d: the name holds a NUL byte", (int)i + 1);
            goto fail;
        }
        r.p += len;
        r.left -= (size_t)len;
        if (read_i32(&r, &ncall) || read_i32(&r, &nval) || nval < 1 || (size_t)nval > r.left / 4) {
            tokd_seterr(err, "entry %d ('%.*s'): bad or truncated value count", (int)i + 1, (int)len, name);
            goto fail;
        }
        /* the sums as stored (the mean times ncall) over ncall calls: a value is
           sum / ncall, the sum itself where ncall <= 0 */
        double *sums = tokd_xmalloc((size_t)nval * sizeof *sums), *count = tokd_xmalloc(sizeof *count);
        for (int32_t j = 0; j < nval; j++) {
            float v;
            memcpy(&v, r.p + 4 * (size_t)j, 4);
            sums[j] = v;
        }
        r.p += (size_t)nval * 4;
        r.left -= (size_t)nval * 4;
        *count = ncall > 0 ? ncall : 1;
        if (check_finite(add_entry(im, name, (size_t)len, sums, nval, count, 1), err)) goto fail;
    }
    if (r.left) { /* the trailer: chunk count and dataset name, exactly */
        int32_t chunks, len;
        if (read_i32(&r, &chunks) || read_i32(&r, &len) || len < 0 || (size_t)len != r.left) {
            tokd_seterr(err, "%zu bytes after the last entry are not a chunk count and dataset name", r.left + 8);
            goto fail;
        }
        im->chunks = chunks > 0 ? chunks : 0;
        add_dataset(im, (const char *)r.p, strnlen((const char *)r.p, (size_t)len)); /* up to a NUL, as C++'s reader */
    }
    return im;
fail:
    tokd_imatrix_free(im);
    return NULL;
}

/* ---- the GGUF format -------------------------------------------------------------- */

static bool strip_suffix(gguf_str s, const char *suffix, size_t *base_len) {
    size_t n = strlen(suffix);
    if (s.len <= n || memcmp(s.ptr + s.len - n, suffix, n)) return false;
    *base_len = (size_t)s.len - n;
    return true;
}

static const gguf_tensor *find_tensor_n(const gguf_file *f, const char *base, size_t base_len, const char *suffix) {
    size_t n = strlen(suffix);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_str s = f->tensors[i].name;
        if (s.len == base_len + n && !memcmp(s.ptr, base, base_len) && !memcmp(s.ptr + base_len, suffix, n))
            return &f->tensors[i];
    }
    return NULL;
}

static tokd_imatrix *parse_gguf(const uint8_t *data, size_t size, tokd_err *err) {
    gguf_file *f = gguf_open_buffer(data, size, err);
    if (!f) return NULL;
    tokd_imatrix *im = tokd_imatrix_new();
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *sums = &f->tensors[i];
        size_t base_len;
        if (!strip_suffix(sums->name, ".in_sum2", &base_len)) continue;
        const char *base = sums->name.ptr;
        if (memchr(base, 0, base_len)) { /* names are C strings from here on */
            tokd_seterr(err, "tensor %llu's name holds a NUL byte", (unsigned long long)i + 1);
            goto fail;
        }
        const gguf_tensor *counts = find_tensor_n(f, base, base_len, ".counts");
        uint64_t ne0 = sums->ne[0], ne1 = sums->ne[1] * sums->ne[2] * sums->ne[3];
        if (!counts) {
            tokd_seterr(err, "'%.*s' has sums but no counts", (int)base_len, base);
            goto fail;
        }
        if (sums->type != GGML_TYPE_F32 || counts->type != GGML_TYPE_F32) {
            tokd_seterr(err, "'%.*s': sums and counts must be F32", (int)base_len, base);
            goto fail;
        }
        uint64_t n_counts = counts->ne[0] * counts->ne[1] * counts->ne[2] * counts->ne[3];
        if (!ne0 || !ne1 || n_counts != ne1 || ne0 * ne1 > (1ull << 31)) {
            tokd_seterr(err, "'%.*s': %llu counts for %llu x %llu sums", (int)base_len, base, (unsigned long long)n_counts,
                        (unsigned long long)ne0, (unsigned long long)ne1);
            goto fail;
        }
        double *sv = tokd_xmalloc((size_t)(ne0 * ne1) * sizeof *sv), *cv = tokd_xmalloc((size_t)ne1 * sizeof *cv);
        for (uint64_t j = 0; j < ne0 * ne1; j++) {
            float v;
            memcpy(&v, (const uint8_t *)sums->data + 4 * j, 4);
            sv[j] = v;
        }
        for (uint64_t j = 0; j < ne1; j++) {
            float v;
            memcpy(&v, (const uint8_t *)counts->data + 4 * j, 4);
            cv[j] = v;
        }
        if (check_finite(add_entry(im, base, base_len, sv, (int64_t)(ne0 * ne1), cv, (int64_t)ne1), err)) goto fail;
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) { /* a count without its sums */
        size_t base_len;
        if (strip_suffix(f->tensors[i].name, ".counts", &base_len) &&
            !find_tensor_n(f, f->tensors[i].name.ptr, base_len, ".in_sum2")) {
            tokd_seterr(err, "'%.*s' has counts but no sums", (int)base_len, f->tensors[i].name.ptr);
            goto fail;
        }
    }
    if (!im->n_entries) {
        tokd_seterr(err, "a GGUF file without importance sums (no *.in_sum2 tensors)");
        goto fail;
    }
    uint32_t chunks = 0;
    if (gguf_get_u32(f, "imatrix.chunk_count", &chunks, err) < 0) goto fail;
    uint32_t chunk_size = 0;
    if (gguf_get_u32(f, "imatrix.chunk_size", &chunk_size, err) < 0) goto fail;
    im->chunk_size = chunk_size > (1u << 30) ? 0 : (int32_t)chunk_size;
    im->chunks = chunks > 0x7fffffff ? 0x7fffffff : (int)chunks;
    gguf_array names;
    if (gguf_get_arr(f, "imatrix.datasets", GGUF_TYPE_STRING, &names, err) == 0)
        for (uint64_t i = 0; i < names.n; i++)
            add_dataset(im, names.strs[i].ptr, strnlen(names.strs[i].ptr, (size_t)names.strs[i].len));
    gguf_close(f);
    return im;
fail:
    gguf_close(f);
    tokd_imatrix_free(im);
    return NULL;
}

/* ---- entry points ----------------------------------------------------------------- */

tokd_imatrix *tokd_imatrix_parse(const uint8_t *data, size_t size, tokd_err *err) {
    if (size >= 4 && !memcmp(data, "GGUF", 4)) return parse_gguf(data, size, err);
    return parse_legacy(data, size, err);
}

tokd_imatrix *tokd_imatrix_load(const char *path, tokd_err *err) {
    size_t len;
    char *data = tokd_read_file(path, &len);
    if (!data) {
        tokd_seterr(err, "cannot read importance matrix '%s'", path);
        return NULL;
    }
    tokd_imatrix *im = tokd_imatrix_parse((const uint8_t *)data, len, err);
    free(data);
    if (!im) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        tokd_seterr(err, "importance matrix '%s': %s", path, msg);
    }
    return im;
}

void tokd_imatrix_free(tokd_imatrix *im) {
    if (!im) return;
    for (size_t i = 0; i < im->n_entries; i++) entry_clear(&im->entries[i]);
    free(im->entries);
    for (size_t i = 0; i < im->n_datasets; i++) free(im->datasets[i]);
    free(im->datasets);
    free(im->dataset);
    free(im);
}

const tokd_imatrix_entry *tokd_imatrix_find(const tokd_imatrix *im, const char *name) {
    const ptrdiff_t i = im ? index_of(im, name, strlen(name)) : -1;
    return i >= 0 ? &im->entries[i] : NULL;
}

/* ---- combining ------------------------------------------------------------------- */

int tokd_imatrix_combine(tokd_imatrix *dst, const tokd_imatrix *src, int32_t chunk_size, tokd_err *err) {
    const double scale = src->counts_are_calls ? (double)(chunk_size > 0 ? chunk_size : 1) : 1.0;
    for (size_t i = 0; i < src->n_entries; i++) { /* every size checked before anything is added */
        const tokd_imatrix_entry *s = &src->entries[i], *d = tokd_imatrix_find(dst, s->name);
        if (d && (d->n != s->n || (d->n_mat != s->n_mat && d->n_mat != 1 && s->n_mat != 1)))
            return tokd_seterr(err, "'%s': %lld values in %lld matrices against %lld in %lld", s->name, (long long)s->n,
                               (long long)s->n_mat, (long long)d->n, (long long)d->n_mat);
    }
    for (size_t i = 0; i < src->n_entries; i++) {
        const tokd_imatrix_entry *s = &src->entries[i];
        const ptrdiff_t at = index_of(dst, s->name, strlen(s->name));
        tokd_imatrix_entry *d = at >= 0 ? &dst->entries[at] : NULL;
        if (!d) {
            double *sums = tokd_xmalloc((size_t)s->n * sizeof *sums), *counts = tokd_xmalloc((size_t)s->n_mat * sizeof *counts);
            for (int64_t j = 0; j < s->n; j++) sums[j] = s->sums[j] * scale;
            for (int64_t j = 0; j < s->n_mat; j++) counts[j] = s->counts[j] * scale;
            add_entry(dst, s->name, strlen(s->name), sums, s->n, counts, s->n_mat);
            continue;
        }
        if (d->n_mat == 1 && s->n_mat > 1) { /* one count (a legacy file's) broadcast to every expert */
            d->counts = tokd_xrealloc(d->counts, (size_t)s->n_mat * sizeof *d->counts);
            for (int64_t j = 1; j < s->n_mat; j++) d->counts[j] = d->counts[0];
            d->n_mat = s->n_mat;
        }
        for (int64_t j = 0; j < s->n; j++) d->sums[j] += s->sums[j] * scale;
        for (int64_t j = 0; j < d->n_mat; j++) d->counts[j] += s->counts[s->n_mat == 1 ? 0 : j] * scale;
        entry_values(d);
    }
    for (size_t i = 0; i < src->n_datasets; i++) add_dataset(dst, src->datasets[i], strlen(src->datasets[i]));
    if (!dst->chunk_size) dst->chunk_size = src->chunk_size;
    const long long chunks = (long long)dst->chunks + src->chunks;
    dst->chunks = chunks > INT_MAX ? INT_MAX : (int)chunks;
    return 0;
}

/* ---- writing ---------------------------------------------------------------------- */

static int cmp_entry_name(const void *a, const void *b) {
    return strcmp((*(const tokd_imatrix_entry *const *)a)->name, (*(const tokd_imatrix_entry *const *)b)->name);
}

/* The GGUF file's bytes into *out (malloc'd, *n of them). */
static int gguf_bytes(const tokd_imatrix *im, const tokd_imatrix_entry **sorted, int32_t chunk_size, uint8_t **out,
                      uint64_t *n, tokd_err *err) {
    gguf_writer *w = gguf_writer_new();
    gguf_writer_set_str(w, "general.type", "imatrix");
    gguf_str *names = tokd_xcalloc(im->n_datasets + 1, sizeof *names);
    for (size_t i = 0; i < im->n_datasets; i++) names[i] = (gguf_str){im->datasets[i], strlen(im->datasets[i])};
    gguf_writer_set_str_arr(w, "imatrix.datasets", names, im->n_datasets);
    free(names);
    gguf_writer_set_u32(w, "imatrix.chunk_count", (uint32_t)(im->chunks > 0 ? im->chunks : 0));
    gguf_writer_set_u32(w, "imatrix.chunk_size", (uint32_t)(chunk_size > 0 ? chunk_size : 0));
    float *buf = NULL;
    char *name = NULL;
    for (size_t i = 0; i < im->n_entries; i++) {
        const tokd_imatrix_entry *e = sorted[i];
        buf = tokd_xrealloc(buf, (size_t)e->n * sizeof *buf);
        name = tokd_xrealloc(name, strlen(e->name) + sizeof ".in_sum2");
        for (int64_t j = 0; j < e->n; j++) buf[j] = (float)e->sums[j];
        const uint64_t ne_sums[2] = {(uint64_t)(e->n / e->n_mat), (uint64_t)e->n_mat}, ne_counts[2] = {1, (uint64_t)e->n_mat};
        sprintf(name, "%s.in_sum2", e->name);
        gguf_writer_add_tensor(w, name, GGML_TYPE_F32, 2, ne_sums, buf, (uint64_t)e->n * sizeof *buf);
        for (int64_t j = 0; j < e->n_mat; j++) buf[j] = (float)e->counts[j];
        sprintf(name, "%s.counts", e->name);
        gguf_writer_add_tensor(w, name, GGML_TYPE_F32, 2, ne_counts, buf, (uint64_t)e->n_mat * sizeof *buf);
    }
    free(buf);
    free(name);
    int rc = gguf_writer_to_buffer(w, out, n, err);
    gguf_writer_free(w);
    return rc;
}

static void put_i32(tokd_buf *b, int32_t v) { tokd_buf_append(b, &v, 4); }

/* The legacy file's bytes. */
static void dat_bytes(const tokd_imatrix *im, const tokd_imatrix_entry **sorted, int32_t chunk_size, tokd_buf *b) {
    const double cs = chunk_size > 0 ? chunk_size : 1;
    put_i32(b, (int32_t)im->n_entries);
    float *tmp = NULL;
    for (size_t i = 0; i < im->n_entries; i++) {
        const tokd_imatrix_entry *e = sorted[i];
        double most = 0;
        for (int64_t j = 0; j < e->n_mat; j++)
            if (e->counts[j] > most) most = e->counts[j];
        const double calls = ceil(most / cs); /* rounded up: no accidental zeros */
        const int32_t ncall = calls > 2e9 ? 2000000000 : (int32_t)calls;
        tmp = tokd_xrealloc(tmp, (size_t)e->n * sizeof *tmp);
        const int64_t per = e->n / e->n_mat;
        for (int64_t j = 0; j < e->n; j++) {
            float sum = (float)e->sums[j], count = (float)e->counts[j / per];
            if (count == 0) sum = count = 1; /* a matrix never reached: 1 */
            tmp[j] = sum / count * (float)ncall;
        }
        put_i32(b, (int32_t)strlen(e->name));
        tokd_buf_append(b, e->name, strlen(e->name));
        put_i32(b, ncall);
        put_i32(b, (int32_t)e->n);
        tokd_buf_append(b, tmp, (size_t)e->n * sizeof *tmp);
    }
    free(tmp);
    const char *dataset = im->n_datasets ? im->datasets[im->n_datasets - 1] : "";
    put_i32(b, im->chunks);
    put_i32(b, (int32_t)strlen(dataset));
    tokd_buf_append(b, dataset, strlen(dataset));
}

int tokd_imatrix_write(const tokd_imatrix *im, const char *path, tokd_imatrix_format fmt, int32_t chunk_size,
                       tokd_err *err) {
    if (!im->n_entries) return tokd_seterr(err, "nothing was collected");
    if (im->counts_are_calls) return tokd_seterr(err, "a legacy file's matrix: combine it into a new one to write it");
    for (size_t i = 0; i < im->n_entries; i++) { /* floats in the file, and the legacy file's int32 fields */
        const tokd_imatrix_entry *e = &im->entries[i];
        if (e->n > 0x7fffffff || strlen(e->name) > 0x7fffffff) return tokd_seterr(err, "'%s': too large to write", e->name);
        for (int64_t j = 0; j < e->n; j++)
            if (!isfinite((float)e->sums[j]) || !isfinite(e->values[j]))
                return tokd_seterr(err, "'%s': value %lld is not finite as a float", e->name, (long long)j);
        for (int64_t j = 0; j < e->n_mat; j++)
            if (!isfinite((float)e->counts[j])) return tokd_seterr(err, "'%s': count %lld is not finite", e->name, (long long)j);
    }
    if (im->n_entries > 0x7fffffff) return tokd_seterr(err, "%zu entries: too many", im->n_entries);
    const tokd_imatrix_entry **sorted = tokd_xmalloc(im->n_entries * sizeof *sorted);
    for (size_t i = 0; i < im->n_entries; i++) sorted[i] = &im->entries[i];
    qsort(sorted, im->n_entries, sizeof *sorted, cmp_entry_name);
    int rc;
    if (fmt == TOKD_IMATRIX_DAT) {
        tokd_buf b = {0};
        dat_bytes(im, sorted, chunk_size, &b);
        rc = tokd_write_file(path, b.data, b.len, err);
        tokd_buf_free(&b);
    } else {
        uint8_t *bytes = NULL;
        uint64_t n = 0;
        rc = gguf_bytes(im, sorted, chunk_size, &bytes, &n, err) || tokd_write_file(path, bytes, (size_t)n, err) ? -1 : 0;
        free(bytes);
    }
    free(sorted);
    return rc;
}
