/* test_imatrix.c — importance matrices (src/imatrix.c) and `tokd quantize --imatrix`.
 *
 *   - the legacy binary format: values divided by ncall, the optional trailer (chunks,
 *     dataset), a repeated name (the last wins), and every kind of bad file refused
 *     with a message (truncations at every byte, trailing bytes, counts out of range,
 *     non-finite values);
 *   - the GGUF format: sum / count per expert, 1 where the count is 0, datasets and
 *     chunk count, sums without counts and counts without sums refused;
 *   - quantizing ../shared/models/tiny-llama-f32.gguf with an importance matrix made
 *     here (deterministic values over four decades, some exact zeros, ncall 7) gives,
 *     for each target (llama.cpp's 16 K and legacy file types, and its importance-matrix
 *     types Q2_K_S, IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ2_M, IQ3_XXS, IQ3_XS, IQ3_S, IQ3_M), the file
 *     llama-quantize --imatrix writes with the same matrix (llama.cpp c392e5094: its size
 *     and FNV-1a hash), a file different from the one without (the types that need a
 *     matrix are refused without one), with the quantize.imatrix.* metadata; a GGUF matrix with the same values
 *     gives the same tensors; the weighted error sum qw * (x - q(x))^2 of the
 *     converted matrices is below the unweighted quantiser's;
 *   - a block whose weights are all 0 is quantised as without weights (llama.cpp writes
 *     NaN scales there), the others as with;
 *   - computing a matrix (imatrix_collect.c) over a short story on tiny-llama: chunks and
 *     tokens counted, 7 entries a layer sorted by name (and output.weight only when
 *     asked), layer 0's attention-input entries equal to the mean squares of the normed
 *     embeddings computed directly, the written files read back (GGUF bit for bit, the
 *     legacy one within its rounding), and the quantiser taking them;
 *   - writing and combining (tokd imatrix --output-format, --in-file): llama-imatrix's
 *     GGUF keys, tensor names, order and shapes, the legacy file byte for byte (ncall
 *     rounded up, 1 for an expert never reached), sums and counts adding up with a legacy
 *     file's scaled by the chunk size and one count broadcast to experts, sizes that
 *     differ refused with nothing changed, and a write that fails leaving no file and an
 *     earlier one as it was;
 *   - errors: an entry of the wrong size (refused, except for token_embd), a missing
 *     file, a bad file; nothing written. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf.h"
#include "imatrix.h"
#include "imatrix_collect.h"
#include "imatrix_stats.h"
#include "outfile.h"
#include "tokenizer.h"
#include "vecmath.h"
#include "kernels/quants.h"
#include "kernels/types.h"
#include "quant_plan.h"
#include "quantize.h"
#include "t.h"
#include "t_golden.h"

static char tmpdir[256];

/* ---- writing legacy files ---------------------------------------------------------- */

static void put_i32(tokd_buf *b, int32_t v) { tokd_buf_append(b, &v, 4); }
static void put_entry(tokd_buf *b, const char *name, int32_t ncall, const float *v, int32_t n) {
    put_i32(b, (int32_t)strlen(name));
    tokd_buf_append(b, name, strlen(name));
    put_i32(b, ncall);
    put_i32(b, n);
    tokd_buf_append(b, v, (size_t)n * 4);
}

static void check_legacy(void) {
    const float a[3] = {3, 6, 9}, b[2] = {1, 2}, c[2] = {5, 7};
    tokd_buf f = {0};
    put_i32(&f, 3);
    put_entry(&f, "blk.0.attn_q.weight", 3, a, 3);
    put_entry(&f, "output.weight", 0, b, 2);
    put_entry(&f, "output.weight", 2, c, 2); /* a repeated name: the last wins */
    const size_t no_trailer = f.len;
    tokd_err err;
    tokd_imatrix *im = tokd_imatrix_parse((const uint8_t *)f.data, f.len, &err);
    CHECK(im != NULL, "legacy file parses: %s", im ? "" : err.msg);
    if (im) {
        CHECK(im->n_entries == 2, "two names: %zu", im->n_entries);
        const tokd_imatrix_entry *q = tokd_imatrix_find(im, "blk.0.attn_q.weight");
        CHECK(q && q->n == 3 && q->values[0] == 1 && q->values[1] == 2 && q->values[2] == 3, "values / ncall");
        const tokd_imatrix_entry *o = tokd_imatrix_find(im, "output.weight");
        CHECK(o && o->n == 2 && o->values[0] == 2.5f && o->values[1] == 3.5f, "the repeated name's last entry");
        CHECK(!tokd_imatrix_find(im, "blk.0.attn_q") && !tokd_imatrix_find(im, "output.weigh"), "exact names");
        CHECK(im->chunks == 0 && !im->dataset[0], "no trailer: no chunks, no dataset");
        tokd_imatrix_free(im);
    }
    put_i32(&f, 68);
    put_i32(&f, 8);
    tokd_buf_append(&f, "wiki.txt", 8);
    im = tokd_imatrix_parse((const uint8_t *)f.data, f.len, &err);
    CHECK(im && im->chunks == 68 && !strcmp(im->dataset, "wiki.txt"), "trailer: chunks and dataset");
    tokd_imatrix_free(im);

    /* every truncation is refused with a message (the cut inside the trailer too) */
    int refused = 0, said = 0;
    for (size_t n = 0; n < f.len; n++) {
        if (n == no_trailer) continue; /* a whole file without its trailer */
        err.msg[0] = 0;
        tokd_imatrix *t = tokd_imatrix_parse((const uint8_t *)f.data, n, &err);
        refused += t == NULL;
        said += t == NULL && err.msg[0];
        tokd_imatrix_free(t);
    }
    CHECK(refused == (int)f.len - 1 && said == refused, "truncations refused: %d of %zu, %d with a message", refused,
          f.len - 1, said);
    tokd_buf_append(&f, "x", 1);
    im = tokd_imatrix_parse((const uint8_t *)f.data, f.len, &err);
    CHECK(!im && strstr(err.msg, "after the last entry"), "trailing byte: %s", err.msg);
    tokd_buf_free(&f);

    struct {
        int32_t count, len, ncall, nval;
        float v;
        const char *want;
    } bad[] = {
        {0, 1, 1, 1, 1, "no entries"},
        {-5, 1, 1, 1, 1, "no entries"},
        {1, 0, 1, 1, 1, "name length"},
        {1, -3, 1, 1, 1, "name length"},
        {1, 1, 1, 0, 1, "value count"},
        {1, 1, 1, -1, 1, "value count"},
        {1, 1, 1, 1000000, 1, "value count"},
        {1, 1, 1, 1, NAN, "not finite"},
        {1, 1, 1, 1, INFINITY, "not finite"},
        {1, 1, 0, 1, 3e38f, ""}, /* large but finite: fine */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tokd_buf g = {0};
        put_i32(&g, bad[i].count);
        put_i32(&g, bad[i].len);
        if (bad[i].len > 0) tokd_buf_append(&g, "w", 1);
        put_i32(&g, bad[i].ncall);
        put_i32(&g, bad[i].nval);
        tokd_buf_append(&g, &bad[i].v, 4);
        err.msg[0] = 0;
        im = tokd_imatrix_parse((const uint8_t *)g.data, g.len, &err);
        if (bad[i].want[0])
            CHECK(!im && strstr(err.msg, bad[i].want), "bad file %zu: want '%s', got '%s'", i, bad[i].want, err.msg);
        else
            CHECK(im != NULL, "file %zu parses: %s", i, err.msg);
        tokd_imatrix_free(im);
        tokd_buf_free(&g);
    }
    im = tokd_imatrix_parse(NULL, 0, &err);
    CHECK(!im && err.msg[0], "empty input refused");
}

/* ---- GGUF files ---------------------------------------------------------------------- */

static tokd_imatrix *gguf_imatrix(gguf_writer *w, tokd_err *err) {
    uint8_t *buf;
    uint64_t n;
    if (gguf_writer_to_buffer(w, &buf, &n, err)) return NULL;
    tokd_imatrix *im = tokd_imatrix_parse(buf, n, err);
    free(buf);
    return im;
}

static void check_gguf(void) {
    const float sums[6] = {2, 4, 6, 1, 1, 1}, counts[2] = {2, 0}, one[1] = {4}, sums1[3] = {8, 8, 8};
    gguf_writer *w = gguf_writer_new();
    gguf_str ds[2] = {{"a.txt", 5}, {"b.txt", 5}};
    gguf_writer_set_str(w, "general.type", "imatrix");
    gguf_writer_set_str_arr(w, "imatrix.datasets", ds, 2);
    gguf_writer_set_u32(w, "imatrix.chunk_count", 12);
    uint64_t ne_s[2] = {3, 2}, ne_c[2] = {1, 2}, ne_1[2] = {3, 1}, ne_o[2] = {1, 1};
    gguf_writer_add_tensor(w, "blk.0.ffn_down_exps.weight.in_sum2", GGML_TYPE_F32, 2, ne_s, sums, sizeof sums);
    gguf_writer_add_tensor(w, "blk.0.ffn_down_exps.weight.counts", GGML_TYPE_F32, 2, ne_c, counts, sizeof counts);
    gguf_writer_add_tensor(w, "output.weight.in_sum2", GGML_TYPE_F32, 2, ne_1, sums1, sizeof sums1);
    gguf_writer_add_tensor(w, "output.weight.counts", GGML_TYPE_F32, 2, ne_o, one, sizeof one);
    tokd_err err;
    tokd_imatrix *im = gguf_imatrix(w, &err);
    CHECK(im != NULL, "GGUF imatrix parses: %s", im ? "" : err.msg);
    if (im) {
        const tokd_imatrix_entry *e = tokd_imatrix_find(im, "blk.0.ffn_down_exps.weight");
        CHECK(e && e->n == 6 && e->values[0] == 1 && e->values[1] == 2 && e->values[2] == 3 && e->values[3] == 1 &&
                  e->values[5] == 1,
              "sum / count per expert, 1 for an expert never reached");
        e = tokd_imatrix_find(im, "output.weight");
        CHECK(e && e->n == 3 && e->values[2] == 2, "2-D entry");
        CHECK(im->chunks == 12 && !strcmp(im->dataset, "a.txt, b.txt"), "chunks %d, dataset '%s'", im->chunks, im->dataset);
        tokd_imatrix_free(im);
    }
    gguf_writer_free(w);

    w = gguf_writer_new(); /* a name with a NUL byte: "x#y" written, the '#' then zeroed */
    gguf_writer_add_tensor(w, "x#y.weight.in_sum2", GGML_TYPE_F32, 2, ne_1, sums1, sizeof sums1);
    gguf_writer_add_tensor(w, "x#y.weight.counts", GGML_TYPE_F32, 2, ne_o, one, sizeof one);
    uint8_t *bytes;
    uint64_t n_bytes;
    CHECK(gguf_writer_to_buffer(w, &bytes, &n_bytes, &err) == 0, "serialise");
    int zeroed = 0;
    for (uint64_t i = 0; i + 3 <= n_bytes; i++)
        if (!memcmp(bytes + i, "x#y", 3)) bytes[i + 1] = 0, zeroed++;
    im = tokd_imatrix_parse(bytes, n_bytes, &err);
    CHECK(zeroed == 2 && !im && strstr(err.msg, "NUL"), "a tensor name with a NUL byte refused: %s", err.msg);
    tokd_imatrix_free(im);
    free(bytes);
    gguf_writer_free(w);
    w = gguf_writer_new(); /* sums without counts */
    gguf_writer_add_tensor(w, "x.weight.in_sum2", GGML_TYPE_F32, 2, ne_1, sums1, sizeof sums1);
    im = gguf_imatrix(w, &err);
    CHECK(!im && strstr(err.msg, "no counts"), "sums without counts: %s", err.msg);
    gguf_writer_free(w);
    w = gguf_writer_new(); /* counts without sums */
    gguf_writer_add_tensor(w, "x.weight.in_sum2", GGML_TYPE_F32, 2, ne_1, sums1, sizeof sums1);
    gguf_writer_add_tensor(w, "x.weight.counts", GGML_TYPE_F32, 2, ne_o, one, sizeof one);
    gguf_writer_add_tensor(w, "y.weight.counts", GGML_TYPE_F32, 2, ne_o, one, sizeof one);
    im = gguf_imatrix(w, &err);
    CHECK(!im && strstr(err.msg, "no sums"), "counts without sums: %s", err.msg);
    gguf_writer_free(w);
    w = gguf_writer_new(); /* counts of the wrong length */
    gguf_writer_add_tensor(w, "x.weight.in_sum2", GGML_TYPE_F32, 2, ne_s, sums, sizeof sums);
    gguf_writer_add_tensor(w, "x.weight.counts", GGML_TYPE_F32, 2, ne_o, one, sizeof one);
    im = gguf_imatrix(w, &err);
    CHECK(!im && strstr(err.msg, "counts for"), "count per expert: %s", err.msg);
    gguf_writer_free(w);
    w = gguf_writer_new(); /* a model, not an importance matrix */
    gguf_writer_add_tensor(w, "x.weight", GGML_TYPE_F32, 2, ne_1, sums1, sizeof sums1);
    im = gguf_imatrix(w, &err);
    CHECK(!im && strstr(err.msg, "in_sum2"), "GGUF without sums: %s", err.msg);
    gguf_writer_free(w);
    w = gguf_writer_new(); /* F16 sums */
    const uint16_t h[3] = {0x3c00, 0x3c00, 0x3c00};
    gguf_writer_add_tensor(w, "x.weight.in_sum2", GGML_TYPE_F16, 2, ne_1, h, sizeof h);
    gguf_writer_add_tensor(w, "x.weight.counts", GGML_TYPE_F32, 2, ne_o, one, sizeof one);
    im = gguf_imatrix(w, &err);
    CHECK(!im && strstr(err.msg, "F32"), "F16 sums: %s", err.msg);
    gguf_writer_free(w);
    w = gguf_writer_new(); /* a NaN sum */
    const float nan3[3] = {1, NAN, 1};
    gguf_writer_add_tensor(w, "x.weight.in_sum2", GGML_TYPE_F32, 2, ne_1, nan3, sizeof nan3);
    gguf_writer_add_tensor(w, "x.weight.counts", GGML_TYPE_F32, 2, ne_o, one, sizeof one);
    im = gguf_imatrix(w, &err);
    CHECK(!im && strstr(err.msg, "not finite"), "NaN sum: %s", err.msg);
    gguf_writer_free(w);
}

/* ---- quantizing with an importance matrix -------------------------------------------- */

/* The matrix used below: for every 2-D weight of the model but token_embd (which
 * llama-imatrix does not see), ne0 values 10^(4u - 2) for u uniform in [0, 1), one in 97
 * exactly 0, stored as sums for ncall = 7 (so the loader's division is exercised). */
static uint32_t lcg(uint32_t *s) { return *s = *s * 1664525u + 1013904223u; }
static int write_test_imatrix(const char *model, const char *path, bool as_gguf) {
    tokd_err err;
    gguf_file *f = gguf_open(model, &err);
    if (!f) return -1;
    tokd_buf b = {0};
    gguf_writer *w = gguf_writer_new();
    int n = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++)
        n += f->tensors[i].n_dims == 2 && !gguf_str_eq(f->tensors[i].name, "token_embd.weight");
    put_i32(&b, n);
    uint32_t seed = 12345;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        if (t->n_dims != 2 || gguf_str_eq(t->name, "token_embd.weight")) continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        int32_t ne0 = (int32_t)t->ne[0];
        float *v = malloc((size_t)ne0 * 4);
        for (int32_t k = 0; k < ne0; k++) {
            float u = (float)(lcg(&seed) >> 8) / 16777216.0f;
            v[k] = lcg(&seed) % 97 == 0 ? 0.0f : 7.0f * powf(10.0f, 4.0f * u - 2.0f);
        }
        put_entry(&b, name, 7, v, ne0);
        char key[300];
        const float seven = 7;
        uint64_t ne_s[2] = {(uint64_t)ne0, 1}, ne_c[2] = {1, 1};
        snprintf(key, sizeof key, "%s.in_sum2", name);
        gguf_writer_add_tensor(w, key, GGML_TYPE_F32, 2, ne_s, v, (uint64_t)ne0 * 4);
        snprintf(key, sizeof key, "%s.counts", name);
        gguf_writer_add_tensor(w, key, GGML_TYPE_F32, 2, ne_c, &seven, 4);
        free(v);
    }
    put_i32(&b, 10);
    put_i32(&b, 9);
    tokd_buf_append(&b, "calib.txt", 9);
    int rc = 0;
    if (as_gguf) {
        rc = gguf_writer_to_file(w, path, &err);
    } else {
        FILE *o = fopen(path, "wb");
        rc = !o || fwrite(b.data, 1, b.len, o) != b.len;
        if (o) rc |= fclose(o) != 0;
    }
    gguf_writer_free(w);
    tokd_buf_free(&b);
    gguf_close(f);
    return rc ? -1 : 0;
}

static uint64_t fnv1a(const char *path, size_t *n) {
    *n = 0;
    char *bytes = t_slurp(path, n);
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t k = 0; bytes && k < *n; k++) h = (h ^ (uint8_t)bytes[k]) * 0x100000001b3ull;
    free(bytes);
    return h;
}

/* Whether every tensor's bytes in a and b are equal (the metadata may differ). */
static bool same_tensors(const char *a, const char *b) {
    tokd_err err;
    gguf_file *x = gguf_open(a, &err), *y = gguf_open(b, &err);
    bool eq = x && y && x->n_tensors == y->n_tensors;
    for (uint64_t i = 0; eq && i < x->n_tensors; i++)
        eq = x->tensors[i].type == y->tensors[i].type && x->tensors[i].nbytes == y->tensors[i].nbytes &&
             !memcmp(x->tensors[i].data, y->tensors[i].data, x->tensors[i].nbytes);
    gguf_close(x);
    gguf_close(y);
    return eq;
}

/* sum over the converted matrices of qw * (x - dequant)^2, for the file at path */
static double weighted_error(const char *src_path, const char *path, const tokd_imatrix *im) {
    tokd_err err;
    gguf_file *s = gguf_open(src_path, &err), *q = gguf_open(path, &err);
    double e = 0;
    for (uint64_t i = 0; s && q && i < q->n_tensors; i++) {
        const gguf_tensor *t = &q->tensors[i];
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        const tokd_imatrix_entry *en = tokd_imatrix_find(im, name);
        const gguf_tensor *st = gguf_find_tensor(s, name);
        if (!en || !st || t->type == GGML_TYPE_F32) continue;
        const tokd_type_traits *tt = tokd_type_get(t->type);
        int64_t K = (int64_t)t->ne[0];
        float *row = malloc((size_t)K * 4);
        for (uint64_t r = 0; r < t->ne[1]; r++) {
            tt->to_float((const uint8_t *)t->data + r * tokd_row_bytes(tt, K), row, K);
            const float *x = (const float *)st->data + r * (uint64_t)K;
            for (int64_t k = 0; k < K; k++) e += en->values[k] * ((double)x[k] - row[k]) * ((double)x[k] - row[k]);
        }
        free(row);
    }
    gguf_close(s);
    gguf_close(q);
    return e;
}

typedef struct {
    const char *target;
    size_t size;
    uint64_t fnv;
} lc_file;
/* llama-quantize --imatrix tiny.imatrix (llama.cpp c392e5094) on tiny-llama-f32.gguf with
 * the matrix write_test_imatrix makes, run in the directory of the matrix. */
static const lc_file LC_FILES[] = {
    {"Q4_0", 826016, 0xfbc3391663745af5ull},
    {"Q4_1", 903840, 0x4a972c060c5bc07dull},
    {"Q5_0", 981664, 0xed7a2a0258de8327ull},
    {"Q5_1", 1059488, 0xc338303abe0aafa7ull},
    {"Q8_0", 1480352, 0xae94651610736badull},
    {"Q2_K_M", 581792, 0x9770c1bccec8bbc1ull},
    {"Q3_K_S", 660640, 0xcfdcbd402636434bull},
    {"Q3_K_M", 721312, 0x7307aae135bf75feull},
    {"Q3_K_L", 770464, 0x09bfb793a6399b71ull},
    {"Q4_K_S", 830112, 0x6b573ca785e153ddull},
    {"Q4_K_M", 864032, 0x0f4c08014b30260dull},
    {"Q5_K_S", 981664, 0x2c6433ed0b43fcd0ull},
    {"Q5_K_M", 1001248, 0x550412f71f673fc8ull},
    {"Q6_K", 1147040, 0xffda2f1a4f4985c2ull},
    {"IQ4_NL", 830112, 0x0bed91346af1a680ull},
    {"IQ4_XS", 792224, 0x3a1e9176ce1f8729ull},
    {"Q2_K_S", 541856, 0xb4587dc61610360eull}, {"IQ2_XXS", 448416, 0x699ba4c0db676381ull}, {"IQ2_XS", 482208, 0xe6465af324f8cc38ull}, {"IQ2_S", 513952, 0xa4eb0f22c29698f6ull}, {"IQ2_M", 543648, 0x22e24ebe8eef0c9aull},
    {"IQ1_S", 389024, 0x05407e7c360bbd84ull}, {"IQ1_M", 411296, 0x33f999aa226c2022ull},
    {"IQ3_XXS", 592800, 0x998a01a5cd5087c2ull}, {"IQ3_XS", 645024, 0x2ccc05d109eec707ull}, {"IQ3_S", 664992, 0xfbfcba26ed5629dfull}, {"IQ3_M", 682400, 0xe083a3b9cbcc246eull},
};

static void check_quantize(const char *src) {
    char cwd[1024];
    CHECK(getcwd(cwd, sizeof cwd) != NULL, "getcwd");
    CHECK(chdir(tmpdir) == 0, "chdir %s", tmpdir);
    CHECK(write_test_imatrix(src, "tiny.imatrix", false) == 0, "write the legacy matrix");
    CHECK(write_test_imatrix(src, "tiny-imatrix.gguf", true) == 0, "write the GGUF matrix");
    tokd_err err;
    tokd_imatrix *im = tokd_imatrix_load("tiny.imatrix", &err);
    CHECK(im && im->n_entries > 10 && im->chunks == 10, "the matrix loads: %s", im ? "" : err.msg);
    const tokd_quantize_opts with = {.imatrix = "tiny.imatrix"}, with_gguf = {.imatrix = "tiny-imatrix.gguf"};
    int matched = 0;
    for (size_t i = 0; i < sizeof LC_FILES / sizeof LC_FILES[0]; i++) {
        const char *ty = LC_FILES[i].target;
        char a[64], b[64], c[64];
        snprintf(a, sizeof a, "im-%s.gguf", ty);
        snprintf(b, sizeof b, "plain-%s.gguf", ty);
        snprintf(c, sizeof c, "img-%s.gguf", ty);
        int rc = tokd_quantize_file_opts(src, a, ty, &with, 2, NULL, &err);
        CHECK(rc == 0, "%s with an imatrix: %s", ty, rc ? err.msg : "");
        /* llama.cpp makes these only with a matrix (IQ3_XXS for its IQ2_S tensors) */
        const bool needs = !strncmp(ty, "IQ2_", 4) || !strncmp(ty, "IQ1_", 4) || !strcmp(ty, "Q2_K_S") || !strcmp(ty, "IQ3_XXS");
        rc = tokd_quantize_file(src, b, ty, 2, NULL, &err);
        CHECK(needs ? rc != 0 && strstr(err.msg, "--imatrix") && access(b, F_OK) != 0 : rc == 0, "%s without: %s", ty,
              rc ? err.msg : "written");
        CHECK(tokd_quantize_file_opts(src, c, ty, &with_gguf, 2, NULL, &err) == 0, "%s with the GGUF matrix", ty);
        size_t n;
        uint64_t h = fnv1a(a, &n);
        CHECK(n == LC_FILES[i].size && h == LC_FILES[i].fnv, "%s: size %zu hash %016llx, llama-quantize's %zu %016llx", ty, n,
              (unsigned long long)h, LC_FILES[i].size, (unsigned long long)LC_FILES[i].fnv);
        matched += n == LC_FILES[i].size && h == LC_FILES[i].fnv;
        CHECK(same_tensors(a, c), "%s: the GGUF matrix gives the same tensors", ty);
        bool q8 = !strcmp(ty, "Q8_0");
        if (!needs)
            CHECK(q8 == same_tensors(a, b), "%s: %s the file without", ty,
                  q8 ? "Q8_0 takes no weights: the same as" : "differs from");
        if (!q8 && !needs) {
            double ew = weighted_error(src, a, im), eu = weighted_error(src, b, im);
            CHECK(ew < eu, "%s: weighted error %.4g with the matrix, %.4g without", ty, ew, eu);
        }
        gguf_file *f = gguf_open(a, &err);
        gguf_str s = {0};
        int32_t entries = 0;
        int64_t e64 = 0;
        CHECK(f && gguf_get_str(f, "quantize.imatrix.file", &s, &err) == 0 && gguf_str_eq(s, "tiny.imatrix") &&
                  gguf_get_str(f, "quantize.imatrix.dataset", &s, &err) == 0 && gguf_str_eq(s, "calib.txt") &&
                  gguf_get_i64(f, "quantize.imatrix.entries_count", &e64, &err) == 0 &&
                  gguf_get_i64(f, "quantize.imatrix.chunks_count", &e64, &err) == 0 && e64 == 10,
              "%s: quantize.imatrix.* metadata", ty);
        (void)entries;
        gguf_close(f);
    }
    CHECK(matched == (int)(sizeof LC_FILES / sizeof LC_FILES[0]), "%d of %zu files byte-identical to llama-quantize's",
          matched, sizeof LC_FILES / sizeof LC_FILES[0]);
    tokd_imatrix_free(im);

    /* an entry of the wrong size: refused, nothing written */
    {
        tokd_buf b = {0};
        const float v[5] = {1, 1, 1, 1, 1};
        put_i32(&b, 1);
        put_entry(&b, "blk.0.attn_q.weight", 1, v, 5);
        FILE *o = fopen("short.imatrix", "wb");
        CHECK(o && fwrite(b.data, 1, b.len, o) == b.len && fclose(o) == 0, "write short.imatrix");
        tokd_buf_free(&b);
        const tokd_quantize_opts bad = {.imatrix = "short.imatrix"};
        CHECK(tokd_quantize_file_opts(src, "bad.gguf", "Q4_K_M", &bad, 2, NULL, &err) != 0 &&
                  strstr(err.msg, "blk.0.attn_q.weight") && strstr(err.msg, "5 values"),
              "wrong size refused: %s", err.msg);
        CHECK(access("bad.gguf", F_OK) != 0, "nothing written");
        b = (tokd_buf){0};
        put_i32(&b, 1);
        put_entry(&b, "token_embd.weight", 1, v, 5);
        o = fopen("embd.imatrix", "wb");
        CHECK(o && fwrite(b.data, 1, b.len, o) == b.len && fclose(o) == 0, "write embd.imatrix");
        tokd_buf_free(&b);
        const tokd_quantize_opts embd = {.imatrix = "embd.imatrix"};
        CHECK(tokd_quantize_file_opts(src, "embd.gguf", "Q4_K_M", &embd, 2, NULL, &err) == 0 &&
                  same_tensors("embd.gguf", "plain-Q4_K_M.gguf"),
              "token_embd of the wrong size: quantized without weights, as llama-quantize");
        const tokd_quantize_opts missing = {.imatrix = "nonexistent.imatrix"}, junk = {.imatrix = "bad.junk"};
        CHECK(tokd_quantize_file_opts(src, "bad.gguf", "Q4_0", &missing, 2, NULL, &err) != 0 &&
                  strstr(err.msg, "nonexistent.imatrix"),
              "missing matrix: %s", err.msg);
        o = fopen("bad.junk", "wb");
        CHECK(o && fwrite("junkjunk", 1, 8, o) == 8 && fclose(o) == 0, "write bad.junk");
        CHECK(tokd_quantize_file_opts(src, "bad.gguf", "Q4_0", &junk, 2, NULL, &err) != 0 && strstr(err.msg, "bad.junk"),
              "junk matrix: %s", err.msg);
        CHECK(access("bad.gguf", F_OK) != 0, "nothing written");
    }
    CHECK(chdir(cwd) == 0, "chdir back");
}

/* A block whose importance weights are all 0 is quantised as without weights (llama.cpp
 * writes a NaN scale there for Q2_K, Q4_K, Q5_K and IQ4_NL); the other blocks as with. */
static void check_zero_blocks(void) {
    const uint32_t types[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K,
                              GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS};
    enum { N = 1024 };
    float x[N], qw[N], y[N];
    uint32_t seed = 99;
    for (int i = 0; i < N; i++) {
        x[i] = ((float)(lcg(&seed) >> 8) / 16777216.0f - 0.5f) * 0.1f;
        qw[i] = i >= 256 && i < 512 ? 0.0f : 0.5f + (float)(lcg(&seed) % 1000) / 100.0f;
    }
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const tokd_type_traits *tt = tokd_type_get(types[t]);
        size_t rb = tokd_row_bytes(tt, N);
        uint8_t *got = malloc(rb), *with = malloc(rb), *without = malloc(rb);
        tokd_quant_row(types[t], x, got, N, qw);
        tt->from_float_w(x, with, N, qw);
        tt->from_float(x, without, N);
        size_t z0 = 256 / tt->blck * tt->bytes, z1 = 512 / tt->blck * tt->bytes;
        CHECK(!memcmp(got, with, z0) && !memcmp(got + z1, with + z1, rb - z1), "%s: weighted blocks as from_float_w", tt->name);
        CHECK(!memcmp(got + z0, without + z0, z1 - z0), "%s: zero-weight blocks as from_float", tt->name);
        tt->to_float(got, y, N);
        bool finite = true;
        for (int i = 0; i < N; i++) finite &= isfinite(y[i]) && (i < 256 || i >= 512 || fabsf(y[i] - x[i]) < 0.02f);
        CHECK(finite, "%s: finite, and the zero-weight blocks near x", tt->name);
        free(got);
        free(with);
        free(without);
    }
}

/* llama.cpp's rules that depend on the matrix, on a 22-layer llama */
static void check_rules(void) {
    const tokd_qmodel m = {"llama", 22, 8, 2, 0};
    const char *targets[] = {"Q4_0", "Q5_0", "IQ4_XS", "Q4_1"};
    const uint32_t first_with[] = {GGML_TYPE_Q4_1, GGML_TYPE_Q5_1, GGML_TYPE_IQ4_XS, GGML_TYPE_Q4_1};
    const uint32_t first_without[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q5_0, GGML_TYPE_Q5_K, GGML_TYPE_Q4_1};
    const uint32_t base[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q5_0, GGML_TYPE_IQ4_XS, GGML_TYPE_Q4_1};
    for (int i = 0; i < 4; i++)
        for (int with = 0; with < 2; with++) {
            tokd_qplan p;
            const char *names[1] = {"output.weight"};
            tokd_qplan_init(&p, tokd_qtarget_find(targets[i]), &m, names, 1);
            p.has_imatrix = with;
            uint32_t got[22];
            for (int l = 0; l < 22; l++) {
                char name[64];
                snprintf(name, sizeof name, "blk.%d.ffn_down.weight", l);
                got[l] = tokd_qplan_type(&p, name, 2048);
            }
            /* n/8 = 2 layers */
            CHECK(got[0] == (with ? first_with[i] : first_without[i]) && got[1] == got[0] && got[2] == base[i] &&
                      got[21] == base[i],
                  "%s %s the matrix: ffn_down %s %s %s", targets[i], with ? "with" : "without", ggml_type_name(got[0]),
                  ggml_type_name(got[2]), ggml_type_name(got[21]));
        }
}

/* ---- computing a matrix (imatrix_collect.c) ------------------------------------------ */

static void check_collect(const char *src) {
    tokd_err err;
    tokd_model *m = tokd_model_load(src, &err);
    CHECK(m != NULL, "load %s: %s", src, m ? "" : err.msg);
    if (!m) return;
    const char *text = "Once upon a time there was a little robot who loved to count the stars. Every night it "
                       "climbed the hill behind the old mill and counted, one by one, until the sun came up. "
                       "One morning a bird asked it why, and the robot said that someone had to remember them all. "
                       "The bird laughed, and then it stayed, and the two of them counted together ever after.";
    const tokd_imatrix_params p = {.n_ctx = 32, .n_batch = 16, .n_chunks = 0, .n_threads = 2};
    tokd_imatrix_collector *c = tokd_imatrix_collector_new(m, false);
    int chunks = tokd_imatrix_compute(m, text, strlen(text), &p, c, NULL, NULL, &err);
    int32_t *toks = NULL;
    size_t n_toks = 0;
    CHECK(tokd_tokenize(m->tok, text, strlen(text), true, false, &toks, &n_toks, &err) == 0, "tokenize");
    CHECK(chunks == (int)(n_toks / 32) && chunks >= 2, "%d chunks of 32 from %zu tokens", chunks, n_toks);
    CHECK(tokd_imatrix_collector_tokens(c) == (int64_t)chunks * 32, "%lld tokens seen",
          (long long)tokd_imatrix_collector_tokens(c));
    tokd_imatrix *im = tokd_imatrix_collector_result(c, "story.txt", chunks);
    const int L = m->hp.n_layer, E = m->hp.n_embd;
    CHECK(im->n_entries == (size_t)(7 * L) && !tokd_imatrix_find(im, "output.weight"), "%zu entries, 7 a layer, no output",
          im->n_entries);
    bool sorted = true;
    for (size_t i = 1; i < im->n_entries; i++) sorted &= strcmp(im->entries[i - 1].name, im->entries[i].name) < 0;
    CHECK(sorted, "entries sorted by name");
    /* layer 0's attention input is the normed embedding: its mean squares, directly */
    double *want = calloc((size_t)E, sizeof(double));
    float *row = malloc(sizeof(float) * (size_t)E), *normed = malloc(sizeof(float) * (size_t)E);
    const int32_t bos = tokd_token_bos(m->tok);
    for (int k = 0; k < chunks; k++)
        for (int i = 0; i < 32; i++) {
            int32_t t = i == 0 && toks[0] == bos ? bos : toks[k * 32 + i];
            m->tok_embd.tt->to_float((const uint8_t *)m->tok_embd.data + (size_t)t * m->tok_embd.row_bytes, row, E);
            tokd_rmsnorm(normed, row, m->layers[0].attn_norm, E, m->hp.norm_eps);
            for (int j = 0; j < E; j++) want[j] += (double)normed[j] * normed[j];
        }
    double worst = 0;
    const char *qkv[3] = {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"};
    for (int w = 0; w < 3; w++) {
        const tokd_imatrix_entry *e = tokd_imatrix_find(im, qkv[w]);
        CHECK(e && e->n == E, "%s: %d values", qkv[w], E);
        for (int j = 0; e && j < E; j++) {
            double mean = want[j] / (chunks * 32), r = fabs(e->values[j] - mean) / (mean > 1e-30 ? mean : 1e-30);
            if (r > worst) worst = r;
        }
    }
    CHECK(worst < 1e-5, "layer 0's attention input: mean squares within %.2g of the direct sum", worst);
    const tokd_imatrix_entry *down = tokd_imatrix_find(im, "blk.0.ffn_down.weight");
    CHECK(down && down->n == m->hp.n_ff, "ffn_down's entry has the FFN's width");
    /* the files give back the same values (GGUF bit for bit; the legacy file within its
       float rounding, mean * ncall / ncall) and the quantiser takes them */
    const tokd_imatrix_format fmts[2] = {TOKD_IMATRIX_GGUF, TOKD_IMATRIX_DAT};
    const char *files[2] = {"computed.gguf", "computed.dat"};
    for (int f = 0; f < 2; f++) {
        CHECK(tokd_imatrix_write(im, files[f], fmts[f], 32, &err) == 0, "write %s: %s", files[f], err.msg);
        tokd_imatrix *back = tokd_imatrix_load(files[f], &err);
        bool same = back && back->n_entries == im->n_entries && back->chunks == chunks && !strcmp(back->dataset, "story.txt");
        double dev = 0;
        for (size_t i = 0; same && i < im->n_entries; i++) {
            const tokd_imatrix_entry *x = &im->entries[i], *y = &back->entries[i];
            same = !strcmp(x->name, y->name) && x->n == y->n;
            for (int64_t j = 0; same && j < x->n; j++) {
                if (f == 0) same = !memcmp(&x->values[j], &y->values[j], sizeof(float)) && y->counts[0] == chunks * 32;
                double r = fabs((double)x->values[j] - y->values[j]) / fmax(fabs((double)x->values[j]), 1e-30);
                if (r > dev) dev = r;
            }
        }
        CHECK(same && dev <= 3e-7, "%s reads back as the collector's result (largest deviation %.2g)", files[f], dev);
        tokd_imatrix_free(back);
    }
    const tokd_quantize_opts with = {.imatrix = "computed.gguf"};
    CHECK(tokd_quantize_file_opts(src, "computed-Q4_K_M.gguf", "Q4_K_M", &with, 2, NULL, &err) == 0 &&
              !same_tensors("computed-Q4_K_M.gguf", "plain-Q4_K_M.gguf"),
          "quantized with the computed matrix: %s", err.msg);
    /* the perplexity, as llama-imatrix prints it: each chunk's positions 16..30 scored on
       the next token; against the logits of each whole chunk in one batch, scored here in
       double; and the matrix the same with it as without */
    tokd_imatrix_collector *cp = tokd_imatrix_collector_new(m, false);
    tokd_imatrix_ppl ppl;
    CHECK(tokd_imatrix_compute(m, text, strlen(text), &p, cp, &ppl, NULL, &err) == chunks, "again, with the perplexity");
    tokd_imatrix *imp = tokd_imatrix_collector_result(cp, "story.txt", chunks);
    bool same_m = imp->n_entries == im->n_entries;
    for (size_t i = 0; same_m && i < im->n_entries; i++)
        same_m = !memcmp(imp->entries[i].values, im->entries[i].values, sizeof(float) * (size_t)im->entries[i].n);
    CHECK(same_m, "the matrix is the same with the perplexity as without");
    tokd_ctx_params ctxp;
    tokd_ctx_params_default(&ctxp);
    ctxp.n_ctx = ctxp.n_batch = 32;
    ctxp.n_threads = 2;
    tokd_ctx *ctx = tokd_ctx_new(m, &ctxp, &err);
    const int V = m->hp.n_vocab;
    float *lg = malloc(sizeof(float) * 32 * (size_t)V);
    double nll = 0, nll2 = 0;
    int64_t n_scored = 0;
    for (int k = 0; ctx && k < chunks; k++) {
        tokd_batch_entry b[32];
        for (int i = 0; i < 32; i++) b[i] = (tokd_batch_entry){i == 0 && toks[0] == bos ? bos : toks[k * 32 + i], i, 0, true};
        tokd_seq_truncate(ctx, 0, 0);
        CHECK(tokd_forward(ctx, b, 32, lg, &err) == 0, "forward chunk %d", k);
        for (int i = 16; i < 31; i++) {
            const float *row = lg + (size_t)i * V;
            double mx = row[0], z = 0;
            for (int j = 1; j < V; j++) mx = fmax(mx, row[j]);
            for (int j = 0; j < V; j++) z += exp((double)row[j] - mx);
            const double v = log(z) - ((double)row[toks[k * 32 + i + 1]] - mx);
            nll += v;
            nll2 += v * v;
            n_scored++;
        }
    }
    CHECK(ppl.n == n_scored && n_scored == (int64_t)chunks * 15 && fabs(ppl.nll - nll) <= 1e-6 * nll &&
              fabs(ppl.nll2 - nll2) <= 1e-6 * nll2,
          "perplexity over %lld positions: nll %.9g against %.9g", (long long)ppl.n, ppl.nll, nll);
    free(lg);
    tokd_ctx_free(ctx);
    tokd_imatrix_free(imp);
    tokd_imatrix_collector_free(cp);
    tokd_imatrix_free(im);
    tokd_imatrix_collector_free(c);
    /* with the output (tiny-llama's is not tied) */
    c = tokd_imatrix_collector_new(m, true);
    CHECK(tokd_imatrix_compute(m, text, strlen(text), &p, c, NULL, NULL, &err) == chunks, "again, with the output");
    im = tokd_imatrix_collector_result(c, "", chunks);
    const tokd_imatrix_entry *out = tokd_imatrix_find(im, "output.weight");
    CHECK(im->n_entries == (size_t)(7 * L + 1) && out && out->n == E, "--process-output adds output.weight");
    tokd_imatrix_free(im);
    tokd_imatrix_collector_free(c);
    /* a text shorter than a chunk */
    c = tokd_imatrix_collector_new(m, false);
    CHECK(tokd_imatrix_compute(m, "Too short.", 10, &p, c, NULL, NULL, &err) < 0 && strstr(err.msg, "fewer than one chunk"),
          "short text refused: %s", err.msg);
    im = tokd_imatrix_collector_result(c, "", 0);
    CHECK(im->n_entries == 0 && tokd_imatrix_write(im, "empty.imatrix", TOKD_IMATRIX_GGUF, 32, &err) != 0 &&
              access("empty.imatrix", F_OK) != 0 && access("empty.imatrix.tmp", F_OK) != 0,
          "nothing collected, nothing written: %s", err.msg);
    tokd_imatrix_free(im);
    tokd_imatrix_collector_free(c);
    free(want);
    free(row);
    free(normed);
    free(toks);
    tokd_model_free(m);
}

/* ---- combining and writing matrices (tokd imatrix --in-file, --output-format) ------- */

static bool same_file(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *x = tokd_read_file(a, &na), *y = tokd_read_file(b, &nb);
    bool same = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}

static bool values_are(const tokd_imatrix *im, const char *name, const float *want, int64_t n) {
    const tokd_imatrix_entry *e = tokd_imatrix_find(im, name);
    return e && e->n == n && !memcmp(e->values, want, (size_t)n * sizeof *want);
}

static void check_combine(void) {
    tokd_err err;
    /* a plain matrix and one of two experts, the second never reached */
    tokd_imatrix *a = tokd_imatrix_new();
    const double s1[4] = {2, 4, 6, 8}, c1[1] = {2}, s2[6] = {1, 2, 3, 10, 20, 30}, c2[2] = {1, 0};
    tokd_imatrix_add(a, "blk.1.x.weight", s1, 4, c1, 1);
    tokd_imatrix_add(a, "blk.0.exps.weight", s2, 6, c2, 2);
    tokd_imatrix_add_dataset(a, "one.txt");
    tokd_imatrix_add_dataset(a, "");
    a->chunks = 3;
    const float vx[4] = {1, 2, 3, 4}, ve[6] = {1, 2, 3, 1, 1, 1};
    CHECK(values_are(a, "blk.1.x.weight", vx, 4) && values_are(a, "blk.0.exps.weight", ve, 6) && a->n_datasets == 1,
          "values: sum / count, 1 for an expert never reached; an empty dataset name is not added");

    /* GGUF: llama-imatrix's keys, entries sorted by name, sums [n / experts, experts] and
       counts [1, experts] */
    CHECK(tokd_imatrix_write(a, "comb.gguf", TOKD_IMATRIX_GGUF, 64, &err) == 0, "write GGUF: %s", err.msg);
    gguf_file *f = gguf_open("comb.gguf", &err);
    CHECK(f != NULL, "the GGUF file opens: %s", f ? "" : err.msg);
    if (f) {
        gguf_str type = {0};
        uint32_t cs = 0, cc = 0;
        gguf_array ds = {0};
        CHECK(gguf_get_str(f, "general.type", &type, &err) == 0 && gguf_str_eq(type, "imatrix") &&
                  gguf_get_u32(f, "imatrix.chunk_size", &cs, &err) == 0 && cs == 64 &&
                  gguf_get_u32(f, "imatrix.chunk_count", &cc, &err) == 0 && cc == 3 &&
                  gguf_get_arr(f, "imatrix.datasets", GGUF_TYPE_STRING, &ds, &err) == 0 && ds.n == 1 &&
                  gguf_str_eq(ds.strs[0], "one.txt"),
              "GGUF keys: type, chunk size %u, chunk count %u, %llu datasets", cs, cc, (unsigned long long)ds.n);
        const char *names[4] = {"blk.0.exps.weight.in_sum2", "blk.0.exps.weight.counts", "blk.1.x.weight.in_sum2",
                                "blk.1.x.weight.counts"};
        const uint64_t shapes[4][2] = {{3, 2}, {1, 2}, {4, 1}, {1, 1}};
        bool ok = f->n_tensors == 4;
        for (int i = 0; ok && i < 4; i++)
            ok = gguf_str_eq(f->tensors[i].name, names[i]) && f->tensors[i].type == GGML_TYPE_F32 &&
                 f->tensors[i].ne[0] == shapes[i][0] && f->tensors[i].ne[1] == shapes[i][1];
        float counts[2];
        if (ok) memcpy(counts, f->tensors[1].data, sizeof counts);
        CHECK(ok && counts[0] == 1 && counts[1] == 0, "GGUF tensors: names, order, shapes, counts");
        gguf_close(f);
    }
    tokd_imatrix *g = tokd_imatrix_load("comb.gguf", &err);
    bool same = g && !g->counts_are_calls && g->n_entries == 2 && g->chunks == 3 && !strcmp(g->dataset, "one.txt");
    for (size_t i = 0; same && i < 2; i++) {
        const tokd_imatrix_entry *x = tokd_imatrix_find(a, g->entries[i].name), *y = &g->entries[i];
        same = x && x->n == y->n && x->n_mat == y->n_mat && !memcmp(x->values, y->values, (size_t)x->n * sizeof(float));
        for (int64_t j = 0; same && j < x->n; j++) same = x->sums[j] == y->sums[j];
        for (int64_t j = 0; same && j < x->n_mat; j++) same = x->counts[j] == y->counts[j];
    }
    CHECK(same, "the GGUF file reads back: sums, counts, experts, values, chunks, dataset");
    CHECK(tokd_imatrix_write(g, "comb2.gguf", TOKD_IMATRIX_GGUF, 64, &err) == 0 && same_file("comb.gguf", "comb2.gguf"),
          "written again, the same bytes");

    /* the legacy file: ncall = ceil(largest count / chunk size), each value mean * ncall
       (1 * ncall where never reached), then the chunk count and the last dataset */
    CHECK(tokd_imatrix_write(a, "comb.dat", TOKD_IMATRIX_DAT, 1, &err) == 0, "write legacy: %s", err.msg);
    size_t len = 0;
    char *bytes = tokd_read_file("comb.dat", &len);
    tokd_buf want = {0};
    const float sx[4] = {2, 4, 6, 8}, se[6] = {1, 2, 3, 1, 1, 1};
    put_i32(&want, 2);
    put_entry(&want, "blk.0.exps.weight", 1, se, 6);
    put_entry(&want, "blk.1.x.weight", 2, sx, 4);
    put_i32(&want, 3);
    put_i32(&want, 7);
    tokd_buf_append(&want, "one.txt", 7);
    CHECK(bytes && len == want.len && !memcmp(bytes, want.data, len), "the legacy file's bytes (%zu against %zu)", len,
          want.len);
    free(bytes);
    tokd_buf_free(&want);
    CHECK(tokd_imatrix_write(a, "comb3.dat", TOKD_IMATRIX_DAT, 3, &err) == 0, "write legacy, chunk 3: %s", err.msg);
    tokd_imatrix *d3 = tokd_imatrix_load("comb3.dat", &err);
    CHECK(d3 && d3->entries[0].counts[0] == 1 && d3->entries[1].counts[0] == 1 && values_are(d3, "blk.1.x.weight", vx, 4),
          "ncall rounded up (2 tokens over chunks of 3: 1 call), the values unchanged");
    tokd_imatrix_free(d3);
    tokd_imatrix *d = tokd_imatrix_load("comb.dat", &err);
    CHECK(d && d->counts_are_calls && values_are(d, "blk.1.x.weight", vx, 4) && values_are(d, "blk.0.exps.weight", ve, 6),
          "the legacy file reads back with the same values");
    CHECK(d && tokd_imatrix_write(d, "raw.gguf", TOKD_IMATRIX_GGUF, 64, &err) != 0 && strstr(err.msg, "combine") &&
              access("raw.gguf", F_OK) != 0,
          "a legacy file's matrix is not written as it is: %s", err.msg);

    /* combining: sums and counts add, a legacy file's scaled by the chunk size, and its
       single count broadcast to the experts */
    tokd_imatrix *all = tokd_imatrix_new();
    CHECK(tokd_imatrix_combine(all, a, 10, &err) == 0 && d && tokd_imatrix_combine(all, d, 10, &err) == 0,
          "combine: %s", err.msg);
    const tokd_imatrix_entry *ex = tokd_imatrix_find(all, "blk.0.exps.weight"), *xx = tokd_imatrix_find(all, "blk.1.x.weight");
    const float vall[6] = {1, 2, 3, 2, 3, 4};
    CHECK(ex && ex->n_mat == 2 && ex->counts[0] == 11 && ex->counts[1] == 10 && ex->sums[3] == 20 && xx &&
              xx->counts[0] == 22 && xx->sums[3] == 88 && values_are(all, "blk.1.x.weight", vx, 4) &&
              values_are(all, "blk.0.exps.weight", vall, 6),
          "combined: counts %g %g and %g", ex ? ex->counts[0] : -1, ex ? ex->counts[1] : -1, xx ? xx->counts[0] : -1);
    CHECK(all->chunks == 6 && all->n_datasets == 2 && !strcmp(all->dataset, "one.txt, one.txt"),
          "chunks add (%d), datasets follow one another ('%s')", all->chunks, all->dataset);
    tokd_imatrix *one = tokd_imatrix_new(); /* one count meeting per-expert counts */
    const double c4[1] = {4};
    tokd_imatrix_add(one, "blk.0.exps.weight", s2, 6, c4, 1);
    CHECK(tokd_imatrix_combine(one, a, 1, &err) == 0 && one->entries[0].n_mat == 2 && one->entries[0].counts[0] == 5 &&
              one->entries[0].counts[1] == 4 && one->n_entries == 2,
          "a single count broadcast to the experts it meets");
    /* sizes that differ are refused, naming the entry, and nothing changes */
    tokd_imatrix *bad = tokd_imatrix_new();
    tokd_imatrix_add(bad, "blk.2.new.weight", s1, 4, c1, 1);
    tokd_imatrix_add(bad, "blk.1.x.weight", s1, 3, c1, 1);
    const size_t before = all->n_entries;
    CHECK(tokd_imatrix_combine(all, bad, 1, &err) != 0 && strstr(err.msg, "blk.1.x.weight") && all->n_entries == before &&
              values_are(all, "blk.1.x.weight", vx, 4) && all->chunks == 6,
          "a size mismatch refused, the matrix unchanged: %s", err.msg);
    /* a write that cannot happen leaves nothing, and an earlier file as it was */
    CHECK(tokd_imatrix_write(all, "no/such/dir/x.gguf", TOKD_IMATRIX_GGUF, 1, &err) != 0 && access("no", F_OK) != 0,
          "an unwritable path: %s", err.msg);
    CHECK(tokd_write_file("kept.gguf", "old", 3, &err) == 0 && mkdir("kept.gguf.tmp", 0700) == 0 &&
              tokd_imatrix_write(all, "kept.gguf", TOKD_IMATRIX_GGUF, 1, &err) != 0,
          "a write whose temporary file cannot be made fails: %s", err.msg);
    bytes = tokd_read_file("kept.gguf", &len);
    CHECK(bytes && len == 3 && !memcmp(bytes, "old", 3), "and leaves the earlier file as it was");
    free(bytes);
    tokd_imatrix_free(bad);
    tokd_imatrix_free(one);
    tokd_imatrix_free(all);
    tokd_imatrix_free(d);
    tokd_imatrix_free(g);
    tokd_imatrix_free(a);
}

/* --show-statistics' numbers (imatrix_stats.h) on a matrix worked out by hand. */
static void check_statistics(void) {
    tokd_imatrix *im = tokd_imatrix_new();
    const double s0[4] = {1, 2, 3, 4}, s1[4] = {2, 4, 6, 8}, s2[4] = {4, 3, 2, 1}, sx[4] = {9, 9, 4, 8}, so[2] = {3, 3};
    const double two = 2, one = 1, zero = 0, x_counts[2] = {0, 4};
    tokd_imatrix_add(im, "blk.0.attn_q.weight", s0, 4, &two, 1);  /* E[x²] .5 1 1.5 2 */
    tokd_imatrix_add(im, "blk.1.attn_q.weight", s1, 4, &two, 1);  /* 1 2 3 4: parallel to layer 0's */
    tokd_imatrix_add(im, "blk.2.attn_q.weight", s2, 4, &one, 1);  /* 4 3 2 1: cos 20/30 with layer 1's */
    tokd_imatrix_add(im, "blk.1.ffn_up.weight", sx, 4, x_counts, 2); /* expert 0 never reached: 1 2 */
    tokd_imatrix_add(im, "output.weight", so, 2, &one, 1);
    tokd_imatrix_add(im, "blk.3.attn_k.weight", s0, 4, &zero, 1); /* nothing counted: left out */
    tokd_imatrix_report r;
    tokd_imatrix_report_make(im, &r);
    const char *order[] = {"blk.1.attn_q.weight", "blk.2.attn_q.weight", "blk.0.attn_q.weight", "blk.1.ffn_up.weight",
                           "output.weight"};
    bool in_order = r.n_entries == 5;
    for (size_t i = 0; in_order && i < 5; i++) in_order = !strcmp(r.entries[i].entry->name, order[i]);
    CHECK(in_order, "statistics: %zu entries, by tensor then by sum (largest first, ties by name)", r.n_entries);
    if (in_order) {
        const tokd_imatrix_stat *a = &r.entries[2], *b = &r.entries[0], *c = &r.entries[1], *x = &r.entries[3], *o = &r.entries[4];
        const double h = -(0.1 * log2(0.1) + 0.2 * log2(0.2) + 0.3 * log2(0.3) + 0.4 * log2(0.4));
        CHECK(a->n == 4 && a->sum == 5 && a->min == 0.5 && a->max == 2 && fabs(a->mean - 1.25) < 1e-12 &&
                  fabs(a->std - sqrt(1.25 / 3)) < 1e-12 && fabs(a->entropy - h) < 1e-12 && a->zd == 0.5 && a->cossim == 0 &&
                  a->layer == 0 && a->tensor_len == 6 && !strncmp(a->tensor, "attn_q", 6),
              "statistics of layer 0's attn_q: n %lld sum %g min %g max %g mean %g std %g H %g zd %g cos %g", (long long)a->n,
              a->sum, a->min, a->max, a->mean, a->std, a->entropy, a->zd, a->cossim);
        CHECK(fabs(b->cossim - 1) < 1e-12 && fabs(c->cossim - 20.0 / 30.0) < 1e-12, "cosine with the layer before: %g, %g",
              b->cossim, c->cossim);
        CHECK(x->n == 2 && x->sum == 3 && x->min == 1 && x->cossim == 0, "an expert never reached is left out: n %lld sum %g",
              (long long)x->n, x->sum);
        CHECK(o->layer == -1 && o->tensor_len == 6 && !strncmp(o->tensor, "output", 6) && o->std == 0 && o->zd == 0,
              "a tensor outside the blocks: layer %d", o->layer);
    }
    const bool layers = r.n_layers == 3 && r.layers[0].layer == 0 && r.layers[1].layer == 1 && r.layers[2].layer == 2 &&
                        r.layers[1].sum == 13 && r.layers[1].n == 6 && fabs(r.layers[1].cossim - 1) < 1e-12 &&
                        r.layers[0].cossim == 0 && fabs(r.layers[2].cossim - 20.0 / 30.0) < 1e-12 &&
                        fabs(r.layers[1].zd - (0.5 * 4 + 0 * 2) / 6) < 1e-12;
    CHECK(layers, "layer statistics: %zu layers (layer 1: sum %g, n %lld, cos %g, zd %g)", r.n_layers,
          r.n_layers > 1 ? r.layers[1].sum : 0, r.n_layers > 1 ? (long long)r.layers[1].n : 0,
          r.n_layers > 1 ? r.layers[1].cossim : 0, r.n_layers > 1 ? r.layers[1].zd : 0);
    tokd_imatrix_report_free(&r);
    tokd_imatrix_free(im);
}

int main(void) {
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(tmpdir, sizeof tmpdir, "%s/tokd-test-imatrix-%d", base, (int)getpid());
    char cmd[512];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", tmpdir);
    CHECK(system(cmd) == 0, "mkdir %s", tmpdir);
    tokd_kernels_init();
    check_legacy();
    check_gguf();
    check_rules();
    check_zero_blocks();
    check_statistics();
    char rel[512], src[4096];
    snprintf(rel, sizeof rel, "%s/models/tiny-llama-f32.gguf", t_shared());
    CHECK(realpath(rel, src) != NULL, "find %s", rel); /* check_quantize works in tmpdir */
    check_quantize(src);
    CHECK(chdir(tmpdir) == 0, "chdir %s", tmpdir);
    check_collect(src);
    check_combine();
    if (!t_failed) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        CHECK(system(cmd) == 0, "cleanup");
    } else {
        fprintf(stderr, "left %s for a look\n", tmpdir);
    }
    T_DONE();
}
