/* test_model_badinput.c — a small model file made hostile: every truncation length,
 * 1,000 seeded random corruptions of its header, metadata and tensor table, absurd
 * hyperparameters. tokd_model_load must fail with a message naming the problem or
 * succeed with a model that evaluates without reading out of bounds (ASan build). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model.h"
#include "t.h"
#include "tiny_model.h"

static char path[256];

/* 1 = loaded (and evaluated), 0 = rejected with a message, -1 = rejected silently */
static int try_load(const uint8_t *buf, uint64_t n) {
    if (tiny_write_file(path, buf, n)) return -1;
    tokd_err err;
    err.msg[0] = 0;
    tokd_model *m = tokd_model_load(path, &err);
    if (!m) return err.msg[0] ? 0 : -1;
    tokd_ctx_params cp;
    tokd_ctx_params_default(&cp);
    cp.n_ctx = 16;
    cp.n_threads = 1;
    cp.n_batch = 4;
    tokd_ctx *c = tokd_ctx_new(m, &cp, &err);
    if (c) {
        int32_t *toks = NULL;
        size_t nt = 0;
        if (tokd_tokenize(m->tok, "Once upon", 9, true, false, &toks, &nt, &err) == 0 && nt > 0) {
            float *lg = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
            tokd_batch_entry e = {toks[0], 0, 0, true};
            tokd_forward(c, &e, 1, lg, &err);
            free(lg);
        }
        free(toks);
        tokd_ctx_free(c);
    }
    tokd_model_free(m);
    return 1;
}

static void set_u32_key(uint8_t *buf, uint64_t size, const char *key, uint32_t v) {
    size_t kl = strlen(key);
    for (uint64_t i = 0; i + kl + 8 < size; i++)
        if (memcmp(buf + i, key, kl) == 0 && buf[i + kl] == 4 /* uint32 type */) {
            memcpy(buf + i + kl + 4, &v, 4);
            return;
        }
}

int main(void) {
    /* tmpfs when available: this writes the file ~26,000 times */
    snprintf(path, sizeof path, "%s/tokd-badinput-%d.gguf", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (int)getpid());
    uint64_t size;
    uint8_t *buf = tiny_model_build(t_shared(), &size);
    CHECK(buf != NULL, "build the tiny model");
    if (!buf) T_DONE();
    CHECK(try_load(buf, size) == 1, "the intact tiny model loads and runs");

    gguf_file *f = gguf_open_buffer(buf, size, NULL);
    uint64_t data_off = f->data_offset, data_end = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        uint64_t end = f->data_offset + f->tensors[i].offset + f->tensors[i].nbytes;
        if (end > data_end) data_end = end;
    }
    gguf_close(f);

    int silent = 0, loaded = 0;
    for (uint64_t L = 0; L < data_end; L++) {
        int r = try_load(buf, L);
        silent += r < 0;
        loaded += r > 0;
    }
    CHECK(loaded == 0, "every truncation before the end of the data is rejected (%d loaded)", loaded);
    CHECK(silent == 0, "every rejection names the problem (%d silent)", silent);

    uint8_t *mut = malloc(size);
    uint64_t seed = 2024;
    int rejected = 0;
    loaded = silent = 0;
    for (int iter = 0; iter < 1000; iter++) {
        memcpy(mut, buf, size);
        int flips = 1 + iter % 3;
        for (int k = 0; k < flips; k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            uint64_t pos = (seed >> 33) % data_off; /* header, metadata, tensor table */
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            mut[pos] = (iter % 5 == 0) ? 0xff : (uint8_t)(seed >> 56);
        }
        int r = try_load(mut, size);
        silent += r < 0;
        loaded += r > 0;
        rejected += r == 0;
    }
    CHECK(silent == 0, "1000 corruptions: no silent failure (%d)", silent);
    printf("1000 corruptions: %d rejected with a message, %d still loaded and ran\n", rejected, loaded);
    CHECK(rejected > 0, "corruptions are detected");

    struct { const char *key; uint32_t v; const char *expect; } absurd[] = {
        {"llama.embedding_length", 1000000000, "out of range"},
        {"llama.embedding_length", 0, "out of range"},
        {"llama.attention.head_count", 3, "multiple"},
        {"llama.attention.head_count_kv", 0, "out of range"},
        {"llama.block_count", 2, "missing tensor"},
        {"llama.feed_forward_length", 17, "shape"},
        {"llama.context_length", 0xffffffffu, "out of range"},
    };
    for (size_t i = 0; i < sizeof absurd / sizeof absurd[0]; i++) {
        memcpy(mut, buf, size);
        set_u32_key(mut, size, absurd[i].key, absurd[i].v);
        tiny_write_file(path, mut, size);
        tokd_err err;
        err.msg[0] = 0;
        tokd_model *m = tokd_model_load(path, &err);
        CHECK(!m && strstr(err.msg, absurd[i].expect), "%s = %u: '%s'", absurd[i].key, absurd[i].v, err.msg);
        tokd_model_free(m);
    }
    /* rope_freqs.weight (Llama 3.1+): one positive, finite divisor per RoPE pair */
    const struct {
        float v[3];
        uint64_t n;
        const char *expect; /* NULL: loads and runs */
    } ropes[] = {{{1.0f, 4.0f}, 2, NULL},
                 {{1.0f, 0.0f}, 2, "positive and finite"},
                 {{-1.0f, 1.0f}, 2, "positive and finite"},
                 {{1.0f, NAN}, 2, "positive and finite"},
                 {{INFINITY, 1.0f}, 2, "positive and finite"},
                 {{1.0f, 1.0f, 1.0f}, 3, "expected a vector of 2"},
                 {{1.0f}, 1, "expected a vector of 2"}};
    for (size_t i = 0; i < sizeof ropes / sizeof ropes[0]; i++) {
        uint64_t rsize;
        uint8_t *rbuf = tiny_model_build_rope(t_shared(), &rsize, ropes[i].v, ropes[i].n);
        if (!ropes[i].expect) {
            CHECK(rbuf && try_load(rbuf, rsize) == 1, "rope_freqs {%g, %g}: loads and runs", ropes[i].v[0], ropes[i].v[1]);
        } else {
            tiny_write_file(path, rbuf, rsize);
            tokd_err err;
            err.msg[0] = 0;
            tokd_model *m = tokd_model_load(path, &err);
            CHECK(!m && strstr(err.msg, ropes[i].expect), "rope_freqs case %zu: '%s'", i, err.msg);
            tokd_model_free(m);
        }
        free(rbuf);
    }
    free(mut);
    free(buf);
    unlink(path);
    T_DONE();
}
