/* test_step_profile.c — the decode step profile (src/kernels/step_profile.h, `tokd bench
 * --profile`) counts what it says: on the shared Q4_0 and Q4_K_M models (packed where
 * the CPU has the kernels; Q4_K_M mixes Q4_K and Q6_K in one region) and F32 (unpacked),
 * with 1, 2 and 3 threads, a run of decode steps gives
 *   - the steps, and one region a layer a step for each product (the logits one a step);
 *   - in each product's shares, summed over the threads, exactly the bytes of its weight
 *     matrices a step (whole groups when packed), so no claim or stolen half is lost or
 *     counted twice;
 *   - time in every stage;
 *   - the threads' spread at the barrier after attention, once a layer a step where the
 *     step is one region (decode_step.c: 2 threads here), else never;
 * and the logits are the same bits as with the profile off, which counts nothing. */
#include <string.h>

#include "kernels/step_profile.h"
#include "model.h"
#include "t.h"
#include "t_model.h"

#define STEPS 5

static uint64_t matrix_bytes(const tokd_matrix *W) {
    if (W->pk) return (uint64_t)((W->n_out + W->pk->group_rows - 1) / W->pk->group_rows) * W->group_bytes;
    return (uint64_t)W->n_out * W->row_bytes;
}

/* STEPS decode steps from position 0 into logits (STEPS x vocab); 0 on success. */
static int decode(const tokd_model *m, int n_threads, float *logits) {
    tokd_ctx_params p;
    tokd_ctx_params_default(&p);
    p.n_ctx = 64;
    p.n_threads = n_threads;
    tokd_err err;
    tokd_ctx *c = tokd_ctx_new(m, &p, &err);
    if (!c) return -1;
    int rc = 0;
    for (int32_t i = 0; i < STEPS && !rc; i++) {
        tokd_batch_entry e = {(i * 37 + 5) % m->hp.n_vocab, i, 0, true};
        rc = tokd_forward(c, &e, 1, logits + (size_t)i * m->hp.n_vocab, &err);
    }
    tokd_ctx_free(c);
    return rc;
}

static void check_model(const char *file) {
    tokd_model *m = t_load_model(file);
    if (!m) return;
    const tokd_hparams *hp = &m->hp;
    uint64_t want[TOKD_STAGE_COUNT] = {0};
    for (int32_t l = 0; l < hp->n_layer; l++) {
        const tokd_layer *L = &m->layers[l];
        want[TOKD_STAGE_QKV] += matrix_bytes(&L->wq) + matrix_bytes(&L->wk) + matrix_bytes(&L->wv);
        want[TOKD_STAGE_O] += matrix_bytes(&L->wo);
        want[TOKD_STAGE_FFN_UP] += matrix_bytes(&L->w_gate) + matrix_bytes(&L->w_up);
        want[TOKD_STAGE_FFN_DOWN] += matrix_bytes(&L->w_down);
    }
    want[TOKD_STAGE_LOGITS] = matrix_bytes(&m->output);
    const size_t n_logits = (size_t)STEPS * hp->n_vocab;
    float *off = malloc(n_logits * sizeof(float)), *on = malloc(n_logits * sizeof(float));

    for (int n_threads = 1; n_threads <= 3; n_threads++) {
        tokd_profile_start(false);
        CHECK(decode(m, n_threads, off) == 0, "%s: decode", file);
        int idle = tokd_profile.steps == 0;
        for (int s = 0; s < TOKD_STAGE_COUNT; s++) idle &= tokd_profile.stage_cycles[s] == 0 && tokd_profile.regions[s] == 0;
        CHECK(idle, "%s, %d threads: the profile counted while off", file, n_threads);

        tokd_profile_start(true);
        CHECK(decode(m, n_threads, on) == 0, "%s: decode profiled", file);
        tokd_profile_stop();
        const tokd_step_profile *pr = &tokd_profile;
        CHECK(memcmp(on, off, n_logits * sizeof(float)) == 0, "%s, %d threads: profiling changed the logits", file, n_threads);
        CHECK(pr->steps == STEPS, "%s, %d threads: %llu steps", file, n_threads, (unsigned long long)pr->steps);
        for (int s = 0; s < TOKD_STAGE_COUNT; s++) {
            const char *name = tokd_stage_name((tokd_stage)s);
            CHECK(pr->stage_cycles[s] > 0, "%s, %d threads: no time in stage %s", file, n_threads, name);
            if (s == TOKD_STAGE_OTHER || s == TOKD_STAGE_ATTENTION) {
                CHECK(pr->regions[s] == 0, "%s: stage %s counted as a product", file, name);
                continue;
            }
            const uint64_t per_step = s == TOKD_STAGE_LOGITS ? 1 : (uint64_t)hp->n_layer;
            CHECK(pr->regions[s] == per_step * STEPS, "%s, %d threads: stage %s: %llu regions, want %llu", file, n_threads,
                  name, (unsigned long long)pr->regions[s], (unsigned long long)(per_step * STEPS));
            uint64_t bytes = 0;
            for (int t = 0; t < TOKD_PROFILE_MAX_THREADS; t++) bytes += pr->share_bytes[t][s];
            CHECK(bytes == want[s] * STEPS, "%s, %d threads: stage %s read %llu bytes, want %llu", file, n_threads, name,
                  (unsigned long long)bytes, (unsigned long long)(want[s] * STEPS));
            int active = 0;
            for (int t = 0; t < TOKD_PROFILE_MAX_THREADS; t++) active += pr->share_cycles[t][s] > 0;
            CHECK(active >= 1 && active <= n_threads, "%s, %d threads: stage %s: %d threads in shares", file, n_threads, name,
                  active);
        }
        /* 2 threads split the tiny models' KV heads evenly, so the step is one region;
           3 do not, and 1 has nothing to wait for: forward.c's path, no barrier */
        const uint64_t waits = pr->tails[TOKD_STAGE_ATTENTION],
                       want_waits = n_threads == 2 ? (uint64_t)hp->n_layer * STEPS : 0;
        CHECK(waits == want_waits, "%s, %d threads: %llu waits after attention counted, want %llu", file, n_threads,
              (unsigned long long)waits, (unsigned long long)want_waits);
    }
    tokd_profile_start(false);
    free(off);
    free(on);
    tokd_model_free(m);
}

int main(void) {
    check_model("tiny-llama-Q4_0.gguf");
    check_model("tiny-llama-Q4_K_M.gguf");
    check_model("tiny-llama-f32.gguf");
    T_DONE();
}
