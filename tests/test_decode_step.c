/* test_decode_step.c — the one-region decode step (src/decode_step.c) gives the bits of
 * the forward pass it replaces, and runs where it should.
 *
 * For the shared models of every layout it meets (F32, F16, BF16, Q8_0, Q4_0 and the
 * Q4_K_M mix, packed where the CPU has the kernels; qwen2 with Q, K and V biases and a
 * tied output; stories260K with 4 KV heads of 8 dimensions), 2 threads:
 *   - STEPS single-token steps with the step region on give exactly the logits of the
 *     same steps with it off (forward.c's products, each a pool region);
 *   - the region is what ran (the context says it could), and a step that asks for no
 *     logits writes none; where the model's types and split allow it, O's and down's
 *     prepared rows were written in parts, each thread its own columns;
 *   - two sequences decoded turn about, with a two-entry batch (forward.c's path) every
 *     few steps, read the cache each path wrote: the same logits as with the region off.
 * Where the threads cannot split the KV heads evenly (3 threads, 4 or 2 KV heads), or
 * gate and up cannot be one product (one packed, one not), the region stays off and
 * the logits are still forward.c's. */
#include <string.h>

#include "decode_step.h"
#include "gguf.h"
#include "kernels/packed.h"
#include "model.h"
#include "t.h"
#include "t_model.h"

#define STEPS 24

static tokd_ctx *new_ctx(const tokd_model *m, int n_threads, bool region) {
    tokd_ctx_params p;
    tokd_ctx_params_default(&p);
    p.n_ctx = 64;
    p.n_seq = 2;
    p.n_threads = n_threads;
    tokd_err err;
    tokd_ctx *c = tokd_ctx_new(m, &p, &err);
    if (c) tokd_ctx_set_decode_region(c, region);
    return c;
}

static int32_t token_at(const tokd_model *m, int seq, int i) { return (i * 37 + 11 * seq + 5) % m->hp.n_vocab; }

/* STEPS steps of sequence 0 alone, each one entry, into logits (STEPS x vocab). Returns
 * the context's step_usable after them, or -2 on an error; *split (unless NULL) says
 * which prepared rows the threads wrote in parts: 1 O's, 2 down's. */
static int decode_alone(const tokd_model *m, int n_threads, bool region, float *logits, int *split) {
    tokd_ctx *c = new_ctx(m, n_threads, region);
    if (!c) return -2;
    tokd_err err;
    int rc = 0;
    const size_t V = (size_t)m->hp.n_vocab;
    for (int32_t i = 0; i < STEPS && !rc; i++) {
        tokd_batch_entry e = {token_at(m, 0, i), i, 0, true};
        if (i == 3) { /* no logits asked: none written */
            e.logits = false;
            for (size_t v = 0; v < V; v++) logits[(size_t)i * V + v] = -7.0f;
        }
        rc = tokd_forward(c, &e, 1, logits + (size_t)i * V, &err);
    }
    const int usable = rc ? -2 : c->step_usable;
    if (split) *split = usable == 1 ? (c->step_x_o ? 1 : 0) | (c->step_x_down ? 2 : 0) : 0;
    tokd_ctx_free(c);
    return usable;
}

/* Two sequences turn about: one entry a step, but every fifth step one entry of each in
 * one batch. Sequence 0's logits at each of its positions into logits (STEPS x vocab). */
static int decode_turns(const tokd_model *m, int n_threads, bool region, float *logits) {
    tokd_ctx *c = new_ctx(m, n_threads, region);
    if (!c) return -1;
    const size_t V = (size_t)m->hp.n_vocab;
    float *both = malloc(2 * V * sizeof(float));
    tokd_err err;
    int rc = 0, pos[2] = {0, 0};
    for (int step = 0; pos[0] < STEPS && !rc; step++) {
        if (step % 5 == 4 && pos[1] < STEPS) {
            tokd_batch_entry b[2] = {{token_at(m, 1, pos[1]), pos[1], 1, true}, {token_at(m, 0, pos[0]), pos[0], 0, true}};
            rc = tokd_forward(c, b, 2, both, &err);
            memcpy(logits + (size_t)pos[0] * V, both + V, V * sizeof(float));
            pos[0]++, pos[1]++;
            continue;
        }
        const int s = (step % 2 && pos[1] < STEPS) ? 1 : 0;
        tokd_batch_entry e = {token_at(m, s, pos[s]), pos[s], s, true};
        rc = tokd_forward(c, &e, 1, s ? both : logits + (size_t)pos[0] * V, &err);
        pos[s]++;
    }
    free(both);
    tokd_ctx_free(c);
    return rc;
}

/* split: which prepared rows the threads should write in parts where the CPU packs the
 * model's matrices (1 O's, 2 down's: decode_alone), at the split of 2 threads: O's where
 * the second thread's first head starts on its type's column multiple (32 for the Q8_0
 * layout, 256 for the K-quants'), down's where its SwiGLU columns do. */
static void check_model(const char *file, int split) {
    tokd_model *m = t_load_model(file);
    if (!m) return;
    const size_t n = (size_t)STEPS * m->hp.n_vocab;
    float *off = malloc(n * sizeof(float)), *on = malloc(n * sizeof(float));

    int got = -1;
    CHECK(decode_alone(m, 2, false, off, NULL) == -1, "%s: the region ran while off", file);
    CHECK(decode_alone(m, 2, true, on, &got) == 1, "%s: the region did not run with 2 threads", file);
    if (!tokd_packed_get(GGML_TYPE_Q4_0)) split = 0; /* nothing packed on this CPU */
    CHECK(got == split, "%s: rows prepared in parts %d, expected %d", file, got, split);
    CHECK(memcmp(on, off, n * sizeof(float)) == 0, "%s: the region's logits differ from forward.c's", file);
    const size_t V = (size_t)m->hp.n_vocab;
    bool untouched = true;
    for (size_t v = 0; v < V; v++) untouched &= on[3 * V + v] == -7.0f;
    CHECK(untouched, "%s: a step that asked for no logits wrote some", file);

    CHECK(decode_turns(m, 2, false, off) == 0 && decode_turns(m, 2, true, on) == 0, "%s: decode failed", file);
    CHECK(memcmp(on, off, n * sizeof(float)) == 0, "%s: two sequences: the logits differ with the region on", file);

    /* 3 threads do not split 2 or 4 KV heads evenly: forward.c's path, the same bits */
    CHECK(decode_alone(m, 3, true, on, NULL) == 0, "%s: the region ran with 3 threads", file);
    decode_alone(m, 1, false, off, NULL);
    CHECK(memcmp(on, off, n * sizeof(float)) == 0, "%s: 3 threads' logits differ from 1 thread's", file);
    free(off);
    free(on);
    tokd_model_free(m);
}

/* A model whose gate and up cannot run as one claimed product (here layer 1's up
 * unpacked, its gate packed) takes forward.c's path, with its bits. */
static void check_gate_up_apart(const char *file) {
    tokd_model *m = t_load_model(file);
    if (!m) return;
    if (!m->layers[1].w_up.pk) { /* nothing packed on this CPU */
        tokd_model_free(m);
        return;
    }
    m->layers[1].w_up.pk = NULL; /* its products read the file's rows (the packed copy stays the model's) */
    const size_t n = (size_t)STEPS * m->hp.n_vocab;
    float *off = malloc(n * sizeof(float)), *on = malloc(n * sizeof(float));
    CHECK(decode_alone(m, 2, true, on, NULL) == 0, "%s: the region ran with gate packed and up not", file);
    CHECK(decode_alone(m, 2, false, off, NULL) == -1, "%s: the region ran while off", file);
    CHECK(memcmp(on, off, n * sizeof(float)) == 0, "%s: gate packed, up not: the logits differ", file);
    free(off);
    free(on);
    tokd_model_free(m);
}

int main(void) {
    /* the tiny models: 2 KV heads, the second thread's heads from column 128 (qwen2: 128
       too), FFN 512 (its SwiGLU columns from 256); Q4_K_M's O is Q4_K */
    const struct {
        const char *file;
        int split;
    } models[] = {{"stories260K.gguf", 0},     {"tiny-llama-f32.gguf", 0},    {"tiny-llama-F16.gguf", 0},
                  {"tiny-llama-BF16.gguf", 0}, {"tiny-llama-Q8_0.gguf", 3},   {"tiny-llama-Q4_0.gguf", 3},
                  {"tiny-llama-Q4_K_M.gguf", 2}, {"tiny-qwen2-F16.gguf", 0}, {"tiny-qwen2-Q8_0.gguf", 3}};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) check_model(models[i].file, models[i].split);
    check_gate_up_apart("tiny-llama-Q4_0.gguf");
    T_DONE();
}
