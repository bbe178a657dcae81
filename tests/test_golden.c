/* test_golden.c — every model path against ../shared/golden (llama.cpp's outputs).
 *
 * For each case MODEL.pN: the prompt tokenizes to the golden prompt_tokens; the logits of
 * every prompt position, from one batched prefill, are compared with the golden rows by
 * mean KL(golden || tokd) in double precision and top-1 agreement; greedy decoding from
 * the prompt reproduces greedy_tokens. Bounds per weight format (issues 2 and 3):
 *   F16: KL <= 1e-5, all greedy tokens equal;
 *   F32 (stories260K too) and BF16: the same, and KL <= 1e-12: their products run in
 *   llama.cpp's orders (kernels/f32_rows.c, kernels/bf16_rows.c), as do attention,
 *   RoPE and SiLU (attention.h, rope.h, vecmath.h), which leaves their logits equal to
 *   the golden ones bit for bit on every path (before the forty-second session F32 sat
 *   at 1e-14 - 1e-11 and stories260K at up to 1.7e-6);
 *   Q8_0 / Q4_0 / Q4_K_M: KL <= 1e-3 per case.
 * Top-1 agreement is also summed per model over all its cases and printed; for the
 * quantized models issue 3 asks >= 98 %, checked here. (Most quantized cases agree to
 * ~1e-15 KL; where a near-tie of an F16 or Q8 rounding goes the other way — the float
 * reduction order of some llama.cpp kernels differs from ours — a case diverges to
 * ~3e-5. F16 rows keep a 32-lane order: llama.cpp's 16-lane chain would cost F16 decode
 * ~11 %, BENCHMARKS.md.) */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "t.h"
#include "t_golden.h"

static int argmax(const float *v, int32_t n) {
    int best = 0;
    for (int32_t i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

/* top-1 agreement summed per model */
static struct {
    char model[128];
    int top1, n;
} agg[64];
static int n_agg;
static void agg_model(const char *model, int top1, int n) {
    int i = 0;
    while (i < n_agg && strcmp(agg[i].model, model)) i++;
    if (i == n_agg) {
        if (n_agg == 64) return;
        snprintf(agg[n_agg++].model, sizeof agg[0].model, "%s", model);
    }
    agg[i].top1 += top1;
    agg[i].n += n;
}

static void run_case(const char *dir, const char *name) {
    char path[1024];
    size_t n;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *js = t_slurp(path, &n);
    cJSON *j = js ? cJSON_Parse(js) : NULL;
    CHECK(j != NULL, "%s parses", name);
    if (!j) { free(js); return; }
    const char *model = cJSON_GetObjectItem(j, "model")->valuestring;
    const char *prompt = cJSON_GetObjectItem(j, "prompt")->valuestring;
    cJSON *pt = cJSON_GetObjectItem(j, "prompt_tokens"), *gt = cJSON_GetObjectItem(j, "greedy_tokens");
    int np = cJSON_GetArraySize(pt), ng = cJSON_GetArraySize(gt);
    snprintf(path, sizeof path, "%s/models/%s", t_shared(), model);
    tokd_err err;
    tokd_model *m = tokd_model_load(path, &err);
    CHECK(m != NULL, "%s: load %s: %s", name, model, m ? "" : err.msg);
    if (!m) { cJSON_Delete(j); free(js); return; }
    bool bit_exact = strstr(model, "-BF16") || strstr(model, "stories260K") || strstr(model, "-f32");
    bool exact = bit_exact || strstr(model, "-F16");
    double kl_max = bit_exact ? 1e-12 : exact ? 1e-5 : 1e-3;
    double top1_min = exact ? 0.99 : 0.0; /* quantized: aggregated in main */

    /* tokenization */
    int32_t *toks = NULL;
    size_t nt = 0;
    int tok_rc = tokd_tokenize(m->tok, prompt, strlen(prompt), true, false, &toks, &nt, &err);
    int same = tok_rc == 0 && (int)nt == np;
    for (int i = 0; same && i < np; i++) same = toks[i] == cJSON_GetArrayItem(pt, i)->valueint;
    CHECK(same, "%s: prompt tokens equal the golden ones (%zu vs %d)", name, nt, np);
    free(toks);

    /* logits of every prompt position, one batched pass */
    tokd_ctx_params cp;
    tokd_ctx_params_default(&cp);
    cp.n_batch = np;
    cp.n_ctx = np + ng + 1;
    cp.n_threads = 2;
    tokd_ctx *c = tokd_ctx_new(m, &cp, &err);
    int32_t V = m->hp.n_vocab;
    CHECK(V == cJSON_GetObjectItem(j, "n_vocab")->valueint, "%s: n_vocab", name);
    float *lg = malloc(sizeof(float) * (size_t)V * (size_t)np);
    tokd_batch_entry *b = malloc(sizeof *b * (size_t)np);
    for (int i = 0; i < np; i++) b[i] = (tokd_batch_entry){cJSON_GetArrayItem(pt, i)->valueint, i, 0, true};
    int fw = tokd_forward(c, b, np, lg, &err);
    CHECK(fw == 0, "%s: forward: %s", name, fw ? err.msg : "");
    char gpath[1024];
    snprintf(gpath, sizeof gpath, "%s/%.*s.logits.f32", dir, (int)(strlen(name) - 5), name);
    size_t gn;
    float *gold = (float *)t_slurp(gpath, &gn);
    CHECK(gold && gn == sizeof(float) * (size_t)V * (size_t)np, "%s: golden logits size", name);
    if (gold && gn == sizeof(float) * (size_t)V * (size_t)np && fw == 0) {
        double kl = 0;
        int top1 = 0;
        for (int i = 0; i < np; i++) {
            int eq;
            kl += t_kl_row(gold + (size_t)i * V, lg + (size_t)i * V, V, &eq);
            top1 += eq;
        }
        kl /= np;
        /* raw logits too: KL alone is blind where one token dominates (the random qwen2
         * models put ~100 nats between top-1 and the rest) */
        double maxdiff = 0, maxabs = 0;
        for (size_t i = 0; i < (size_t)np * V; i++) {
            maxdiff = fmax(maxdiff, fabs((double)gold[i] - lg[i]));
            maxabs = fmax(maxabs, fabs((double)gold[i]));
        }
        printf("%-28s mean KL %.3e  top-1 %d/%d  max |diff| %.2e of %.1f\n", name, kl, top1, np, maxdiff, maxabs);
        if (exact) CHECK(maxdiff <= 5e-3 * maxabs, "%s: max logit difference %.3e > 5e-3 x %.1f", name, maxdiff, maxabs);
        CHECK(kl <= kl_max, "%s: mean KL %.3e > %.1e", name, kl, kl_max);
        CHECK(top1 >= top1_min * np, "%s: top-1 %d/%d below %.0f %%", name, top1, np, top1_min * 100);
        agg_model(model, top1, np);
    }
    free(gold);

    /* greedy continuation */
    if (fw == 0) {
        int tok = argmax(lg + (size_t)(np - 1) * V, V), ok = 0;
        for (int s = 0; s < ng; s++) {
            if (tok != cJSON_GetArrayItem(gt, s)->valueint) break;
            ok++;
            if (s == ng - 1) break;
            tokd_batch_entry d = {tok, np + s, 0, true};
            if (tokd_forward(c, &d, 1, lg, &err)) break;
            tok = argmax(lg, V);
        }
        printf("%-28s greedy %d/%d\n", name, ok, ng);
        if (exact) CHECK(ok == ng, "%s: greedy tokens equal: %d of %d", name, ok, ng);
    }
    free(b);
    free(lg);
    tokd_ctx_free(c);
    tokd_model_free(m);
    cJSON_Delete(j);
    free(js);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(void) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/golden", t_shared());
    DIR *d = opendir(dir);
    CHECK(d != NULL, "open %s", dir);
    if (!d) T_DONE();
    char *names[256];
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 256) {
        size_t l = strlen(de->d_name);
        if (l > 5 && !strcmp(de->d_name + l - 5, ".json")) names[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    CHECK(n >= 20, "found %d golden cases", n);
    for (int i = 0; i < n; i++) {
        run_case(dir, names[i]);
        free(names[i]);
    }
    for (int i = 0; i < n_agg; i++) {
        bool quant = strstr(agg[i].model, "Q8_0") || strstr(agg[i].model, "Q4_0") || strstr(agg[i].model, "Q4_K");
        printf("%-28s top-1 over all cases %d/%d (%.1f %%)\n", agg[i].model, agg[i].top1, agg[i].n, 100.0 * agg[i].top1 / agg[i].n);
        if (quant) CHECK(agg[i].top1 >= 0.98 * agg[i].n, "%s: top-1 %d/%d", agg[i].model, agg[i].top1, agg[i].n);
    }
    T_DONE();
}
