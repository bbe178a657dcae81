/* gguf_stream.c — see gguf_stream.h.
 *
 * The metadata section is taken from gguf_writer's own serialisation (a metadata-only
 * file built in memory), so the two writers cannot disagree about encoding: that file
 * is parsed back with gguf_open_buffer, and the byte length of its key/value section is
 * measured from the parsed values; those bytes are copied verbatim after our header. */
#include "gguf_stream.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outfile.h"

struct gguf_stream {
    tokd_outfile out;
    FILE *fp; /* out.fp */
    uint64_t alignment;
    uint64_t n_tensors, cur;     /* tensor being written */
    uint64_t *nbytes;            /* per tensor */
    uint64_t written;            /* bytes of the current tensor so far */
};

/* Serialised size of a value without its type tag (as gguf.c writes it). */
static uint64_t value_size(const gguf_value *v) {
    switch (v->type) {
    case GGUF_TYPE_STRING: return 8 + v->v.str.len;
    case GGUF_TYPE_ARRAY: {
        const gguf_array *a = &v->v.arr;
        uint64_t n = 4 + 8;
        size_t es = gguf_type_size(a->elem_type);
        if (es) return n + a->n * es;
        for (uint64_t i = 0; i < a->n; i++)
            n += a->elem_type == GGUF_TYPE_STRING ? 8 + a->strs[i].len : value_size(&a->arrs[i]);
        return n;
    }
    default: return gguf_type_size(v->type);
    }
}

static void put(FILE *fp, const void *p, size_t n) { fwrite(p, 1, n, fp); }
static void put_u32(FILE *fp, uint32_t v) { put(fp, &v, 4); }
static void put_u64(FILE *fp, uint64_t v) { put(fp, &v, 8); }

static void pad(FILE *fp, uint64_t pos, uint64_t align) {
    static const uint8_t zeros[256];
    uint64_t n = pos % align ? align - pos % align : 0;
    while (n) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        put(fp, zeros, k);
        n -= k;
    }
}

static void stream_free(gguf_stream *s) {
    free(s->nbytes);
    free(s);
}

gguf_stream *gguf_stream_create(const char *path, gguf_writer *meta, const gguf_stream_tensor *tensors, uint64_t n_tensors,
                                tokd_err *err) {
    uint8_t *buf = NULL;
    uint64_t size = 0;
    if (gguf_writer_to_buffer(meta, &buf, &size, err)) return NULL;
    gguf_file *mf = gguf_open_buffer(buf, size, err);
    if (!mf) {
        free(buf);
        return NULL;
    }
    uint64_t kv_len = 0;
    for (uint64_t i = 0; i < mf->n_kv; i++) kv_len += 8 + mf->kv[i].key.len + 4 + value_size(&mf->kv[i].value);
    uint64_t n_kv = mf->n_kv, alignment = mf->alignment;
    gguf_close(mf);
    if (24 + kv_len > size) {
        free(buf);
        tokd_seterr(err, "internal error: metadata section of %llu bytes exceeds its buffer", (unsigned long long)kv_len);
        return NULL;
    }

    gguf_stream *s = tokd_xcalloc(1, sizeof *s);
    s->alignment = alignment;
    s->n_tensors = n_tensors;
    s->nbytes = tokd_xcalloc(n_tensors ? (size_t)n_tensors : 1, sizeof(uint64_t));
    if (tokd_outfile_open(&s->out, path, err)) {
        free(buf);
        stream_free(s);
        return NULL;
    }
    s->fp = s->out.fp;
    setvbuf(s->fp, NULL, _IOFBF, 1 << 20);
    put(s->fp, "GGUF", 4);
    put_u32(s->fp, 3);
    put_u64(s->fp, n_tensors);
    put_u64(s->fp, n_kv);
    put(s->fp, buf + 24, (size_t)kv_len);
    free(buf);
    uint64_t pos = 24 + kv_len, off = 0;
    for (uint64_t i = 0; i < n_tensors; i++) {
        const gguf_stream_tensor *t = &tensors[i];
        uint64_t nl = strlen(t->name);
        put_u64(s->fp, nl);
        put(s->fp, t->name, (size_t)nl);
        put_u32(s->fp, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) put_u64(s->fp, t->ne[d]);
        put_u32(s->fp, t->type);
        put_u64(s->fp, off);
        pos += 8 + nl + 4 + 8ull * t->n_dims + 4 + 8;
        s->nbytes[i] = t->nbytes;
        off += t->nbytes;
        if (off % alignment) off += alignment - off % alignment;
    }
    pad(s->fp, pos, alignment);
    /* skip leading empty tensors */
    while (s->cur < s->n_tensors && s->nbytes[s->cur] == 0) s->cur++;
    if (ferror(s->fp)) {
        tokd_seterr(err, "cannot write '%s': %s", path, strerror(errno));
        gguf_stream_abort(s);
        return NULL;
    }
    return s;
}

int gguf_stream_write(gguf_stream *s, const void *data, size_t n, tokd_err *err) {
    const uint8_t *p = data;
    while (n > 0) {
        if (s->cur >= s->n_tensors) return tokd_seterr(err, "more tensor data written than announced");
        uint64_t room = s->nbytes[s->cur] - s->written;
        size_t k = n < room ? n : (size_t)room;
        if (fwrite(p, 1, k, s->fp) != k) return tokd_seterr(err, "cannot write '%s': %s", s->out.path, strerror(errno));
        p += k;
        n -= k;
        s->written += k;
        if (s->written == s->nbytes[s->cur]) {
            pad(s->fp, s->written, s->alignment); /* tensor offsets are aligned, so padding by size is enough */
            s->written = 0;
            s->cur++;
            while (s->cur < s->n_tensors && s->nbytes[s->cur] == 0) s->cur++;
        }
    }
    return 0;
}

int gguf_stream_close(gguf_stream *s, tokd_err *err) {
    if (s->cur < s->n_tensors) {
        tokd_seterr(err, "tensor %llu of %llu is incomplete (%llu of %llu bytes written)", (unsigned long long)s->cur,
                    (unsigned long long)s->n_tensors, (unsigned long long)s->written,
                    (unsigned long long)s->nbytes[s->cur]);
        gguf_stream_abort(s);
        return -1;
    }
    s->fp = NULL;
    const int rc = tokd_outfile_commit(&s->out, err);
    stream_free(s);
    return rc;
}

void gguf_stream_abort(gguf_stream *s) {
    if (!s) return;
    tokd_outfile_abort(&s->out);
    stream_free(s);
}
