/* test_batch.c — batch invariance: a sequence's logits are bit-identical whether it is
 * evaluated alone in one pass, in prefill chunks of 1, 7 or 64 tokens, beside three
 * other sequences in mixed batches, or with a different thread count. Covered for
 * several weight types (F32, F16, BF16, Q8_0 and Q4_0 — packed where the CPU has the
 * kernels — Q4_K_M mix, and Q5_K_M, Q3_K, Q2_K, Q5_0, Q4_1 and Q5_1 files quantized here), both RoPE styles,
 * a tied output matrix (tiny-qwen2-Q8_0), and an output whose height is not a multiple of
 * 16 (a synthesised 517-token vocabulary: packed with a padded last group).
 * Those four types have packed forms on the AVX-512 VNNI path and the AVX2 one (also
 * under TOKD_KERNELS=avx2), and their matrices must be packed there, unpacked on the
 * scalar path. For the K-quants packing changes no bit: those files give the same logits
 * unpacked (TOKD_REPACK=0); Q5_0's, Q4_1's and Q5_1's packed forms sum in another order (packed.h), so their
 * logits agree to rounding. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "kernels/packed.h"
#include "kernels/types.h"
#include "model.h"
#include "quantize.h"
#include "synth.h"
#include "t.h"
#include "t_rand.h"

#define N_TOK 100
#define N_SEQ 4

static int32_t tokens[N_SEQ][N_TOK];

static tokd_ctx *new_ctx(const tokd_model *m, int n_threads, int n_batch) {
    tokd_ctx_params p;
    tokd_ctx_params_default(&p);
    p.n_ctx = 256;
    p.n_seq = N_SEQ;
    p.n_batch = n_batch;
    p.n_threads = n_threads;
    tokd_err err;
    tokd_ctx *c = tokd_ctx_new(m, &p, &err);
    if (!c) fprintf(stderr, "ctx: %s\n", err.msg);
    return c;
}

/* Evaluate seq 0 alone in chunks of `chunk`, all logits into out (N_TOK x V). */
static int run_chunked(const tokd_model *m, int chunk, int n_threads, float *out) {
    tokd_ctx *c = new_ctx(m, n_threads, 128);
    int32_t V = m->hp.n_vocab;
    tokd_batch_entry b[128];
    tokd_err err;
    for (int i = 0; i < N_TOK; i += chunk) {
        int n = N_TOK - i < chunk ? N_TOK - i : chunk;
        for (int k = 0; k < n; k++) b[k] = (tokd_batch_entry){tokens[0][i + k], i + k, 0, true};
        if (tokd_forward(c, b, n, out + (size_t)i * V, &err)) {
            fprintf(stderr, "forward: %s\n", err.msg);
            tokd_ctx_free(c);
            return -1;
        }
    }
    tokd_ctx_free(c);
    return 0;
}

/* All four sequences at once: each step takes a varying number of tokens from each
 * sequence (so seq 0's rows land at different batch offsets beside different
 * neighbours); seq 0's logits gathered into out. */
static int run_mixed(const tokd_model *m, float *out) {
    tokd_ctx *c = new_ctx(m, 2, 128);
    int32_t V = m->hp.n_vocab;
    tokd_batch_entry b[128];
    int done[N_SEQ] = {0};
    int32_t owner[128], pos_of[128];
    float *lg = malloc(sizeof(float) * 128 * (size_t)V);
    tokd_err err;
    int step = 0, rc = 0;
    while (done[0] < N_TOK || done[1] < N_TOK || done[2] < N_TOK || done[3] < N_TOK) {
        int n = 0;
        for (int s = N_SEQ - 1; s >= 0; s--) { /* seq 0 last: never at batch offset 0 */
            int take = 1 + (step * 5 + s * 3) % 23;
            for (int k = 0; k < take && done[s] < N_TOK && n < 128; k++) {
                owner[n] = s;
                pos_of[n] = done[s];
                b[n] = (tokd_batch_entry){tokens[s][done[s]], done[s], s, true};
                done[s]++;
                n++;
            }
        }
        if (tokd_forward(c, b, n, lg, &err)) {
            fprintf(stderr, "forward: %s\n", err.msg);
            rc = -1;
            break;
        }
        for (int i = 0; i < n; i++)
            if (owner[i] == 0) memcpy(out + (size_t)pos_of[i] * V, lg + (size_t)i * V, sizeof(float) * (size_t)V);
        step++;
    }
    free(lg);
    tokd_ctx_free(c);
    return rc;
}

/* A model file of ../shared/models, or (with a '/') any path. */
/* Packed logits a against unpacked b: another summation order, so not the same bits, but
 * within 2 % of the largest logit. */
static void check_within_rounding(const char *name, const float *a, const float *b, size_t bytes) {
    double worst = 0, top = 0;
    for (size_t k = 0; k < bytes / sizeof(float); k++) {
        double d = fabs((double)a[k] - b[k]);
        worst = d > worst ? d : worst;
        top = fabs(b[k]) > top ? fabs(b[k]) : top;
    }
    CHECK(worst <= 0.02 * top && memcmp(a, b, bytes) != 0,
          "%s: packed logits within %.2g of unpacked (max |logit| %.3g), in another summation order", name, worst, top);
}

/* ../shared/models/FILE into path (a name with a '/' is a path already). */
static const char *model_path(char path[512], const char *file) {
    if (strchr(file, '/')) snprintf(path, 512, "%s", file);
    else snprintf(path, 512, "%s/models/%s", t_shared(), file);
    return path;
}

static void check_model(const char *file) {
    char path[512];
    model_path(path, file);
    tokd_err err;
    tokd_model *m = tokd_model_load(path, &err);
    CHECK(m != NULL, "load %s: %s", file, m ? "" : err.msg);
    if (!m) return;
    int32_t V = m->hp.n_vocab;
    size_t bytes = sizeof(float) * (size_t)N_TOK * (size_t)V;
    float *ref = malloc(bytes), *got = malloc(bytes);
    CHECK(run_chunked(m, N_TOK, 2, ref) == 0, "%s: one pass", file);
    const int chunks[] = {1, 7, 64};
    for (int i = 0; i < 3; i++) {
        memset(got, 0, bytes);
        CHECK(run_chunked(m, chunks[i], 2, got) == 0 && memcmp(ref, got, bytes) == 0,
              "%s: chunks of %d are bit-identical to one pass", file, chunks[i]);
    }
    memset(got, 0, bytes);
    CHECK(run_chunked(m, 7, 1, got) == 0 && memcmp(ref, got, bytes) == 0, "%s: 1 thread equals 2 threads", file);
    memset(got, 0, bytes);
    CHECK(run_mixed(m, got) == 0 && memcmp(ref, got, bytes) == 0, "%s: beside three other sequences", file);
    /* and the check can fail: a different prompt gives different logits */
    int32_t saved = tokens[0][50];
    tokens[0][50] = (saved + 1) % V;
    run_chunked(m, 64, 2, got);
    tokens[0][50] = saved;
    CHECK(memcmp(ref, got, bytes) != 0, "%s: a changed token changes the logits", file);
    free(ref);
    free(got);
    tokd_model_free(m);
}

/* path loaded twice: packed where this CPU packs its types, and plain (TOKD_REPACK=0). */
static void load_both(const char *path, tokd_model **packed, tokd_model **plain) {
    tokd_err err;
    *packed = tokd_model_load(path, &err);
    setenv("TOKD_REPACK", "0", 1);
    *plain = tokd_model_load(path, &err);
    unsetenv("TOKD_REPACK");
}

/* path's output matrix packed (where the CPU packs its type) and its logits within
 * rounding of the same model unpacked (TOKD_REPACK=0): another summation order. */
static void check_packed_vs_plain(const char *path, int packs, const char *what) {
    tokd_model *packed, *plain;
    load_both(path, &packed, &plain);
    CHECK(packed && plain, "%s: load twice", what);
    if (packed && plain) {
        CHECK((packed->output.pk != NULL) == packs && plain->output.pk == NULL, "%s: output %s", what,
              packs ? "packed" : "unpacked");
        const size_t bytes = sizeof(float) * (size_t)N_TOK * (size_t)packed->hp.n_vocab;
        float *a = malloc(bytes), *b = malloc(bytes);
        CHECK(run_chunked(packed, 7, 2, a) == 0 && run_chunked(plain, 7, 2, b) == 0, "%s: run", what);
        double worst = 0, top = 0;
        for (size_t k = 0; k < bytes / sizeof(float); k++) {
            double d = fabs((double)a[k] - b[k]);
            worst = d > worst ? d : worst;
            top = fabs(b[k]) > top ? fabs(b[k]) : top;
        }
        CHECK(worst <= 0.02 * top, "%s: packed logits within %.2g of unpacked (max |logit| %.3g)", what, worst, top);
        free(a);
        free(b);
    }
    tokd_model_free(packed);
    tokd_model_free(plain);
}

/* Whether models a and b (the same shape) give the same logits, bit for bit, in chunks
 * of 7 rows (the few-row decode walk: matmul.c, weight rows outermost). */
static bool same_logits(const tokd_model *a, const tokd_model *b) {
    const size_t bytes = sizeof(float) * (size_t)N_TOK * (size_t)a->hp.n_vocab;
    float *la = malloc(bytes), *lb = malloc(bytes);
    const bool same = run_chunked(a, 7, 2, la) == 0 && run_chunked(b, 7, 2, lb) == 0 && memcmp(la, lb, bytes) == 0;
    free(la);
    free(lb);
    return same;
}

/* Matrices without a packed form (F32, F16, BF16) are copied into the arena as the
 * file has them (model.c), so that decode reads them from huge pages too: every matrix
 * of such a model lies in the arena with the file's bytes, and its logits are the same
 * bits as from the file's mapping (TOKD_REPACK=0, which copies nothing). Chunks of 7
 * rows run the few-row decode walk (matmul.c: weight rows outermost). */
static void check_float_copy(const char *file) {
    char path[512];
    tokd_model *copied, *plain;
    load_both(model_path(path, file), &copied, &plain);
    CHECK(copied && plain, "%s: load twice", file);
    if (!copied || !plain) return;
    const uint8_t *at = copied->packed, *end = at + copied->packed_bytes;
    int inside = at != NULL && plain->packed == NULL;
    for (int32_t l = 0; l < copied->hp.n_layer; l++) {
        const tokd_layer *L = &copied->layers[l], *P = &plain->layers[l];
        const tokd_matrix *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        const tokd_matrix *ps[] = {&P->wq, &P->wk, &P->wv, &P->wo, &P->w_gate, &P->w_up, &P->w_down};
        for (int k = 0; k < 7; k++) {
            const uint8_t *d = ws[k]->data;
            const size_t len = ws[k]->row_bytes * (size_t)ws[k]->n_out;
            inside &= ws[k]->pk == NULL && d >= at && d + len <= end && ((uintptr_t)d & 63) == 0 &&
                      memcmp(d, ps[k]->data, len) == 0;
        }
    }
    const uint8_t *out = copied->output.data;
    const size_t out_len = copied->output.row_bytes * (size_t)copied->output.n_out;
    inside &= out >= at && out + out_len <= end && memcmp(out, plain->output.data, out_len) == 0 &&
              (!copied->tied_output || copied->output.data == copied->tok_embd.data);
    CHECK(inside, "%s: every matrix copied into the arena with the file's bytes (and none with TOKD_REPACK=0)", file);
    tokd_model_info ci, pi;
    tokd_model_get_info(copied, &ci);
    tokd_model_get_info(plain, &pi);
    CHECK(ci.copied_bytes == copied->packed_bytes && ci.copied_bytes > 0 && ci.copied_bytes <= ci.weight_bytes &&
              pi.copied_bytes == 0,
          "%s: tokd_model_get_info reports the copy (%llu of %llu bytes)", file, (unsigned long long)ci.copied_bytes,
          (unsigned long long)ci.weight_bytes);
    CHECK(same_logits(copied, plain), "%s: the copies give the file's rows' logits, bit for bit", file);
    tokd_model_free(copied);
    tokd_model_free(plain);
}

/* tokd_model_load_uncopied (tokd info): the same description as tokd_model_load, the copy
 * it would make counted but not made; every matrix left in the file's mapping and
 * layout, so that its logits are those of TOKD_REPACK=0, bit for bit. */
static void check_uncopied(const char *file) {
    char path[512];
    tokd_err err;
    tokd_model *copied, *plain, *unc = tokd_model_load_uncopied(model_path(path, file), &err);
    load_both(path, &copied, &plain);
    CHECK(copied && plain && unc, "%s: load three ways", file);
    if (!copied || !plain || !unc) return;
    tokd_model_info ci, ui;
    tokd_model_get_info(copied, &ci);
    tokd_model_get_info(unc, &ui);
    CHECK(ui.copied_bytes == ci.copied_bytes && ci.copied_bytes == copied->packed_bytes && ci.copied_bytes > 0 &&
              ui.weight_bytes == ci.weight_bytes && ui.n_layer == ci.n_layer && unc->packed == NULL,
          "%s: uncopied, the copy's %llu bytes reported (%llu) and none made", file, (unsigned long long)ci.copied_bytes,
          (unsigned long long)ui.copied_bytes);
    const uint8_t *map = unc->gguf->map, *map_end = map + unc->gguf->size;
    int in_file = 1;
    for (int32_t l = 0; l < unc->hp.n_layer; l++) {
        const tokd_layer *L = &unc->layers[l];
        const tokd_matrix *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (int k = 0; k < 7; k++)
            in_file &= ws[k]->pk == NULL && (const uint8_t *)ws[k]->data >= map && (const uint8_t *)ws[k]->data < map_end;
    }
    in_file &= unc->output.pk == NULL && (const uint8_t *)unc->tok_embd.data >= map;
    CHECK(in_file, "%s: uncopied, every matrix in the file's mapping, none packed", file);
    CHECK(same_logits(unc, plain), "%s: uncopied, the logits of TOKD_REPACK=0 bit for bit", file);
    tokd_model_free(unc);
    tokd_model_free(copied);
    tokd_model_free(plain);
}

/* A model of 32 MB or more (TOKD_LARGE_MODEL_BYTES, 0 here) is copied on every core,
 * each matrix's file pages mapped before its copy and dropped after it: the same arena,
 * byte for byte, as the one-thread copy of a small model, and the same logits. */
static void check_large_path(const char *file) {
    char path[512];
    tokd_err err;
    tokd_model *small = tokd_model_load(model_path(path, file), &err);
    setenv("TOKD_LARGE_MODEL_BYTES", "0", 1);
    tokd_model *large = tokd_model_load(path, &err);
    unsetenv("TOKD_LARGE_MODEL_BYTES");
    CHECK(small && large, "%s: load as small and as large", file);
    if (!small || !large) return;
    CHECK(small->packed_bytes == large->packed_bytes && small->packed_bytes > 0 &&
              memcmp(small->packed, large->packed, small->packed_bytes) == 0,
          "%s: the large path's arena is the small path's, byte for byte (%zu bytes)", file, large->packed_bytes);
    CHECK(same_logits(small, large), "%s: the large path's logits are the small path's, bit for bit", file);
    tokd_model_free(small);
    tokd_model_free(large);
}

/* A tied output matrix (tiny-qwen2-Q8_0: the embedding table's rows) is packed for the
 * products where its type has a packed form, into the arena's end like an untied output,
 * and the lookups read the same rows from the file's mapping: no second copy of the
 * table. Its logits then follow the packed summation order (within rounding of the
 * unpacked ones), and check_model covers its batch invariance. */
static void check_tied_output(int packs, const char *path) {
    char file[512];
    snprintf(file, sizeof file, "%s/models/tiny-qwen2-Q8_0.gguf", t_shared());
    tokd_model *packed, *plain;
    load_both(file, &packed, &plain);
    CHECK(packed && plain && packed->tied_output, "load the tied tiny-qwen2-Q8_0 twice");
    if (!packed || !plain) return;
    const tokd_matrix *out = &packed->output;
    const size_t embd_bytes = packed->tok_embd.row_bytes * (size_t)packed->tok_embd.n_out;
    CHECK((out->pk != NULL) == packs && plain->output.pk == NULL && out->data == packed->tok_embd.data,
          "tied output %s on the %s path, its rows the embedding table's", packs ? "packed" : "unpacked", path);
    if (packs) {
        const uint8_t *arena = packed->packed, *end = arena + packed->packed_bytes, *p = out->packed;
        const size_t len = out->group_bytes * (size_t)(out->n_out / out->pk->group_rows);
        const uint8_t *rows = packed->tok_embd.data;
        CHECK(p >= arena && p + len <= end && end - (p + len) < 64 && (rows + embd_bytes <= arena || rows >= end),
              "tied output packed last in the arena, the embedding rows outside it (no second copy)");
    }
    CHECK(memcmp(packed->tok_embd.data, plain->tok_embd.data, embd_bytes) == 0, "tied embedding rows as the file has them");
    tokd_model_free(packed);
    tokd_model_free(plain);
    check_packed_vs_plain(file, packs, "tied output");
}

/* Under ThreadSanitizer (make test-tsan) this program is run for its threaded regions,
 * which are the same code for every weight type: there it covers one model of each
 * region kind (float rows, BF16 rows, packed groups, a tied output with biases), one
 * quantized K-quant mix and one IQ4 file; the plain and ASan builds run every type
 * (the full list took 60 s under TSan, this one about 25). */
#ifdef __SANITIZE_THREAD__
enum { EVERY_TYPE = 0 };
#else
enum { EVERY_TYPE = 1 };
#endif
static bool in_tsan_subset(const char *name) {
    static const char *const subset[] = {"tiny-llama-f32.gguf", "tiny-llama-BF16.gguf", "tiny-llama-Q4_0.gguf",
                                         "tiny-qwen2-Q8_0.gguf", "Q5_K_M", "IQ4_XS"};
    for (size_t i = 0; i < sizeof subset / sizeof subset[0]; i++)
        if (!strcmp(name, subset[i])) return true;
    return false;
}
#define RUN_HERE(name) (EVERY_TYPE || in_tsan_subset(name))

int main(void) {
    uint64_t rng = 88172645463325252ull; /* t_rand.h state */
    for (int s = 0; s < N_SEQ; s++)
        for (int i = 0; i < N_TOK; i++) tokens[s][i] = (int32_t)(3 + t_rand_u64(&rng) % 500);
    tokens[0][0] = tokens[1][0] = tokens[2][0] = tokens[3][0] = 1; /* BOS */
    const char *models[] = {"tiny-llama-f32.gguf", "stories260K.gguf", "tiny-llama-F16.gguf", "tiny-llama-BF16.gguf",
                            "tiny-llama-Q8_0.gguf", "tiny-llama-Q4_0.gguf", "tiny-llama-Q4_K_M.gguf",
                            "tiny-qwen2-F16.gguf", "tiny-qwen2-Q8_0.gguf"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        if (RUN_HERE(models[i])) check_model(models[i]);
    const char *float_models[] = {"tiny-llama-f32.gguf", "tiny-llama-F16.gguf", "tiny-llama-BF16.gguf", "tiny-qwen2-F16.gguf"};
    for (size_t i = 0; i < sizeof float_models / sizeof float_models[0]; i++)
        if (RUN_HERE(float_models[i])) check_float_copy(float_models[i]);
    check_uncopied("tiny-llama-Q4_K_M.gguf");
    check_uncopied("tiny-llama-BF16.gguf");
    check_uncopied("tiny-qwen2-Q8_0.gguf");
    check_large_path("tiny-llama-Q4_K_M.gguf");
    check_large_path("tiny-llama-BF16.gguf");
    check_large_path("tiny-qwen2-Q8_0.gguf");

    /* files quantized here (Q5_K_M: Q5_K with Q6_K; Q3_K; Q2_K; Q5_0; Q4_1; Q5_1): batch invariance, and the
       same bits unpacked */
    char dir[] = "/tmp/tokd-test-batch-XXXXXX", src[512], qf[600];
    CHECK(mkdtemp(dir) != NULL, "temporary directory");
    snprintf(src, sizeof src, "%s/models/tiny-llama-f32.gguf", t_shared());
    const struct {
        const char *name;
        uint32_t type;
        int same_bits; /* K-quants: packing keeps the file layout's numerics */
    } quantized[] = {{"Q5_K_M", GGML_TYPE_Q5_K, 1}, {"Q3_K", GGML_TYPE_Q3_K, 1}, {"Q2_K", GGML_TYPE_Q2_K, 1},
                     {"Q5_0", GGML_TYPE_Q5_0, 0}, {"Q4_1", GGML_TYPE_Q4_1, 0}, {"Q5_1", GGML_TYPE_Q5_1, 0}};
    /* every type above is packed on the AVX-512 path (the AVX-512 VNNI forms, or the AVX2
       ones without VNNI) and on the AVX2 path, wherever the CPU has AVX2, FMA and F16C */
    tokd_kernels_init();
    const tokd_cpu_features *cpu = tokd_cpu();
    const char *path = tokd_kernels_path();
    const int packs = (!strcmp(path, "avx2") || !strcmp(path, "avx512")) && cpu->avx2 && cpu->fma && cpu->f16c;
    check_tied_output(packs, path);

    /* a vocabulary that is not a multiple of 16 (517: 32 groups and 5 rows): the output
       packed with its last group padded, batch-invariant, within rounding of unpacked */
    snprintf(qf, sizeof qf, "%s/vocab517.gguf", dir);
    char vocab[600];
    snprintf(vocab, sizeof vocab, "%s/models/stories260K.gguf", t_shared());
    tokd_synth_params sp = {.out_path = qf, .shape = "tiny", .type = "Q4_0", .vocab_path = vocab, .seed = 3, .n_threads = 2,
                            .n_vocab = 517};
    tokd_err serr;
    CHECK(tokd_synth(&sp, &serr) == 0, "synth a 517-token tiny model: %s", serr.msg);
    check_model(qf);
    check_packed_vs_plain(qf, packs, "517-token vocabulary");
    unlink(qf);
    for (size_t i = 0; i < sizeof quantized / sizeof quantized[0]; i++) {
        const char *name = quantized[i].name;
        if (!RUN_HERE(name)) continue;
        snprintf(qf, sizeof qf, "%s/%s.gguf", dir, name);
        tokd_err err;
        CHECK(tokd_quantize_file(src, qf, name, 2, NULL, &err) == 0, "quantize %s: %s", name, err.msg);
        check_model(qf);
        tokd_model *packed, *plain;
        load_both(qf, &packed, &plain);
        CHECK(packed && plain, "load %s twice", name);
        if (packed && plain) {
            const tokd_matrix *wq = &packed->layers[0].wq;
            CHECK(wq->tt->id == quantized[i].type && (wq->pk != NULL) == packs &&
                      (tokd_packed_get_any(quantized[i].type) != NULL) == packs && plain->layers[0].wq.pk == NULL,
                  "%s matrices %s on the %s path, and not with TOKD_REPACK=0", name, packs ? "packed" : "unpacked",
                  path);
            if (packs) { /* one 2 MiB-aligned buffer holds the copies, in the order decode reads them */
                int in_order = ((uintptr_t)packed->packed & (((uintptr_t)2 << 20) - 1)) == 0;
                const uint8_t *at = packed->packed, *end = at + packed->packed_bytes;
                /* the embedding table first, as the file has it (decode reads it first) */
                const size_t embd_bytes = packed->tok_embd.row_bytes * (size_t)packed->tok_embd.n_out;
                in_order &= packed->tok_embd.data == (const void *)at &&
                            memcmp(packed->tok_embd.data, plain->tok_embd.data, embd_bytes) == 0 &&
                            (!packed->tied_output || packed->output.data == packed->tok_embd.data);
                at += embd_bytes;
                for (int32_t l = 0; l < packed->hp.n_layer; l++) {
                    const tokd_layer *L = &packed->layers[l];
                    const tokd_matrix *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
                    for (int k = 0; k < 7; k++) {
                        const uint8_t *p = ws[k]->packed;
                        size_t len = ws[k]->group_bytes * (size_t)(ws[k]->n_out / ws[k]->pk->group_rows);
                        in_order &= p >= at && p + len <= end && ((uintptr_t)p & 63) == 0;
                        at = p + len;
                    }
                }
                CHECK(in_order && plain->packed == NULL, "%s: embedding table and packed copies in one aligned buffer, in forward order",
                      name);
            }
            size_t bytes = sizeof(float) * (size_t)N_TOK * (size_t)packed->hp.n_vocab;
            float *a = malloc(bytes), *b = malloc(bytes);
            CHECK(run_chunked(packed, 7, 2, a) == 0 && run_chunked(plain, 7, 2, b) == 0, "%s: run", name);
            if (quantized[i].same_bits || !wq->pk) { /* no packed form on this path: same matrices */
                CHECK(memcmp(a, b, bytes) == 0, "%s: packed and unpacked matrices give the same logits", name);
            } else {
                /* another summation order (packed.h). The differences grow through the
                   layers: packed Q4_0 and Q8_0 files differ from unpacked by up to 0.9 %
                   of the largest logit here too */
                check_within_rounding(name, a, b, bytes);
            }
            free(a);
            free(b);
        }
        tokd_model_free(packed);
        tokd_model_free(plain);
        unlink(qf);
    }
    /* IQ4_NL and IQ4_XS (packed on AVX-512 VNNI only): batch invariance on every path,
       and packed within rounding of the file layout */
    const int vnni512 = !strcmp(path, "avx512") && cpu->avx512vnni;
    const struct {
        const char *name;
        int packs;
    } iq4[] = {{"IQ4_NL", vnni512}, {"IQ4_XS", vnni512}};
    for (size_t i = 0; i < sizeof iq4 / sizeof iq4[0]; i++) {
        if (!RUN_HERE(iq4[i].name)) continue;
        snprintf(qf, sizeof qf, "%s/%s.gguf", dir, iq4[i].name);
        tokd_err err;
        CHECK(tokd_quantize_file(src, qf, iq4[i].name, 2, NULL, &err) == 0, "quantize %s: %s", iq4[i].name, err.msg);
        check_model(qf);
        tokd_model *packed, *plain;
        load_both(qf, &packed, &plain);
        CHECK(packed && plain && (packed->layers[0].wq.pk != NULL) == iq4[i].packs && plain->layers[0].wq.pk == NULL &&
                  !strcmp(packed->layers[0].wq.tt->name, iq4[i].name),
              "%s matrices %s on the %s path", iq4[i].name, iq4[i].packs ? "packed" : "unpacked", path);
        if (packed && plain && iq4[i].packs) {
            size_t bytes = sizeof(float) * (size_t)N_TOK * (size_t)packed->hp.n_vocab;
            float *a = malloc(bytes), *b = malloc(bytes);
            CHECK(run_chunked(packed, 7, 2, a) == 0 && run_chunked(plain, 7, 2, b) == 0, "%s: run", iq4[i].name);
            check_within_rounding(iq4[i].name, a, b, bytes);
            free(a);
            free(b);
        }
        tokd_model_free(packed);
        tokd_model_free(plain);
        unlink(qf);
    }
    rmdir(dir);
    T_DONE();
}
