/* imatrix.c — see imatrix.h. */
#include "imatrix.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"

/* ---- building the result ---------------------------------------------------------- */

static tokd_imatrix *imatrix_new(void) {
    tokd_imatrix *im = tokd_xcalloc(1, sizeof *im);
    im->dataset = tokd_xcalloc(1, 1);
    return im;
}

/* Adds (or, for a name already present, replaces) an entry; takes `values`. */
static void add_entry(tokd_imatrix *im, const char *name, size_t name_len, float *values, int64_t n) {
    for (size_t i = 0; i < im->n_entries; i++) {
        tokd_imatrix_entry *e = &im->entries[i];
        if (strlen(e->name) == name_len && !memcmp(e->name, name, name_len)) {
            free(e->values);
            e->values = values;
            e->n = n;
            return;
        }
    }
    if ((im->n_entries & (im->n_entries - 1)) == 0) /* grow at powers of two */
        im->entries = tokd_xrealloc(im->entries, (im->n_entries ? 2 * im->n_entries : 1) * sizeof *im->entries);
    tokd_imatrix_entry *e = &im->entries[im->n_entries++];
    e->name = tokd_xmalloc(name_len + 1);
    memcpy(e->name, name, name_len);
    e->name[name_len] = 0;
    e->values = values;
    e->n = n;
}

static int check_finite(const char *name, size_t name_len, const float *v, int64_t n, tokd_err *err) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return tokd_seterr(err, "entry '%.*s': value %lld is not finite", (int)name_len, name, (long long)i);
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
    tokd_imatrix *im = imatrix_new();
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
        float *v = tokd_xmalloc((size_t)nval * sizeof(float));
        memcpy(v, r.p, (size_t)nval * 4);
        r.p += (size_t)nval * 4;
        r.left -= (size_t)nval * 4;
        if (ncall > 0)
            for (int32_t j = 0; j < nval; j++) v[j] /= (float)ncall;
        if (check_finite(name, (size_t)len, v, nval, err)) {
            free(v);
            goto fail;
        }
        add_entry(im, name, (size_t)len, v, nval);
    }
    if (r.left) { /* the trailer: chunk count and dataset name, exactly */
        int32_t chunks, len;
        if (read_i32(&r, &chunks) || read_i32(&r, &len) || len < 0 || (size_t)len != r.left) {
            tokd_seterr(err, "%zu bytes after the last entry are not a chunk count and dataset name", r.left + 8);
            goto fail;
        }
        im->chunks = chunks > 0 ? chunks : 0;
        free(im->dataset);
        im->dataset = tokd_xmalloc((size_t)len + 1);
        memcpy(im->dataset, r.p, (size_t)len);
        im->dataset[len] = 0;
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
    tokd_imatrix *im = imatrix_new();
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *sums = &f->tensors[i];
        size_t base_len;
        if (!strip_suffix(sums->name, ".in_sum2", &base_len)) continue;
        const char *base = sums->name.ptr;
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
        float *v = tokd_xmalloc((size_t)(ne0 * ne1) * sizeof(float));
        const uint8_t *sd = sums->data, *cd = counts->data;
        for (uint64_t j = 0; j < ne1; j++) {
            float count;
            memcpy(&count, cd + 4 * j, 4);
            for (uint64_t k = 0; k < ne0; k++) {
                float s;
                memcpy(&s, sd + 4 * (j * ne0 + k), 4);
                v[j * ne0 + k] = count > 0 ? s / count : 1.0f;
            }
        }
        if (check_finite(base, base_len, v, (int64_t)(ne0 * ne1), err)) {
            free(v);
            goto fail;
        }
        add_entry(im, base, base_len, v, (int64_t)(ne0 * ne1));
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
    im->chunks = chunks > 0x7fffffff ? 0x7fffffff : (int)chunks;
    gguf_array names;
    if (gguf_get_arr(f, "imatrix.datasets", GGUF_TYPE_STRING, &names, err) == 0) {
        tokd_buf b = {0};
        for (uint64_t i = 0; i < names.n; i++)
            tokd_buf_appendf(&b, "%s%.*s", i ? ", " : "", (int)names.strs[i].len, names.strs[i].ptr);
        if (b.data) {
            free(im->dataset);
            im->dataset = b.data;
        }
    }
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
    for (size_t i = 0; i < im->n_entries; i++) {
        free(im->entries[i].name);
        free(im->entries[i].values);
    }
    free(im->entries);
    free(im->dataset);
    free(im);
}

const tokd_imatrix_entry *tokd_imatrix_find(const tokd_imatrix *im, const char *name) {
    if (!im) return NULL;
    for (size_t i = 0; i < im->n_entries; i++)
        if (!strcmp(im->entries[i].name, name)) return &im->entries[i];
    return NULL;
}
