/* test_iq_models.c — whole models in the grid types (IQ1_S ... IQ3_S) through the
 * engine: loading, prefill, decode.
 *
 * tokd writes none of these types, so the test builds its files from
 * ../shared/models/tiny-llama-f32.gguf: every matrix becomes random blocks of the type,
 * each scaled to the RMS of the weights it replaces (model A), and a second file holds
 * the same weights dequantized to F32 (model B). Then, for each type:
 *   - A's logits of every prompt position (one batched prefill) against B's: only the
 *     activations' rounding to Q8_K separates them (mean KL <= 1e-3, top-1 >= 90 %);
 *   - decoding the prompt one token at a time gives A's prefill logits bit for bit
 *     (batch invariance);
 *   - two and one threads give the same bits.
 * That llama.cpp's own files load and match its logits is measured outside the tests
 * (BENCHMARKS.md, forty-fourth session); test_quants holds the kernels to llama.cpp's
 * dequantization on fixed blocks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "kernels/quants.h"
#include "kernels/types.h"
#include "model.h"
#include "t.h"
#include "t_golden.h"

static uint64_t rng = 0x853C49E6748FEA9Bull;
static uint64_t next_u64(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

/* Write a block's fp16 super-block scale (IQ1_M keeps it in its scale words' top nibbles). */
static void set_scale(uint32_t type, uint8_t *blk, uint16_t h) {
    if (type != GGML_TYPE_IQ1_M) {
        memcpy(blk, &h, 2);
        return;
    }
    for (int i = 0; i < 4; i++) {
        uint16_t w;
        memcpy(&w, blk + 48 + 2 * i, 2);
        w = (uint16_t)((w & 0x0FFF) | ((h >> 4 * i) & 15) << 12);
        memcpy(blk + 48 + 2 * i, &w, 2);
    }
}

/* Random blocks of `type` for n weights whose RMS is about `rms`; their values in f. */
static void random_blocks(const tokd_type_traits *t, uint8_t *dst, float *f, int64_t n, double rms) {
    for (int64_t b = 0; b < n / 256; b++) {
        uint8_t *blk = dst + (size_t)b * t->bytes;
        for (uint32_t i = 0; i < t->bytes; i++) blk[i] = (uint8_t)(next_u64() >> 32);
        set_scale(t->id, blk, tokd_f32_to_f16(1.0f));
        t->to_float(blk, f + 256 * b, 256);
        double ss = 0;
        for (int i = 0; i < 256; i++) ss += (double)f[256 * b + i] * f[256 * b + i];
        const double unit = sqrt(ss / 256);
        set_scale(t->id, blk, tokd_f32_to_f16((float)(unit > 0 ? rms / unit : 1.0)));
        t->to_float(blk, f + 256 * b, 256);
    }
}

/* Models A (type) and B (A's weights as F32) from the F32 model src. */
static int build_pair(const char *src, uint32_t type, const char *path_a, const char *path_b) {
    tokd_err err;
    gguf_file *f = gguf_open(src, &err);
    if (!f) return -1;
    const tokd_type_traits *t = tokd_type_get(type);
    gguf_writer *wa = gguf_writer_new(), *wb = gguf_writer_new();
    for (uint64_t i = 0; i < f->n_kv; i++) gguf_writer_copy_kv(wa, &f->kv[i]), gguf_writer_copy_kv(wb, &f->kv[i]);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *ts = &f->tensors[i];
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)ts->name.len, ts->name.ptr);
        const int64_t n = (int64_t)(ts->nbytes / 4);
        if (ts->type != GGML_TYPE_F32 || ts->n_dims != 2 || ts->ne[0] % 256 != 0) {
            gguf_writer_add_tensor(wa, name, ts->type, ts->n_dims, ts->ne, ts->data, ts->nbytes);
            gguf_writer_add_tensor(wb, name, ts->type, ts->n_dims, ts->ne, ts->data, ts->nbytes);
            continue;
        }
        const float *w = ts->data;
        double ss = 0;
        for (int64_t k = 0; k < n; k++) ss += (double)w[k] * w[k];
        const size_t qbytes = (size_t)(n / 256) * t->bytes;
        uint8_t *q = malloc(qbytes);
        float *deq = malloc(sizeof(float) * (size_t)n);
        random_blocks(t, q, deq, n, sqrt(ss / (double)n));
        gguf_writer_add_tensor(wa, name, type, 2, ts->ne, q, qbytes);
        gguf_writer_add_tensor(wb, name, GGML_TYPE_F32, 2, ts->ne, deq, sizeof(float) * (size_t)n);
        free(q), free(deq);
    }
    int rc = gguf_writer_to_file(wa, path_a, &err) || gguf_writer_to_file(wb, path_b, &err) ? -1 : 0;
    gguf_writer_free(wa), gguf_writer_free(wb);
    gguf_close(f);
    return rc;
}

/* Logits of tokens[0..n-1] at positions 0..n-1: one batch, or one token a step. */
static int run(tokd_model *m, const int32_t *tokens, int n, bool one_by_one, int threads, float *logits) {
    tokd_err err;
    tokd_ctx_params cp;
    tokd_ctx_params_default(&cp);
    cp.n_batch = n, cp.n_ctx = n + 1, cp.n_threads = threads;
    tokd_ctx *c = tokd_ctx_new(m, &cp, &err);
    if (!c) return -1;
    const int32_t V = m->hp.n_vocab;
    int rc = 0;
    tokd_batch_entry *b = malloc(sizeof *b * (size_t)n);
    for (int i = 0; i < n; i++) b[i] = (tokd_batch_entry){tokens[i], i, 0, true};
    if (!one_by_one) rc = tokd_forward(c, b, n, logits, &err);
    for (int i = 0; one_by_one && i < n && !rc; i++) rc = tokd_forward(c, &b[i], 1, logits + (size_t)i * V, &err);
    free(b);
    tokd_ctx_free(c);
    return rc;
}

int main(void) {
    char src[1024], dir[] = "/tmp/tokd-iq-XXXXXX";
    snprintf(src, sizeof src, "%s/models/tiny-llama-f32.gguf", t_shared());
    CHECK(mkdtemp(dir) != NULL, "temporary directory");
    static const uint32_t types[] = {GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS, GGML_TYPE_IQ2_S, GGML_TYPE_IQ3_XXS,
                                     GGML_TYPE_IQ3_S,   GGML_TYPE_IQ1_S,  GGML_TYPE_IQ1_M};
    enum { N = 40 };
    int32_t tokens[N];
    for (int i = 0; i < N; i++) tokens[i] = i == 0 ? 1 : 3 + (int32_t)(next_u64() % 500);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const char *tn = ggml_type_name(types[ti]);
        char pa[1100], pb[1100];
        snprintf(pa, sizeof pa, "%s/%s.gguf", dir, tn);
        snprintf(pb, sizeof pb, "%s/%s-f32.gguf", dir, tn);
        CHECK(build_pair(src, types[ti], pa, pb) == 0, "%s: build the models", tn);
        tokd_err err;
        tokd_model *ma = tokd_model_load(pa, &err);
        CHECK(ma != NULL, "%s: load: %s", tn, ma ? "" : err.msg);
        tokd_model *mb = tokd_model_load(pb, &err);
        CHECK(mb != NULL, "%s: load the F32 copy: %s", tn, mb ? "" : err.msg);
        if (!ma || !mb) {
            tokd_model_free(ma), tokd_model_free(mb);
            continue;
        }
        const int32_t V = ma->hp.n_vocab;
        float *la = malloc(sizeof(float) * (size_t)V * N), *lb = malloc(sizeof(float) * (size_t)V * N);
        float *ld = malloc(sizeof(float) * (size_t)V * N), *l1 = malloc(sizeof(float) * (size_t)V * N);
        CHECK(run(ma, tokens, N, false, 2, la) == 0 && run(mb, tokens, N, false, 2, lb) == 0, "%s: prefill", tn);
        double kl = 0;
        int top1 = 0;
        for (int i = 0; i < N; i++) {
            int eq;
            kl += t_kl_row(lb + (size_t)i * V, la + (size_t)i * V, V, &eq);
            top1 += eq;
        }
        kl /= N;
        printf("%-8s against its F32 copy: mean KL %.2e, top-1 %d/%d\n", tn, kl, top1, N);
        CHECK(kl <= 1e-3 && top1 >= N * 9 / 10, "%s: mean KL %.2e, top-1 %d/%d", tn, kl, top1, N);
        CHECK(run(ma, tokens, N, true, 2, ld) == 0 && !memcmp(la, ld, sizeof(float) * (size_t)V * N),
              "%s: decode one token a step gives the prefill's logits", tn);
        CHECK(run(ma, tokens, N, false, 1, l1) == 0 && !memcmp(la, l1, sizeof(float) * (size_t)V * N),
              "%s: one thread gives two threads' logits", tn);
        free(la), free(lb), free(ld), free(l1);
        tokd_model_free(ma), tokd_model_free(mb);
        unlink(pa), unlink(pb);
    }
    rmdir(dir);
    T_DONE();
}
