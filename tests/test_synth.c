/* test_synth.c — `tokd synth` (src/synth.c): random-weight models of real shapes.
 *
 * The `tiny` and `tiny-qwen2` shapes are synthesised in several types: each file loads,
 * has the shape's hyperparameters and the types quantize.h's rules give, and a forward
 * pass gives finite, non-constant logits. The same seed gives the same bytes whatever
 * the thread count; another seed different weights. Weights have the documented
 * statistics (std 0.02, norms 1). A vocabulary smaller than the shape's is padded with
 * unused tokens, and errors name the problem. The Llama 3 shapes carry RoPE frequency
 * factors (rope_freqs.weight), which the forward pass applies (check_rope_factors). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model.h"
#include "synth.h"
#include "t.h"

static char tmpdir[256];

static bool files_equal(const char *a, const char *b) {
    size_t na, nb;
    char *x = tokd_read_file(a, &na), *y = tokd_read_file(b, &nb);
    bool eq = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return eq;
}

static int synth(const char *out, const char *shape, const char *type, uint64_t seed, int threads, int32_t n_vocab,
                 tokd_err *err) {
    tokd_synth_params p = {.out_path = out, .shape = shape, .type = type, .seed = seed, .n_threads = threads, .n_vocab = n_vocab};
    return tokd_synth(&p, err);
}

static void path_of(char *out, size_t cap, const char *what) { snprintf(out, cap, "%s/%s.gguf", tmpdir, what); }

/* logits of 6 tokens at positions 0..5 (6 x n_vocab), or -1 */
static int six_tokens(const tokd_model *m, float *lg) {
    tokd_ctx_params cp;
    tokd_ctx_params_default(&cp);
    cp.n_ctx = 64;
    cp.n_threads = 2;
    tokd_err err;
    tokd_ctx *c = tokd_ctx_new(m, &cp, &err);
    if (!c) return -1;
    tokd_batch_entry b[6];
    for (int i = 0; i < 6; i++) b[i] = (tokd_batch_entry){(i * 37 + 1) % m->hp.n_vocab, i, 0, true};
    int rc = tokd_forward(c, b, 6, lg, &err);
    tokd_ctx_free(c);
    return rc;
}

/* Load, check the shape, run 6 tokens, check the logits. */
static void check_model(const char *path, const char *shape, const char *type) {
    tokd_err err;
    tokd_model *m = tokd_model_load(path, &err);
    CHECK(m != NULL, "%s %s: load: %s", shape, type, m ? "" : err.msg);
    if (!m) return;
    const tokd_synth_shape *sh = tokd_synth_shape_find(shape);
    tokd_model_info info;
    tokd_model_get_info(m, &info);
    CHECK(info.n_embd == sh->n_embd && info.n_layer == sh->n_layer && info.n_head == sh->n_head &&
              info.n_head_kv == sh->n_head_kv && info.n_ff == sh->n_ff && info.tied_output == sh->tied_output &&
              !strcmp(info.arch, sh->arch) && fabsf(info.rope_freq_base - sh->rope_base) < 1e-3f * sh->rope_base,
          "%s %s: hyperparameters", shape, type);
    CHECK((m->layers[0].bq != NULL) == sh->qkv_bias, "%s %s: biases", shape, type);
    CHECK((m->rope_freqs != NULL) == (sh->rope_factor > 0) && info.rope_freq_factors == (sh->rope_factor > 0),
          "%s %s: RoPE frequency factors %s", shape, type, sh->rope_factor > 0 ? "present" : "absent");
    const size_t V = (size_t)m->hp.n_vocab;
    float *lg = malloc(sizeof(float) * V * 6);
    int rc = six_tokens(m, lg);
    CHECK(rc == 0, "%s %s: forward", shape, type);
    if (rc == 0) {
        bool finite = true;
        float lo = INFINITY, hi = -INFINITY;
        for (size_t i = 0; i < V * 6; i++) {
            finite = finite && isfinite(lg[i]);
            lo = fminf(lo, lg[i]);
            hi = fmaxf(hi, lg[i]);
        }
        CHECK(finite && hi > lo, "%s %s: logits finite and not constant [%g, %g]", shape, type, lo, hi);
    }
    free(lg);
    tokd_model_free(m);
}

static const gguf_tensor *tensor(gguf_file *f, const char *name) { return f ? gguf_find_tensor(f, name) : NULL; }


/* tiny-llama3's rope_freqs.weight: Llama 3.1's rule (the high frequencies kept, the low
 * ones divided by 32, a blend between), and the forward pass applies it: without the
 * factors position 0 (no rotation) gives the same logits and positions 2-5 others (at
 * position 1 the changed angles are under 0.002 rad, and the logits may round the
 * same); with factors of 1, the same bits as none. */
static void check_rope_factors(const char *path) {
    tokd_err err;
    tokd_model *m = tokd_model_load(path, &err);
    CHECK(m && m->rope_freqs, "tiny-llama3: load with RoPE factors: %s", m ? "" : err.msg);
    if (!m || !m->rope_freqs) {
        tokd_model_free(m);
        return;
    }
    const int32_t half = m->hp.n_rot / 2;
    int ordered = m->rope_freqs[0] == 1.0f && m->rope_freqs[half - 1] == 32.0f, blends = 0;
    for (int32_t i = 1; i < half; i++) {
        ordered &= m->rope_freqs[i] >= m->rope_freqs[i - 1];
        blends += m->rope_freqs[i] > 1.0f && m->rope_freqs[i] < 32.0f;
    }
    CHECK(ordered && blends > 0, "tiny-llama3: factors rise from 1 to 32 with %d blended", blends);
    const size_t V = (size_t)m->hp.n_vocab;
    float *with = malloc(sizeof(float) * V * 6), *without = malloc(sizeof(float) * V * 6), *ones = malloc(sizeof(float) * V * 6);
    float *factors = m->rope_freqs, *one = malloc(sizeof(float) * (size_t)half);
    for (int32_t i = 0; i < half; i++) one[i] = 1.0f;
    int rc = six_tokens(m, with);
    m->rope_freqs = NULL;
    rc |= six_tokens(m, without);
    m->rope_freqs = one;
    rc |= six_tokens(m, ones);
    m->rope_freqs = factors;
    CHECK(rc == 0, "tiny-llama3: forward");
    int later_differ = 1;
    for (size_t p = 2; p < 6; p++) later_differ &= memcmp(with + p * V, without + p * V, V * sizeof(float)) != 0;
    CHECK(memcmp(with, without, V * sizeof(float)) == 0 && later_differ,
          "tiny-llama3: the factors leave position 0 alone and change positions 2-5");
    CHECK(memcmp(ones, without, V * 6 * sizeof(float)) == 0, "tiny-llama3: factors of 1 give the bits of none");
    free(one);
    free(with);
    free(without);
    free(ones);
    tokd_model_free(m);
}

int main(void) {
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(tmpdir, sizeof tmpdir, "%s/tokd-test-synth-%d", base, (int)getpid());
    char cmd[512], a[512], b[512];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", tmpdir);
    CHECK(system(cmd) == 0, "mkdir");
    tokd_err err;

    const char *types[] = {"F32", "F16", "Q8_0", "Q4_0", "Q4_K_M", "Q6_K"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        path_of(a, sizeof a, types[i]);
        int rc = synth(a, "tiny", types[i], 1, 2, 0, &err);
        CHECK(rc == 0, "synth tiny %s: %s", types[i], rc ? err.msg : "");
        if (!rc) check_model(a, "tiny", types[i]);
    }
    path_of(a, sizeof a, "qwen2-Q4_0");
    int rc = synth(a, "tiny-qwen2", "Q4_0", 1, 2, 0, &err);
    CHECK(rc == 0, "synth tiny-qwen2: %s", rc ? err.msg : "");
    if (!rc) check_model(a, "tiny-qwen2", "Q4_0");
    path_of(a, sizeof a, "llama3-Q8_0");
    rc = synth(a, "tiny-llama3", "Q8_0", 1, 2, 0, &err);
    CHECK(rc == 0, "synth tiny-llama3: %s", rc ? err.msg : "");
    if (!rc) {
        check_model(a, "tiny-llama3", "Q8_0");
        check_rope_factors(a);
    }

    /* types per the rules (Q4_K_M: output Q6_K, last layer's attn_v / ffn_down Q6_K) */
    path_of(a, sizeof a, "Q4_K_M");
    gguf_file *f = gguf_open(a, &err);
    const gguf_tensor *t;
    CHECK((t = tensor(f, "output.weight")) && t->type == GGML_TYPE_Q6_K, "Q4_K_M output Q6_K");
    CHECK((t = tensor(f, "blk.1.attn_v.weight")) && t->type == GGML_TYPE_Q6_K, "Q4_K_M blk.1.attn_v Q6_K");
    CHECK((t = tensor(f, "blk.0.ffn_down.weight")) && t->type == GGML_TYPE_Q4_K, "Q4_K_M blk.0.ffn_down Q4_K");
    CHECK((t = tensor(f, "blk.0.attn_norm.weight")) && t->type == GGML_TYPE_F32, "norms F32");
    gguf_close(f);

    /* statistics of the F32 weights */
    path_of(a, sizeof a, "F32");
    f = gguf_open(a, &err);
    if ((t = tensor(f, "blk.0.ffn_up.weight"))) {
        const float *w = t->data;
        size_t n = t->nbytes / 4;
        double s = 0, s2 = 0;
        for (size_t i = 0; i < n; i++) {
            s += w[i];
            s2 += (double)w[i] * w[i];
        }
        double mean = s / n, sd = sqrt(s2 / n - mean * mean);
        CHECK(fabs(mean) < 1e-3 && fabs(sd - 0.02) < 1e-3, "ffn_up mean %g std %g", mean, sd);
    } else CHECK(0, "F32 file has blk.0.ffn_up.weight");
    CHECK((t = tensor(f, "output_norm.weight")) && ((const float *)t->data)[0] == 1.0f, "norm weights are 1");
    gguf_close(f);

    /* determinism: same seed, any thread count -> same bytes; another seed -> other weights */
    path_of(a, sizeof a, "seed7-t1");
    path_of(b, sizeof b, "seed7-t2");
    CHECK(synth(a, "tiny", "Q4_K_M", 7, 1, 0, &err) == 0 && synth(b, "tiny", "Q4_K_M", 7, 2, 0, &err) == 0, "synth seed 7");
    CHECK(files_equal(a, b), "seed 7: 1 thread = 2 threads");
    path_of(b, sizeof b, "seed8");
    CHECK(synth(b, "tiny", "Q4_K_M", 8, 2, 0, &err) == 0, "synth seed 8");
    gguf_file *fa = gguf_open(a, &err), *fb = gguf_open(b, &err);
    const gguf_tensor *ta = tensor(fa, "blk.0.attn_q.weight"), *tb = tensor(fb, "blk.0.attn_q.weight");
    CHECK(ta && tb && ta->nbytes == tb->nbytes && memcmp(ta->data, tb->data, ta->nbytes) != 0, "seed 8 differs from seed 7");
    gguf_close(fa);
    gguf_close(fb);

    /* a vocabulary smaller than the shape's: padded with unused tokens */
    path_of(a, sizeof a, "padded");
    rc = synth(a, "tiny", "Q8_0", 1, 2, 600, &err);
    CHECK(rc == 0, "synth n_vocab 600: %s", rc ? err.msg : "");
    tokd_model *m = rc ? NULL : tokd_model_load(a, &err);
    CHECK(m && m->hp.n_vocab == 600, "padded model loads with 600 tokens: %s", m ? "" : err.msg);
    if (m) {
        int32_t *toks = NULL;
        size_t nt = 0;
        CHECK(tokd_tokenize(m->tok, "Once upon a time", 16, true, false, &toks, &nt, &err) == 0 && nt > 1,
              "padded model tokenizes");
        bool low = true;
        for (size_t i = 0; i < nt; i++) low = low && toks[i] < 512;
        CHECK(low, "text never maps to padding tokens");
        free(toks);
    }
    tokd_model_free(m);

    /* errors */
    path_of(a, sizeof a, "err");
    CHECK(synth(a, "giant-9t", "Q4_0", 1, 2, 0, &err) != 0 && strstr(err.msg, "giant-9t"), "unknown shape: %s", err.msg);
    CHECK(synth(a, "tiny", "Q9_9", 1, 2, 0, &err) != 0 && strstr(err.msg, "Q9_9"), "unknown type: %s", err.msg);
    tokd_synth_params p = {.out_path = a, .shape = "tiny", .type = "Q4_0", .vocab_path = "/nonexistent/v.gguf"};
    CHECK(tokd_synth(&p, &err) != 0 && strstr(err.msg, "/nonexistent/v.gguf"), "missing vocab: %s", err.msg);
    p.vocab_path = NULL;
    p.out_path = "/nonexistent-dir/x.gguf";
    CHECK(tokd_synth(&p, &err) != 0, "unwritable output: %s", err.msg);
    CHECK(access(a, F_OK) != 0, "no partial output");

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    CHECK(system(cmd) == 0, "cleanup");
    T_DONE();
}
