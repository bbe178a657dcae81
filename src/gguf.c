/* gguf.c — GGUF reader and writer (see gguf.h for the contract).
 *
 * The reader is a bounds-checked cursor over the mapped bytes: every read goes through
 * cur_* helpers that fail (with the offset) instead of reading past the end, and every
 * count is checked against the bytes that remain before anything is allocated for it,
 * so a hostile header cannot make us allocate more than a small multiple of the file
 * size. Descriptors for string arrays and nested arrays live in a per-file arena. */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_ARRAY_DEPTH 8

/* ---- type facts ------------------------------------------------------------------ */

static const struct {
    uint32_t id;
    const char *name;
    uint32_t blck, bytes;
} ggml_types[] = {
    {GGML_TYPE_F32, "F32", 1, 4},      {GGML_TYPE_F16, "F16", 1, 2},
    {GGML_TYPE_Q4_0, "Q4_0", 32, 18},  {GGML_TYPE_Q4_1, "Q4_1", 32, 20},
    {GGML_TYPE_Q5_0, "Q5_0", 32, 22},  {GGML_TYPE_Q5_1, "Q5_1", 32, 24},
    {GGML_TYPE_Q8_0, "Q8_0", 32, 34},  {GGML_TYPE_Q8_1, "Q8_1", 32, 36},
    {GGML_TYPE_Q2_K, "Q2_K", 256, 84}, {GGML_TYPE_Q3_K, "Q3_K", 256, 110},
    {GGML_TYPE_Q4_K, "Q4_K", 256, 144}, {GGML_TYPE_Q5_K, "Q5_K", 256, 176},
    {GGML_TYPE_Q6_K, "Q6_K", 256, 210}, {GGML_TYPE_Q8_K, "Q8_K", 256, 292},
    {GGML_TYPE_IQ4_NL, "IQ4_NL", 32, 18}, {GGML_TYPE_IQ4_XS, "IQ4_XS", 256, 136},
    {GGML_TYPE_IQ2_XXS, "IQ2_XXS", 256, 66}, {GGML_TYPE_IQ2_XS, "IQ2_XS", 256, 74},
    {GGML_TYPE_IQ2_S, "IQ2_S", 256, 82}, {GGML_TYPE_IQ3_XXS, "IQ3_XXS", 256, 98},
    {GGML_TYPE_IQ3_S, "IQ3_S", 256, 110}, {GGML_TYPE_IQ1_S, "IQ1_S", 256, 50},
    {GGML_TYPE_IQ1_M, "IQ1_M", 256, 56},
    {GGML_TYPE_I8, "I8", 1, 1},        {GGML_TYPE_I16, "I16", 1, 2},
    {GGML_TYPE_I32, "I32", 1, 4},      {GGML_TYPE_I64, "I64", 1, 8},
    {GGML_TYPE_F64, "F64", 1, 8},      {GGML_TYPE_BF16, "BF16", 1, 2},
};

bool ggml_type_geometry(uint32_t type, uint32_t *blck, uint32_t *bytes) {
    for (size_t i = 0; i < sizeof ggml_types / sizeof ggml_types[0]; i++)
        if (ggml_types[i].id == type) {
            *blck = ggml_types[i].blck;
            *bytes = ggml_types[i].bytes;
            return true;
        }
    return false;
}

const char *ggml_type_name(uint32_t type) {
    for (size_t i = 0; i < sizeof ggml_types / sizeof ggml_types[0]; i++)
        if (ggml_types[i].id == type) return ggml_types[i].name;
    return "unknown";
}

static const char *const gguf_type_names[GGUF_TYPE_COUNT] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
    "bool", "string", "array", "uint64", "int64", "float64"};

const char *gguf_type_name(gguf_type t) { return (unsigned)t < GGUF_TYPE_COUNT ? gguf_type_names[t] : "invalid"; }

size_t gguf_type_size(gguf_type t) {
    switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

/* ---- arena ----------------------------------------------------------------------- */

typedef struct arena_block {
    struct arena_block *next;
    max_align_t data[];
} arena_block;

static void *arena_alloc(gguf_file *f, size_t n) {
    arena_block *b = tokd_xmalloc(sizeof(arena_block) + n);
    b->next = f->arena;
    f->arena = b;
    return b->data;
}

static void arena_free(gguf_file *f) {
    arena_block *b = f->arena;
    while (b) {
        arena_block *next = b->next;
        free(b);
        b = next;
    }
    f->arena = NULL;
}

/* ---- bounds-checked cursor ------------------------------------------------------- */

typedef struct {
    const uint8_t *p;
    uint64_t size, pos;
    tokd_err *err;
} cursor;

static uint64_t remaining(const cursor *c) { return c->size - c->pos; }

static int cur_bytes(cursor *c, void *out, uint64_t n, const char *what) {
    if (n > remaining(c)) {
        tokd_seterr(c->err, "truncated file: %s at offset %llu needs %llu bytes, %llu left", what,
                    (unsigned long long)c->pos, (unsigned long long)n, (unsigned long long)remaining(c));
        return -1; /* literal, so the compiler sees outputs are set on success */
    }
    if (out) memcpy(out, c->p + c->pos, n);
    c->pos += n;
    return 0;
}
static int cur_u32(cursor *c, uint32_t *v, const char *what) { return cur_bytes(c, v, 4, what); }
static int cur_u64(cursor *c, uint64_t *v, const char *what) { return cur_bytes(c, v, 8, what); }

static int cur_str(cursor *c, gguf_str *s, const char *what) {
    uint64_t len = 0;
    if (cur_u64(c, &len, what)) return -1;
    if (len > remaining(c))
        return tokd_seterr(c->err, "bad %s at offset %llu: string length %llu exceeds the %llu bytes left", what,
                           (unsigned long long)(c->pos - 8), (unsigned long long)len,
                           (unsigned long long)remaining(c));
    s->ptr = (const char *)c->p + c->pos;
    s->len = len;
    c->pos += len;
    return 0;
}

static int read_value(gguf_file *f, cursor *c, gguf_type type, gguf_value *out, int depth, const char *key);

static int read_array(gguf_file *f, cursor *c, gguf_array *a, int depth, const char *key) {
    uint32_t et = 0;
    uint64_t n = 0;
    if (cur_u32(c, &et, "array element type") || cur_u64(c, &n, "array length")) return -1;
    if (et >= GGUF_TYPE_COUNT)
        return tokd_seterr(c->err, "metadata '%s': invalid array element type %u", key, et);
    if (depth >= GGUF_MAX_ARRAY_DEPTH)
        return tokd_seterr(c->err, "metadata '%s': arrays nested deeper than %d", key, GGUF_MAX_ARRAY_DEPTH);
    a->elem_type = (gguf_type)et;
    a->n = n;
    a->data = NULL;
    a->strs = NULL;
    a->arrs = NULL;
    size_t es = gguf_type_size(a->elem_type);
    if (es) {
        uint64_t total;
        if (tokd_mul_u64(n, es, &total) || total > remaining(c))
            return tokd_seterr(c->err, "metadata '%s': array of %llu %s elements exceeds the %llu bytes left", key,
                               (unsigned long long)n, gguf_type_name(a->elem_type),
                               (unsigned long long)remaining(c));
        a->data = c->p + c->pos;
        c->pos += total;
        if (a->elem_type == GGUF_TYPE_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (a->data[i] > 1) return tokd_seterr(c->err, "metadata '%s': bool array element %llu is %u, not 0 or 1", key, (unsigned long long)i, a->data[i]);
        return 0;
    }
    /* strings need >= 8 bytes each, arrays >= 12: bound n before allocating */
    uint64_t min_elem = a->elem_type == GGUF_TYPE_STRING ? 8 : 12;
    if (n > remaining(c) / min_elem)
        return tokd_seterr(c->err, "metadata '%s': array of %llu %s elements cannot fit in the %llu bytes left", key,
                           (unsigned long long)n, gguf_type_name(a->elem_type), (unsigned long long)remaining(c));
    if (a->elem_type == GGUF_TYPE_STRING) {
        a->strs = arena_alloc(f, (size_t)n * sizeof(gguf_str));
        for (uint64_t i = 0; i < n; i++)
            if (cur_str(c, &a->strs[i], "array string")) return -1;
    } else {
        a->arrs = arena_alloc(f, (size_t)n * sizeof(gguf_value));
        for (uint64_t i = 0; i < n; i++)
            if (read_value(f, c, GGUF_TYPE_ARRAY, &a->arrs[i], depth + 1, key)) return -1;
    }
    return 0;
}

static int read_value(gguf_file *f, cursor *c, gguf_type type, gguf_value *out, int depth, const char *key) {
    out->type = type;
    uint8_t b[8];
    switch (type) {
    case GGUF_TYPE_UINT8: if (cur_bytes(c, b, 1, key)) return -1; out->v.u64 = b[0]; return 0;
    case GGUF_TYPE_INT8: if (cur_bytes(c, b, 1, key)) return -1; out->v.i64 = (int8_t)b[0]; return 0;
    case GGUF_TYPE_UINT16: { uint16_t v; if (cur_bytes(c, &v, 2, key)) return -1; out->v.u64 = v; return 0; }
    case GGUF_TYPE_INT16: { int16_t v; if (cur_bytes(c, &v, 2, key)) return -1; out->v.i64 = v; return 0; }
    case GGUF_TYPE_UINT32: { uint32_t v; if (cur_bytes(c, &v, 4, key)) return -1; out->v.u64 = v; return 0; }
    case GGUF_TYPE_INT32: { int32_t v; if (cur_bytes(c, &v, 4, key)) return -1; out->v.i64 = v; return 0; }
    case GGUF_TYPE_UINT64: { uint64_t v; if (cur_bytes(c, &v, 8, key)) return -1; out->v.u64 = v; return 0; }
    case GGUF_TYPE_INT64: { int64_t v; if (cur_bytes(c, &v, 8, key)) return -1; out->v.i64 = v; return 0; }
    case GGUF_TYPE_FLOAT32: { float v; if (cur_bytes(c, &v, 4, key)) return -1; out->v.f64 = v; return 0; }
    case GGUF_TYPE_FLOAT64: { double v; if (cur_bytes(c, &v, 8, key)) return -1; out->v.f64 = v; return 0; }
    case GGUF_TYPE_BOOL:
        if (cur_bytes(c, b, 1, key)) return -1;
        if (b[0] > 1) return tokd_seterr(c->err, "metadata '%s': bool value %u is not 0 or 1", key, b[0]);
        out->v.b = b[0];
        return 0;
    case GGUF_TYPE_STRING: return cur_str(c, &out->v.str, key);
    case GGUF_TYPE_ARRAY: return read_array(f, c, &out->v.arr, depth, key);
    default: return tokd_seterr(c->err, "metadata '%s': invalid value type %u", key, (unsigned)type);
    }
}

/* Printable copy of a (possibly hostile) key for error messages. */
static void key_to_cstr(gguf_str s, char *buf, size_t cap) {
    size_t n = s.len < cap - 1 ? (size_t)s.len : cap - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];
        buf[i] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
    }
    buf[n] = 0;
}

static bool str_eq(gguf_str a, gguf_str b) { return a.len == b.len && memcmp(a.ptr, b.ptr, a.len) == 0; }

bool gguf_str_eq(gguf_str s, const char *cstr) {
    size_t n = strlen(cstr);
    return s.len == n && memcmp(s.ptr, cstr, n) == 0;
}

static int cmp_tensor_offset(const void *a, const void *b) {
    const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int parse(gguf_file *f, tokd_err *err) {
    cursor c = {f->map, f->size, 0, err};
    char magic[4];
    if (f->size < 4 || memcmp(f->map, "GGUF", 4) != 0) {
        if (f->size < 4) return tokd_seterr(err, "not a GGUF file: only %llu bytes", (unsigned long long)f->size);
        return tokd_seterr(err, "not a GGUF file: bad magic");
    }
    cur_bytes(&c, magic, 4, "magic");
    if (cur_u32(&c, &f->version, "version")) return -1;
    if (f->version == 1) return tokd_seterr(err, "unsupported GGUF version 1 (only 2 and 3 are supported)");
    if (f->version != 2 && f->version != 3)
        return tokd_seterr(err, "unsupported GGUF version %u (only 2 and 3 are supported)", f->version);
    if (cur_u64(&c, &f->n_tensors, "tensor count") || cur_u64(&c, &f->n_kv, "metadata count")) return -1;
    /* each kv needs >= 8 (key len) + 4 (type) + 1 bytes; each tensor info >= 8+4+8+4+8 */
    if (f->n_kv > remaining(&c) / 13)
        return tokd_seterr(err, "bad header: %llu metadata entries cannot fit in a %llu-byte file",
                           (unsigned long long)f->n_kv, (unsigned long long)f->size);
    if (f->n_tensors > remaining(&c) / 32)
        return tokd_seterr(err, "bad header: %llu tensors cannot fit in a %llu-byte file",
                           (unsigned long long)f->n_tensors, (unsigned long long)f->size);
    f->kv = tokd_xcalloc((size_t)f->n_kv, sizeof(gguf_kv));
    for (uint64_t i = 0; i < f->n_kv; i++) {
        gguf_kv *kv = &f->kv[i];
        if (cur_str(&c, &kv->key, "metadata key")) return -1;
        char kname[96];
        key_to_cstr(kv->key, kname, sizeof kname);
        for (uint64_t j = 0; j < i; j++)
            if (str_eq(f->kv[j].key, kv->key)) return tokd_seterr(err, "duplicate metadata key '%s'", kname);
        uint32_t type;
        if (cur_u32(&c, &type, "metadata value type")) return -1;
        if (type >= GGUF_TYPE_COUNT) return tokd_seterr(err, "metadata '%s': invalid value type %u", kname, type);
        if (read_value(f, &c, (gguf_type)type, &kv->value, 0, kname)) return -1;
    }
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_value *al = gguf_get(f, "general.alignment");
    if (al) {
        if (al->type != GGUF_TYPE_UINT32) return tokd_seterr(err, "general.alignment must be uint32, is %s", gguf_type_name(al->type));
        if (al->v.u64 == 0 || (al->v.u64 & (al->v.u64 - 1)))
            return tokd_seterr(err, "general.alignment %llu is not a power of two", (unsigned long long)al->v.u64);
        f->alignment = al->v.u64;
    }
    f->tensors = tokd_xcalloc((size_t)f->n_tensors, sizeof(gguf_tensor));
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        if (cur_str(&c, &t->name, "tensor name")) return -1;
        char tname[96];
        key_to_cstr(t->name, tname, sizeof tname);
        if (t->name.len == 0) return tokd_seterr(err, "tensor %llu has an empty name", (unsigned long long)i);
        if (cur_u32(&c, &t->n_dims, "tensor dims")) return -1;
        if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS)
            return tokd_seterr(err, "tensor '%s': %u dimensions (1..%d allowed)", tname, t->n_dims, GGUF_MAX_DIMS);
        uint64_t nelem = 1;
        for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            if (cur_u64(&c, &t->ne[d], "tensor shape")) return -1;
            if (t->ne[d] == 0 || t->ne[d] > ((uint64_t)1 << 40))
                return tokd_seterr(err, "tensor '%s': absurd dimension %u = %llu", tname, d, (unsigned long long)t->ne[d]);
            if (tokd_mul_u64(nelem, t->ne[d], &nelem) || nelem > ((uint64_t)1 << 50))
                return tokd_seterr(err, "tensor '%s': element count overflows", tname);
        }
        if (cur_u32(&c, &t->type, "tensor type") || cur_u64(&c, &t->offset, "tensor offset")) return -1;
        uint32_t blck, bytes;
        if (!ggml_type_geometry(t->type, &blck, &bytes))
            return tokd_seterr(err, "tensor '%s': unsupported tensor type %u", tname, t->type);
        if (t->ne[0] % blck)
            return tokd_seterr(err, "tensor '%s': row length %llu is not a multiple of %s's block size %u", tname,
                               (unsigned long long)t->ne[0], ggml_type_name(t->type), blck);
        t->nbytes = nelem / blck * bytes; /* nelem <= 2^50, bytes < 2^9: no overflow */
        if (t->offset % f->alignment)
            return tokd_seterr(err, "tensor '%s': offset %llu is not aligned to %llu", tname,
                               (unsigned long long)t->offset, (unsigned long long)f->alignment);
        for (uint64_t j = 0; j < i; j++)
            if (str_eq(f->tensors[j].name, t->name)) return tokd_seterr(err, "duplicate tensor name '%s'", tname);
    }
    uint64_t data_off = c.pos;
    if (data_off % f->alignment) data_off += f->alignment - data_off % f->alignment;
    if (f->n_tensors > 0 && data_off > f->size)
        return tokd_seterr(err, "truncated file: tensor data would start at %llu, file has %llu bytes",
                           (unsigned long long)data_off, (unsigned long long)f->size);
    f->data_offset = data_off;
    uint64_t avail = f->size > data_off ? f->size - data_off : 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        uint64_t end;
        if (tokd_add_u64(t->offset, t->nbytes, &end) || end > avail) {
            char tname[96];
            key_to_cstr(t->name, tname, sizeof tname);
            return tokd_seterr(err, "tensor '%s': data [%llu, +%llu) lies past the end of the file (%llu data bytes)",
                               tname, (unsigned long long)t->offset, (unsigned long long)t->nbytes,
                               (unsigned long long)avail);
        }
        t->data = f->map + data_off + t->offset;
    }
    if (f->n_tensors > 1) { /* tensors must not overlap */
        const gguf_tensor **order = tokd_xmalloc((size_t)f->n_tensors * sizeof *order);
        for (uint64_t i = 0; i < f->n_tensors; i++) order[i] = &f->tensors[i];
        qsort(order, (size_t)f->n_tensors, sizeof *order, cmp_tensor_offset);
        int bad = 0;
        for (uint64_t i = 1; i < f->n_tensors && !bad; i++)
            if (order[i - 1]->offset + order[i - 1]->nbytes > order[i]->offset) {
                char a[96], b[96];
                key_to_cstr(order[i - 1]->name, a, sizeof a);
                key_to_cstr(order[i]->name, b, sizeof b);
                bad = tokd_seterr(err, "tensors '%s' and '%s' overlap", a, b);
            }
        free(order);
        if (bad) return -1;
    }
    return 0;
}

gguf_file *gguf_open_buffer(const void *buf, uint64_t size, tokd_err *err) {
    gguf_file *f = tokd_xcalloc(1, sizeof *f);
    f->map = buf;
    f->size = size;
    if (parse(f, err)) {
        free(f->kv);
        free(f->tensors);
        arena_free(f);
        free(f);
        return NULL;
    }
    return f;
}

gguf_file *gguf_open(const char *path, tokd_err *err) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        tokd_seterr(err, "cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        tokd_seterr(err, "'%s' is not a regular file", path);
        close(fd);
        return NULL;
    }
    size_t len = (size_t)st.st_size;
    void *map = NULL;
    if (len > 0) {
        map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            tokd_seterr(err, "cannot map '%s': %s", path, strerror(errno));
            close(fd);
            return NULL;
        }
    }
    close(fd);
    gguf_file *f = gguf_open_buffer(map ? map : "", len, err);
    if (!f) {
        if (err) {
            char inner[sizeof err->msg];
            memcpy(inner, err->msg, sizeof inner);
            tokd_seterr(err, "%s: %s", path, inner);
        }
        if (map) munmap(map, len);
        return NULL;
    }
    f->mapping = map;
    f->mapping_len = len;
    return f;
}

void gguf_close(gguf_file *f) {
    if (!f) return;
    free(f->kv);
    free(f->tensors);
    arena_free(f);
    if (f->mapping) munmap(f->mapping, (size_t)f->mapping_len);
    free(f);
}

/* ---- lookup ---------------------------------------------------------------------- */

const gguf_value *gguf_get(const gguf_file *f, const char *key) {
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (gguf_str_eq(f->kv[i].key, key)) return &f->kv[i].value;
    return NULL;
}

static bool is_uint(gguf_type t) {
    return t == GGUF_TYPE_UINT8 || t == GGUF_TYPE_UINT16 || t == GGUF_TYPE_UINT32 || t == GGUF_TYPE_UINT64;
}
static bool is_int(gguf_type t) {
    return t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 || t == GGUF_TYPE_INT32 || t == GGUF_TYPE_INT64;
}

int gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out, tokd_err *err) {
    const gguf_value *v = gguf_get(f, key);
    if (!v) return 1;
    if (is_uint(v->type)) { *out = v->v.u64; return 0; }
    if (is_int(v->type)) {
        if (v->v.i64 < 0) return tokd_seterr(err, "metadata '%s' is negative (%lld)", key, (long long)v->v.i64);
        *out = (uint64_t)v->v.i64;
        return 0;
    }
    return tokd_seterr(err, "metadata '%s' should be an integer, is %s", key, gguf_type_name(v->type));
}

int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out, tokd_err *err) {
    uint64_t v;
    int r = gguf_get_u64(f, key, &v, err);
    if (r) return r;
    if (v > UINT32_MAX) return tokd_seterr(err, "metadata '%s' is out of range (%llu)", key, (unsigned long long)v);
    *out = (uint32_t)v;
    return 0;
}

int gguf_get_i64(const gguf_file *f, const char *key, int64_t *out, tokd_err *err) {
    const gguf_value *v = gguf_get(f, key);
    if (!v) return 1;
    if (is_int(v->type)) { *out = v->v.i64; return 0; }
    if (is_uint(v->type)) {
        if (v->v.u64 > INT64_MAX) return tokd_seterr(err, "metadata '%s' is out of range", key);
        *out = (int64_t)v->v.u64;
        return 0;
    }
    return tokd_seterr(err, "metadata '%s' should be an integer, is %s", key, gguf_type_name(v->type));
}

int gguf_get_f32(const gguf_file *f, const char *key, float *out, tokd_err *err) {
    const gguf_value *v = gguf_get(f, key);
    if (!v) return 1;
    if (v->type == GGUF_TYPE_FLOAT32 || v->type == GGUF_TYPE_FLOAT64) { *out = (float)v->v.f64; return 0; }
    if (is_uint(v->type)) { *out = (float)v->v.u64; return 0; }
    if (is_int(v->type)) { *out = (float)v->v.i64; return 0; }
    return tokd_seterr(err, "metadata '%s' should be a number, is %s", key, gguf_type_name(v->type));
}

int gguf_get_bool(const gguf_file *f, const char *key, bool *out, tokd_err *err) {
    const gguf_value *v = gguf_get(f, key);
    if (!v) return 1;
    if (v->type != GGUF_TYPE_BOOL) return tokd_seterr(err, "metadata '%s' should be a bool, is %s", key, gguf_type_name(v->type));
    *out = v->v.b;
    return 0;
}

int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out, tokd_err *err) {
    const gguf_value *v = gguf_get(f, key);
    if (!v) return 1;
    if (v->type != GGUF_TYPE_STRING) return tokd_seterr(err, "metadata '%s' should be a string, is %s", key, gguf_type_name(v->type));
    *out = v->v.str;
    return 0;
}

int gguf_get_arr(const gguf_file *f, const char *key, gguf_type want, gguf_array *out, tokd_err *err) {
    const gguf_value *v = gguf_get(f, key);
    if (!v) return 1;
    if (v->type != GGUF_TYPE_ARRAY) return tokd_seterr(err, "metadata '%s' should be an array, is %s", key, gguf_type_name(v->type));
    if (want != GGUF_TYPE_COUNT && v->v.arr.elem_type != want) {
        bool ok = (is_int(want) || is_uint(want)) && (is_int(v->v.arr.elem_type) || is_uint(v->v.arr.elem_type));
        ok = ok || ((want == GGUF_TYPE_FLOAT32 || want == GGUF_TYPE_FLOAT64) &&
                    (v->v.arr.elem_type == GGUF_TYPE_FLOAT32 || v->v.arr.elem_type == GGUF_TYPE_FLOAT64));
        if (!ok)
            return tokd_seterr(err, "metadata '%s' should be an array of %s, is an array of %s", key,
                               gguf_type_name(want), gguf_type_name(v->v.arr.elem_type));
    }
    *out = v->v.arr;
    return 0;
}

/* Float to integer without undefined behaviour: NaN is 0, out of range saturates. */
static int64_t f64_to_i64_sat(double v) {
    if (v != v) return 0;
    if (v >= 9223372036854775807.0) return INT64_MAX;
    if (v <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
}

int64_t gguf_arr_i64(const gguf_array *a, uint64_t i) {
    const uint8_t *p = a->data + i * gguf_type_size(a->elem_type);
    switch (a->elem_type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_BOOL: return p[0];
    case GGUF_TYPE_INT8: return (int8_t)p[0];
    case GGUF_TYPE_UINT16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case GGUF_TYPE_INT16: { int16_t v; memcpy(&v, p, 2); return v; }
    case GGUF_TYPE_UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case GGUF_TYPE_INT32: { int32_t v; memcpy(&v, p, 4); return v; }
    case GGUF_TYPE_UINT64: { uint64_t v; memcpy(&v, p, 8); return v > INT64_MAX ? INT64_MAX : (int64_t)v; }
    case GGUF_TYPE_INT64: { int64_t v; memcpy(&v, p, 8); return v; }
    case GGUF_TYPE_FLOAT32: { float v; memcpy(&v, p, 4); return f64_to_i64_sat(v); }
    case GGUF_TYPE_FLOAT64: { double v; memcpy(&v, p, 8); return f64_to_i64_sat(v); }
    default: return 0;
    }
}

double gguf_arr_f64(const gguf_array *a, uint64_t i) {
    const uint8_t *p = a->data + i * gguf_type_size(a->elem_type);
    if (a->elem_type == GGUF_TYPE_FLOAT32) { float v; memcpy(&v, p, 4); return v; }
    if (a->elem_type == GGUF_TYPE_FLOAT64) { double v; memcpy(&v, p, 8); return v; }
    return (double)gguf_arr_i64(a, i);
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (gguf_str_eq(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}

/* ---- writer ---------------------------------------------------------------------- *
 * Metadata entries are serialised as they are added (key, type, value bytes); tensors
 * keep a copy of their data. Output is GGUF v3 with the default alignment of 32. */

typedef struct {
    char *name;
    uint32_t type, n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    uint8_t *data;
    uint64_t nbytes;
} writer_tensor;

struct gguf_writer {
    tokd_buf kv;      /* serialised metadata entries */
    uint64_t n_kv;
    writer_tensor *tensors;
    uint64_t n_tensors, cap_tensors;
};

gguf_writer *gguf_writer_new(void) { return tokd_xcalloc(1, sizeof(gguf_writer)); }

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    tokd_buf_free(&w->kv);
    for (uint64_t i = 0; i < w->n_tensors; i++) {
        free(w->tensors[i].name);
        free(w->tensors[i].data);
    }
    free(w->tensors);
    free(w);
}

static void put_u32(tokd_buf *b, uint32_t v) { tokd_buf_append(b, &v, 4); }
static void put_u64(tokd_buf *b, uint64_t v) { tokd_buf_append(b, &v, 8); }
static void put_str(tokd_buf *b, const char *s, uint64_t len) {
    put_u64(b, len);
    tokd_buf_append(b, s, (size_t)len);
}
static void put_key(gguf_writer *w, const char *key, gguf_type type) {
    put_str(&w->kv, key, strlen(key));
    put_u32(&w->kv, (uint32_t)type);
    w->n_kv++;
}

void gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v) { put_key(w, key, GGUF_TYPE_UINT32); put_u32(&w->kv, v); }
void gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v) { put_key(w, key, GGUF_TYPE_INT32); tokd_buf_append(&w->kv, &v, 4); }
void gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v) { put_key(w, key, GGUF_TYPE_UINT64); put_u64(&w->kv, v); }
void gguf_writer_set_f32(gguf_writer *w, const char *key, float v) { put_key(w, key, GGUF_TYPE_FLOAT32); tokd_buf_append(&w->kv, &v, 4); }
void gguf_writer_set_bool(gguf_writer *w, const char *key, bool v) {
    uint8_t b = v;
    put_key(w, key, GGUF_TYPE_BOOL);
    tokd_buf_append(&w->kv, &b, 1);
}
void gguf_writer_set_str_n(gguf_writer *w, const char *key, const char *v, uint64_t len) {
    put_key(w, key, GGUF_TYPE_STRING);
    put_str(&w->kv, v, len);
}
void gguf_writer_set_str(gguf_writer *w, const char *key, const char *v) { gguf_writer_set_str_n(w, key, v, strlen(v)); }

void gguf_writer_set_arr(gguf_writer *w, const char *key, gguf_type et, const void *data, uint64_t n) {
    put_key(w, key, GGUF_TYPE_ARRAY);
    put_u32(&w->kv, (uint32_t)et);
    put_u64(&w->kv, n);
    tokd_buf_append(&w->kv, data, (size_t)(n * gguf_type_size(et)));
}

void gguf_writer_set_str_arr(gguf_writer *w, const char *key, const gguf_str *strs, uint64_t n) {
    put_key(w, key, GGUF_TYPE_ARRAY);
    put_u32(&w->kv, GGUF_TYPE_STRING);
    put_u64(&w->kv, n);
    for (uint64_t i = 0; i < n; i++) put_str(&w->kv, strs[i].ptr, strs[i].len);
}

static void put_value(tokd_buf *b, const gguf_value *v) {
    switch (v->type) {
    case GGUF_TYPE_STRING: put_str(b, v->v.str.ptr, v->v.str.len); return;
    case GGUF_TYPE_ARRAY: {
        const gguf_array *a = &v->v.arr;
        put_u32(b, (uint32_t)a->elem_type);
        put_u64(b, a->n);
        size_t es = gguf_type_size(a->elem_type);
        if (es) tokd_buf_append(b, a->data, (size_t)(a->n * es));
        else if (a->elem_type == GGUF_TYPE_STRING)
            for (uint64_t i = 0; i < a->n; i++) put_str(b, a->strs[i].ptr, a->strs[i].len);
        else
            for (uint64_t i = 0; i < a->n; i++) put_value(b, &a->arrs[i]);
        return;
    }
    case GGUF_TYPE_BOOL: { uint8_t x = v->v.b; tokd_buf_append(b, &x, 1); return; }
    case GGUF_TYPE_FLOAT32: { float x = (float)v->v.f64; tokd_buf_append(b, &x, 4); return; }
    case GGUF_TYPE_FLOAT64: tokd_buf_append(b, &v->v.f64, 8); return;
    default: { /* integers: low bytes of the stored 64-bit value, little endian */
        uint64_t x = v->v.u64;
        tokd_buf_append(b, &x, gguf_type_size(v->type));
        return;
    }
    }
}

void gguf_writer_copy_kv(gguf_writer *w, const gguf_kv *kv) {
    put_str(&w->kv, kv->key.ptr, kv->key.len);
    put_u32(&w->kv, (uint32_t)kv->value.type);
    put_value(&w->kv, &kv->value);
    w->n_kv++;
}

void gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const uint64_t *ne,
                            const void *data, uint64_t nbytes) {
    if (w->n_tensors == w->cap_tensors) {
        w->cap_tensors = w->cap_tensors ? w->cap_tensors * 2 : 16;
        w->tensors = tokd_xrealloc(w->tensors, w->cap_tensors * sizeof *w->tensors);
    }
    writer_tensor *t = &w->tensors[w->n_tensors++];
    memset(t, 0, sizeof *t);
    t->name = tokd_xstrdup(name);
    t->type = type;
    t->n_dims = n_dims;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    t->nbytes = nbytes;
    t->data = tokd_xmalloc((size_t)nbytes);
    if (nbytes) memcpy(t->data, data, (size_t)nbytes);
}

static void pad_to(tokd_buf *b, uint64_t align) {
    static const uint8_t zeros[GGUF_DEFAULT_ALIGNMENT];
    while (b->len % align) tokd_buf_append(b, zeros, 1);
}

int gguf_writer_to_buffer(gguf_writer *w, uint8_t **out, uint64_t *out_size, tokd_err *err) {
    tokd_buf b = {0};
    tokd_buf_append(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, w->n_tensors);
    put_u64(&b, w->n_kv);
    tokd_buf_append(&b, w->kv.data, w->kv.len);
    uint64_t off = 0;
    for (uint64_t i = 0; i < w->n_tensors; i++) {
        writer_tensor *t = &w->tensors[i];
        put_str(&b, t->name, strlen(t->name));
        put_u32(&b, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) put_u64(&b, t->ne[d]);
        put_u32(&b, t->type);
        put_u64(&b, off);
        off += t->nbytes;
        if (off % GGUF_DEFAULT_ALIGNMENT) off += GGUF_DEFAULT_ALIGNMENT - off % GGUF_DEFAULT_ALIGNMENT;
    }
    pad_to(&b, GGUF_DEFAULT_ALIGNMENT);
    for (uint64_t i = 0; i < w->n_tensors; i++) {
        tokd_buf_append(&b, w->tensors[i].data, (size_t)w->tensors[i].nbytes);
        pad_to(&b, GGUF_DEFAULT_ALIGNMENT);
    }
    (void)err;
    *out = (uint8_t *)b.data;
    *out_size = b.len;
    return 0;
}

int gguf_writer_to_file(gguf_writer *w, const char *path, tokd_err *err) {
    uint8_t *buf;
    uint64_t size;
    if (gguf_writer_to_buffer(w, &buf, &size, err)) return -1;
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        free(buf);
        return tokd_seterr(err, "cannot create '%s': %s", path, strerror(errno));
    }
    size_t wrote = fwrite(buf, 1, (size_t)size, fp);
    int closed = fclose(fp);
    free(buf);
    if (wrote != size || closed != 0) return tokd_seterr(err, "cannot write '%s': %s", path, strerror(errno));
    return 0;
}
