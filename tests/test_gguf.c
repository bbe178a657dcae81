/* test_gguf.c — the GGUF reader and writer: round trip of every value type, and hostile
 * input (every truncation length, seeded random corruption of the header, metadata and
 * tensor table, absurd counts, dimensions and offsets, bad magic and version). Each
 * broken buffer is copied into an allocation of exactly its size so that ASan catches
 * any read past the end. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "t.h"

static uint8_t *build_sample(uint64_t *size, uint64_t *meta_end) {
    gguf_writer *w = gguf_writer_new();
    gguf_writer_set_str(w, "general.architecture", "llama");
    gguf_writer_set_u32(w, "u32", 42);
    gguf_writer_set_i32(w, "i32", -7);
    gguf_writer_set_u64(w, "u64", 1ull << 40);
    gguf_writer_set_f32(w, "f32", 1.5f);
    gguf_writer_set_bool(w, "flag", true);
    int32_t ints[5] = {1, -2, 3, -4, 5};
    gguf_writer_set_arr(w, "ints", GGUF_TYPE_INT32, ints, 5);
    gguf_str strs[3] = {{"a", 1}, {"", 0}, {"\xe2\x96\x81hello", 8}};
    gguf_writer_set_str_arr(w, "strs", strs, 3);
    uint64_t ne[2] = {4, 3};
    float data[12];
    for (int i = 0; i < 12; i++) data[i] = (float)i * 0.5f;
    gguf_writer_add_tensor(w, "t.weight", 0 /* F32 */, 2, ne, data, sizeof data);
    uint64_t ne1[1] = {8};
    uint16_t h[8] = {0x3c00, 0x4000, 0, 0, 0, 0, 0, 0xbc00};
    gguf_writer_add_tensor(w, "t.half", 1 /* F16 */, 1, ne1, h, sizeof h);
    uint8_t *buf;
    tokd_err err;
    gguf_writer_to_buffer(w, &buf, size, &err);
    gguf_writer_free(w);
    /* end of the tensor table = start of data minus padding: locate by parsing */
    gguf_file *f = gguf_open_buffer(buf, *size, &err);
    *meta_end = f ? f->data_offset : *size;
    gguf_close(f);
    return buf;
}

/* Parse an exact-size copy; if it parses, every tensor must lie inside the buffer. */
static int parse_copy(const uint8_t *src, uint64_t n, tokd_err *err) {
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, src, n);
    gguf_file *f = gguf_open_buffer(copy, n, err);
    int ok = f != NULL;
    if (f) {
        for (uint64_t i = 0; i < f->n_tensors; i++) {
            const gguf_tensor *t = &f->tensors[i];
            const uint8_t *d = t->data;
            if (d < copy || d + t->nbytes > copy + n) {
                fprintf(stderr, "tensor out of bounds after successful parse\n");
                abort();
            }
        }
        /* touch every string and array so ASan sees any bad descriptor */
        volatile unsigned sum = 0;
        for (uint64_t i = 0; i < f->n_kv; i++) {
            const gguf_value *v = &f->kv[i].value;
            for (uint64_t k = 0; k < f->kv[i].key.len; k++) sum += (unsigned char)f->kv[i].key.ptr[k];
            if (v->type == GGUF_TYPE_STRING)
                for (uint64_t k = 0; k < v->v.str.len; k++) sum += (unsigned char)v->v.str.ptr[k];
            if (v->type == GGUF_TYPE_ARRAY && v->v.arr.strs)
                for (uint64_t a = 0; a < v->v.arr.n; a++)
                    for (uint64_t k = 0; k < v->v.arr.strs[a].len; k++) sum += (unsigned char)v->v.arr.strs[a].ptr[k];
            if (v->type == GGUF_TYPE_ARRAY && v->v.arr.data)
                for (uint64_t a = 0; a < v->v.arr.n; a++) sum += (unsigned)gguf_arr_i64(&v->v.arr, a);
        }
        (void)sum;
        gguf_close(f);
    }
    free(copy);
    return ok;
}

static void put_u64_at(uint8_t *b, uint64_t off, uint64_t v) { memcpy(b + off, &v, 8); }
static void put_u32_at(uint8_t *b, uint64_t off, uint32_t v) { memcpy(b + off, &v, 4); }

int main(void) {
    uint64_t size, meta_end;
    uint8_t *buf = build_sample(&size, &meta_end);
    tokd_err err;

    /* round trip */
    gguf_file *f = gguf_open_buffer(buf, size, &err);
    CHECK(f != NULL, "sample parses: %s", f ? "" : err.msg);
    if (f) {
        uint32_t u32 = 0;
        int64_t i64 = 0;
        uint64_t u64 = 0;
        float f32 = 0;
        bool b = false;
        gguf_str s;
        gguf_array a;
        CHECK(f->version == 3 && f->n_kv == 8 && f->n_tensors == 2, "counts %llu %llu", (unsigned long long)f->n_kv, (unsigned long long)f->n_tensors);
        CHECK(gguf_get_u32(f, "u32", &u32, &err) == 0 && u32 == 42, "u32");
        CHECK(gguf_get_i64(f, "i32", &i64, &err) == 0 && i64 == -7, "i32");
        CHECK(gguf_get_u64(f, "u64", &u64, &err) == 0 && u64 == (1ull << 40), "u64");
        CHECK(gguf_get_u32(f, "u64", &u32, &err) < 0, "u64 too large for u32 is an error");
        CHECK(gguf_get_u32(f, "i32", &u32, &err) < 0, "negative into u32 is an error");
        CHECK(gguf_get_f32(f, "f32", &f32, &err) == 0 && f32 == 1.5f, "f32");
        CHECK(gguf_get_bool(f, "flag", &b, &err) == 0 && b, "bool");
        CHECK(gguf_get_str(f, "general.architecture", &s, &err) == 0 && gguf_str_eq(s, "llama"), "str");
        CHECK(gguf_get_str(f, "u32", &s, &err) < 0, "type mismatch is an error");
        CHECK(gguf_get_u32(f, "absent", &u32, &err) == 1, "absent key");
        CHECK(gguf_get_arr(f, "ints", GGUF_TYPE_INT32, &a, &err) == 0 && a.n == 5 && gguf_arr_i64(&a, 1) == -2 &&
                  gguf_arr_i64(&a, 4) == 5, "int array");
        CHECK(gguf_get_arr(f, "strs", GGUF_TYPE_STRING, &a, &err) == 0 && a.n == 3 && a.strs[1].len == 0 &&
                  a.strs[2].len == 8 && memcmp(a.strs[2].ptr, "\xe2\x96\x81hello", 8) == 0, "string array");
        const gguf_tensor *t = gguf_find_tensor(f, "t.weight");
        CHECK(t && t->ne[0] == 4 && t->ne[1] == 3 && t->nbytes == 48 && ((const float *)t->data)[5] == 2.5f, "f32 tensor");
        t = gguf_find_tensor(f, "t.half");
        CHECK(t && t->type == 1 && t->nbytes == 16 && (uintptr_t)((const uint8_t *)t->data - buf) % 32 == 0, "f16 tensor aligned");
        CHECK(gguf_find_tensor(f, "nope") == NULL, "absent tensor");

        /* copy_kv round trip, including a nested array built by hand below */
        gguf_writer *w = gguf_writer_new();
        for (uint64_t i = 0; i < f->n_kv; i++) gguf_writer_copy_kv(w, &f->kv[i]);
        uint8_t *b2;
        uint64_t s2;
        gguf_writer_to_buffer(w, &b2, &s2, &err);
        gguf_writer_free(w);
        gguf_file *f2 = gguf_open_buffer(b2, s2, &err);
        CHECK(f2 && f2->n_kv == 8 && gguf_get_arr(f2, "strs", GGUF_TYPE_STRING, &a, &err) == 0 && a.n == 3, "copy_kv round trip");
        gguf_close(f2);
        free(b2);
        gguf_close(f);
    }

    /* nested arrays: array of 2 arrays of uint8 */
    {
        uint8_t nb[256];
        size_t o = 0;
        memcpy(nb, "GGUF", 4); o = 4;
        put_u32_at(nb, o, 3); o += 4;
        put_u64_at(nb, o, 0); o += 8;
        put_u64_at(nb, o, 1); o += 8;
        put_u64_at(nb, o, 6); o += 8; memcpy(nb + o, "nested", 6); o += 6;
        put_u32_at(nb, o, GGUF_TYPE_ARRAY); o += 4;
        put_u32_at(nb, o, GGUF_TYPE_ARRAY); o += 4;
        put_u64_at(nb, o, 2); o += 8;
        for (int k = 0; k < 2; k++) {
            put_u32_at(nb, o, GGUF_TYPE_UINT8); o += 4;
            put_u64_at(nb, o, 3); o += 8;
            nb[o++] = (uint8_t)(k * 10 + 1); nb[o++] = (uint8_t)(k * 10 + 2); nb[o++] = (uint8_t)(k * 10 + 3);
        }
        gguf_file *nf = gguf_open_buffer(nb, o, &err);
        gguf_array a;
        CHECK(nf && gguf_get_arr(nf, "nested", GGUF_TYPE_ARRAY, &a, &err) == 0 && a.n == 2 && a.arrs[1].v.arr.n == 3 &&
                  gguf_arr_i64(&a.arrs[1].v.arr, 2) == 13, "nested array");
        gguf_close(nf);
        int fails = 0;
        for (size_t L = 0; L < o; L++) fails += !parse_copy(nb, L, &err);
        CHECK(fails == (int)o, "every truncation of the nested file fails (%d of %zu)", fails, o);
    }

    /* every truncation length that cuts into the tensor data or before fails cleanly,
     * with a message (only trailing alignment padding may be cut) */
    uint64_t data_end = 0;
    {
        gguf_file *pf = gguf_open_buffer(buf, size, &err);
        for (uint64_t i = 0; i < pf->n_tensors; i++) {
            uint64_t end = pf->data_offset + pf->tensors[i].offset + pf->tensors[i].nbytes;
            if (end > data_end) data_end = end;
        }
        gguf_close(pf);
    }
    int trunc_fail = 0, empty_msg = 0;
    for (uint64_t L = 0; L < data_end; L++) {
        err.msg[0] = 0;
        if (!parse_copy(buf, L, &err)) {
            trunc_fail++;
            if (!err.msg[0]) empty_msg++;
        }
    }
    CHECK(trunc_fail == (int)data_end, "all %llu truncations rejected (%d were)", (unsigned long long)data_end, trunc_fail);
    for (uint64_t L = data_end; L <= size; L++) CHECK(parse_copy(buf, L, &err), "cutting only padding (%llu) is fine", (unsigned long long)L);
    CHECK(empty_msg == 0, "every rejection names the problem (%d without message)", empty_msg);

    /* seeded random corruptions of header, metadata and tensor table */
    uint64_t seed = 12345;
    int parsed = 0, rejected = 0;
    uint8_t *mut = malloc(size);
    for (int iter = 0; iter < 1000; iter++) {
        memcpy(mut, buf, size);
        int nflips = 1 + iter % 4;
        for (int k = 0; k < nflips; k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            uint64_t pos = (seed >> 33) % meta_end;
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            uint8_t val = (uint8_t)(seed >> 56);
            if (iter % 3 == 0) val = (iter & 8) ? 0xff : 0x00; /* extremes make huge lengths */
            mut[pos] = val;
        }
        err.msg[0] = 0;
        if (parse_copy(mut, size, &err)) parsed++;
        else {
            rejected++;
            if (!err.msg[0]) empty_msg++;
        }
    }
    free(mut);
    CHECK(parsed + rejected == 1000 && rejected > 500, "1000 corruptions: %d parsed, %d rejected", parsed, rejected);
    CHECK(empty_msg == 0, "corruption rejections all carry a message");

    /* targeted hostile headers */
    {
        uint8_t *b = malloc(size);
        struct { const char *what; uint64_t off; int width; uint64_t val; const char *expect; } cases[] = {
            {"wrong magic", 0, 4, 0x12345678, "magic"},
            {"version 1", 4, 4, 1, "version"},
            {"version 4", 4, 4, 4, "version"},
            {"huge tensor count", 8, 8, 1ull << 62, "tensors"},
            {"huge kv count", 16, 8, 1ull << 60, "metadata"},
            {"huge key length", 24, 8, 1ull << 63, "length"},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            memcpy(b, buf, size);
            if (cases[i].width == 4) put_u32_at(b, cases[i].off, (uint32_t)cases[i].val);
            else put_u64_at(b, cases[i].off, cases[i].val);
            err.msg[0] = 0;
            int ok = parse_copy(b, size, &err);
            CHECK(!ok && strstr(err.msg, cases[i].expect), "%s: rejected with a message naming it (got '%s')", cases[i].what, err.msg);
        }
        free(b);
    }

    /* tensor table: absurd dimension, offset past the end, misaligned offset, bad type */
    {
        gguf_file *ok = gguf_open_buffer(buf, size, &err);
        /* find the tensor info of t.weight: name string then n_dims, ne[2], type, offset */
        const uint8_t *name = (const uint8_t *)ok->tensors[0].name.ptr;
        uint64_t info = (uint64_t)(name - buf) + ok->tensors[0].name.len; /* -> n_dims */
        gguf_close(ok);
        uint8_t *b = malloc(size);
        struct { const char *what; uint64_t off; int width; uint64_t val; const char *expect; } cases[] = {
            {"zero dims", info, 4, 0, "dimensions"},
            {"five dims", info, 4, 5, "dimensions"},
            {"absurd dim", info + 4, 8, 1ull << 62, "absurd"},
            {"huge second dim", info + 12, 8, 1ull << 40, "past the end"},
            {"unknown type", info + 20, 4, 99, "unsupported tensor type"},
            {"offset past end", info + 24, 8, 1ull << 40, "past the end"},
            {"misaligned offset", info + 24, 8, 3, "aligned"},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            memcpy(b, buf, size);
            if (cases[i].width == 4) put_u32_at(b, cases[i].off, (uint32_t)cases[i].val);
            else put_u64_at(b, cases[i].off, cases[i].val);
            err.msg[0] = 0;
            int parsed_ok = parse_copy(b, size, &err);
            CHECK(!parsed_ok && strstr(err.msg, cases[i].expect), "%s: got '%s'", cases[i].what, err.msg);
        }
        free(b);
    }

    /* the real files parse */
    const char *files[] = {"models/stories260K.gguf", "models/tiny-llama-Q4_K_M.gguf", "models/tiny-qwen2-F16.gguf",
                           "vocab/ggml-vocab-gpt-2.gguf", "vocab/ggml-vocab-llama-spm.gguf"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", t_shared(), files[i]);
        gguf_file *rf = gguf_open(path, &err);
        CHECK(rf != NULL, "%s parses: %s", path, rf ? "" : err.msg);
        gguf_close(rf);
    }
    gguf_file *missing = gguf_open("/nonexistent/x.gguf", &err);
    CHECK(!missing && strstr(err.msg, "cannot open"), "missing file: %s", err.msg);

    free(buf);
    T_DONE();
}
