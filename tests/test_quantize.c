/* test_quantize.c — `tokd quantize` (src/quantize.c).
 *
 * ../shared/models/tiny-llama-f32.gguf is quantized to Q8_0, Q4_0 and Q4_K_M:
 *   - every tensor has the type and the bytes of the same tensor in llama.cpp's file of
 *     that type (../shared/models/tiny-llama-TYPE.gguf): the mix rules and the
 *     quantisers, block for block — and the whole file is byte-identical;
 *   - every converted tensor equals tokd's reference quantiser applied row by row on
 *     one thread (the threaded, chunked path changes nothing);
 *   - the file loads, and its logits on the golden prompts match llama.cpp's golden
 *     logits of the same type: mean KL <= 1e-3 per case, top-1 >= 98 % aggregated.
 * Plus the type-choice rules on real shapes (22 layers, rows of 896), F16 output,
 * thread-count invariance, and errors (unknown type, already-quantized input). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/quants.h"
#include "model.h"
#include "quantize.h"
#include "t.h"
#include "t_golden.h"

static char tmpdir[256];

static void tmp_path(char *out, size_t cap, const char *what) { snprintf(out, cap, "%s/%s.gguf", tmpdir, what); }

static bool files_equal(const char *a, const char *b) {
    size_t na, nb;
    char *x = t_slurp(a, &na), *y = t_slurp(b, &nb);
    bool eq = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return eq;
}

/* Tensor by tensor against llama.cpp's file and against the reference quantiser. */
static void check_tensors(const char *type, const char *ours_path, const char *ref_path, const char *src_path) {
    tokd_err err;
    gguf_file *o = gguf_open(ours_path, &err), *r = gguf_open(ref_path, &err), *s = gguf_open(src_path, &err);
    CHECK(o && r && s, "%s: open files", type);
    if (!o || !r || !s) goto out;
    CHECK(o->n_tensors == r->n_tensors, "%s: %llu tensors vs llama.cpp's %llu", type, (unsigned long long)o->n_tensors,
          (unsigned long long)r->n_tensors);
    int type_ok = 0, data_ok = 0, ref_ok = 0, converted = 0;
    for (uint64_t i = 0; i < o->n_tensors; i++) {
        const gguf_tensor *t = &o->tensors[i];
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        const gguf_tensor *rt = gguf_find_tensor(r, name), *st = gguf_find_tensor(s, name);
        CHECK(rt && st, "%s: tensor %s in the reference and source files", type, name);
        if (!rt || !st) continue;
        bool same_type = t->type == rt->type;
        CHECK(same_type, "%s: %s is %s, llama.cpp made %s", type, name, ggml_type_name(t->type), ggml_type_name(rt->type));
        type_ok += same_type;
        if (same_type && t->nbytes == rt->nbytes) {
            const tokd_type_traits *tt = tokd_type_get(t->type);
            uint64_t nb = t->nbytes / tt->bytes, bad = 0;
            for (uint64_t b = 0; b < nb; b++)
                bad += memcmp((const uint8_t *)t->data + b * tt->bytes, (const uint8_t *)rt->data + b * tt->bytes, tt->bytes) != 0;
            CHECK(bad == 0, "%s: %s: %llu of %llu blocks differ from llama.cpp's", type, name, (unsigned long long)bad,
                  (unsigned long long)nb);
            data_ok += bad == 0;
        }
        if (t->type != st->type && st->type == GGML_TYPE_F32) { /* converted: redo it row by row here */
            converted++;
            const tokd_type_traits *tt = tokd_type_get(t->type);
            int64_t K = (int64_t)t->ne[0], rows = (int64_t)(t->nbytes / tokd_row_bytes(tt, K));
            size_t rb = tokd_row_bytes(tt, K);
            uint8_t *row = malloc(rb);
            bool eq = true;
            for (int64_t y = 0; y < rows && eq; y++) {
                tokd_quant_row(t->type, (const float *)st->data + y * K, row, K);
                eq = !memcmp(row, (const uint8_t *)t->data + (size_t)y * rb, rb);
            }
            free(row);
            CHECK(eq, "%s: %s differs from the reference quantiser", type, name);
            ref_ok += eq;
        }
    }
    printf("%-7s %d/%llu tensor types and %d/%llu tensors' blocks equal llama.cpp's; %d/%d converted tensors equal the reference quantiser\n",
           type, type_ok, (unsigned long long)o->n_tensors, data_ok, (unsigned long long)o->n_tensors, ref_ok, converted);
    CHECK(converted > 0, "%s: something was converted", type);
out:
    gguf_close(o);
    gguf_close(r);
    gguf_close(s);
}

/* Golden prompts of tiny-llama-TYPE against our quantized file. */
static void check_golden(const char *type, const char *path, double *kl_sum, int *n_cases, int *top1, int *n_pos) {
    tokd_err err;
    tokd_model *m = tokd_model_load(path, &err);
    CHECK(m != NULL, "%s: load: %s", type, m ? "" : err.msg);
    if (!m) return;
    for (int p = 1; p <= 3; p++) {
        char jp[1024], lp[1024], tp[1024];
        snprintf(tp, sizeof tp, "%s/golden/tiny-llama-f32.p%d.json", t_shared(), p);
        snprintf(jp, sizeof jp, "%s/golden/tiny-llama-%s.p%d.json", t_shared(), type, p);
        snprintf(lp, sizeof lp, "%s/golden/tiny-llama-%s.p%d.logits.f32", t_shared(), type, p);
        if (access(jp, R_OK) != 0) continue; /* p3 exists for some types only */
        size_t n;
        char *js = t_slurp(tp, &n);
        cJSON *j = js ? cJSON_Parse(js) : NULL;
        CHECK(j != NULL, "parse %s", tp);
        if (!j) {
            free(js);
            continue;
        }
        cJSON *pt = cJSON_GetObjectItem(j, "prompt_tokens");
        int np = cJSON_GetArraySize(pt);
        int32_t V = m->hp.n_vocab;
        size_t gn;
        float *gold = (float *)t_slurp(lp, &gn);
        CHECK(gold && gn == sizeof(float) * (size_t)V * (size_t)np, "%s p%d: golden logits size", type, p);
        tokd_ctx_params cp;
        tokd_ctx_params_default(&cp);
        cp.n_batch = np;
        cp.n_ctx = np + 1;
        cp.n_threads = 2;
        tokd_ctx *c = tokd_ctx_new(m, &cp, &err);
        float *lg = malloc(sizeof(float) * (size_t)V * (size_t)np);
        tokd_batch_entry *b = malloc(sizeof *b * (size_t)np);
        for (int i = 0; i < np; i++) b[i] = (tokd_batch_entry){cJSON_GetArrayItem(pt, i)->valueint, i, 0, true};
        int fw = c ? tokd_forward(c, b, np, lg, &err) : -1;
        CHECK(fw == 0, "%s p%d: forward: %s", type, p, err.msg);
        if (fw == 0 && gold && gn == sizeof(float) * (size_t)V * (size_t)np) {
            double kl = 0;
            int t1 = 0;
            for (int i = 0; i < np; i++) {
                int eq;
                kl += t_kl_row(gold + (size_t)i * V, lg + (size_t)i * V, V, &eq);
                t1 += eq;
            }
            kl /= np;
            printf("%-7s p%d  mean KL %.3e  top-1 %d/%d\n", type, p, kl, t1, np);
            CHECK(kl <= 1e-3, "%s p%d: mean KL %.3e > 1e-3", type, p, kl);
            *kl_sum += kl;
            (*n_cases)++;
            *top1 += t1;
            *n_pos += np;
        }
        free(b);
        free(lg);
        free(gold);
        tokd_ctx_free(c);
        cJSON_Delete(j);
        free(js);
    }
    tokd_model_free(m);
}

/* The type choice on real shapes, without files. */
static void check_rules(void) {
    const tokd_qtarget *km = tokd_qtarget_find("q4_k_m"), *q8 = tokd_qtarget_find("Q8_0"), *q40 = tokd_qtarget_find("Q4_0"),
                       *f16 = tokd_qtarget_find("F16"), *q4k = tokd_qtarget_find("Q4_K");
    CHECK(km && q8 && q40 && f16 && q4k, "targets found (case-insensitive)");
    CHECK(!tokd_qtarget_find("Q4_K_X") && !tokd_qtarget_find(""), "unknown targets");
    if (!km || !q8 || !q40 || !f16 || !q4k) return;
    /* 22 layers (TinyLlama): llama.cpp gives Q6_K to layers 0 1 4 7 10 13 16 19 20 21 */
    enum { L = 22 };
    char buf[L * 2][48];
    const char *names[L * 2 + 1];
    for (int l = 0; l < L; l++) {
        snprintf(buf[2 * l], sizeof buf[0], "blk.%d.attn_v.weight", l);
        snprintf(buf[2 * l + 1], sizeof buf[0], "blk.%d.ffn_down.weight", l);
        names[2 * l] = buf[2 * l];
        names[2 * l + 1] = buf[2 * l + 1];
    }
    names[2 * L] = "output.weight";
    tokd_qplan p;
    tokd_qplan_init(&p, km, L, names, 2 * L + 1);
    char got[L + 1], want[L + 1] = "66__6__6__6__6__6__666";
    for (int l = 0; l < L; l++) {
        uint32_t tv = tokd_qplan_type(&p, names[2 * l], 2048), td = tokd_qplan_type(&p, names[2 * l + 1], 5632);
        CHECK(tv == td, "layer %d: attn_v %s, ffn_down %s", l, ggml_type_name(tv), ggml_type_name(td));
        got[l] = tv == GGML_TYPE_Q6_K ? '6' : tv == GGML_TYPE_Q4_K ? '_' : '?';
    }
    got[L] = 0;
    CHECK(!strcmp(got, want), "Q4_K_M layers with more bits: %s, want %s", got, want);
    CHECK(tokd_qplan_type(&p, "output.weight", 2048) == GGML_TYPE_Q6_K, "output Q6_K");
    CHECK(tokd_qplan_type(&p, "token_embd.weight", 2048) == GGML_TYPE_Q4_K, "token_embd base type when untied");
    CHECK(tokd_qplan_type(&p, "blk.0.attn_q.weight", 2048) == GGML_TYPE_Q4_K, "attn_q base type");
    /* rows of 896 (Qwen2.5-0.5B): K-quants fall back; tied output -> token_embd is the output */
    const char *qn[] = {"token_embd.weight", "blk.0.attn_v.weight"};
    tokd_qplan_init(&p, km, 1, qn, 2);
    CHECK(tokd_qplan_type(&p, "token_embd.weight", 896) == GGML_TYPE_Q8_0, "tied output with rows of 896 -> Q8_0");
    CHECK(tokd_qplan_type(&p, "blk.0.attn_v.weight", 896) == GGML_TYPE_Q8_0, "Q6_K rows of 896 -> Q8_0");
    CHECK(tokd_qplan_type(&p, "blk.0.attn_q.weight", 896) == GGML_TYPE_Q5_0, "Q4_K rows of 896 -> Q5_0");
    tokd_qplan_init(&p, q4k, 1, qn, 2);
    CHECK(tokd_qplan_type(&p, "blk.0.attn_q.weight", 2048) == GGML_TYPE_Q4_K, "plain Q4_K");
    CHECK(tokd_qplan_type(&p, "token_embd.weight", 2048) == GGML_TYPE_Q6_K, "tied output Q6_K");
    tokd_qplan_init(&p, q8, 1, qn, 2);
    CHECK(tokd_qplan_type(&p, "token_embd.weight", 2048) == GGML_TYPE_Q8_0, "Q8_0 keeps a Q8_0 output");
    tokd_qplan_init(&p, q40, 1, qn, 2);
    CHECK(tokd_qplan_type(&p, "blk.0.attn_q.weight", 100) == GGML_TYPE_F16, "rows of 100 -> F16");
    tokd_qplan_init(&p, f16, 1, qn, 2);
    CHECK(tokd_qplan_type(&p, "token_embd.weight", 2048) == GGML_TYPE_F16, "F16 target: output F16 too");
    CHECK(tokd_qplan_converts("blk.0.attn_q.weight", 2) && !tokd_qplan_converts("blk.0.attn_norm.weight", 1) &&
              !tokd_qplan_converts("blk.0.attn_q.bias", 1) && !tokd_qplan_converts("output_norm.weight", 2),
          "which tensors are converted");
}

int main(void) {
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(tmpdir, sizeof tmpdir, "%s/tokd-test-quantize-%d", base, (int)getpid());
    char cmd[512];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", tmpdir);
    CHECK(system(cmd) == 0, "mkdir %s", tmpdir);
    char src[512];
    snprintf(src, sizeof src, "%s/models/tiny-llama-f32.gguf", t_shared());
    check_rules();

    const char *types[] = {"Q8_0", "Q4_0", "Q4_K_M"};
    double kl_sum = 0;
    int n_cases = 0, top1 = 0, n_pos = 0;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char out[512], ref[512];
        tmp_path(out, sizeof out, types[i]);
        snprintf(ref, sizeof ref, "%s/models/tiny-llama-%s.gguf", t_shared(), types[i]);
        tokd_err err;
        int rc = tokd_quantize_file(src, out, types[i], 2, NULL, &err);
        CHECK(rc == 0, "quantize %s: %s", types[i], rc ? err.msg : "");
        if (rc) continue;
        CHECK(files_equal(out, ref), "%s: the file is byte-identical to llama.cpp's", types[i]);
        check_tensors(types[i], out, ref, src);
        check_golden(types[i], out, &kl_sum, &n_cases, &top1, &n_pos);
    }
    CHECK(n_cases >= 7, "%d golden cases compared", n_cases);
    if (n_pos) {
        printf("all     %d cases: mean KL %.3e, top-1 %d/%d (%.1f %%)\n", n_cases, kl_sum / n_cases, top1, n_pos,
               100.0 * top1 / n_pos);
        /* Issue 3 asks >= 98 %. Our files are byte-identical to llama.cpp's, so this figure
         * is the forward pass's (test_golden gets the same on llama.cpp's own files). */
        double bound = 0.98;
        CHECK(top1 >= bound * n_pos, "top-1 %d/%d below %.0f %%", top1, n_pos, bound * 100);
    }

    /* thread-count invariance and other targets */
    char a[512], b[512], ref[512];
    tokd_err err;
    tmp_path(a, sizeof a, "Q4_K_M-1thread");
    tmp_path(b, sizeof b, "Q4_K_M");
    CHECK(tokd_quantize_file(src, a, "Q4_K_M", 1, NULL, &err) == 0 && files_equal(a, b), "1 thread = 2 threads");
    tmp_path(a, sizeof a, "F16");
    snprintf(ref, sizeof ref, "%s/models/tiny-llama-F16.gguf", t_shared());
    CHECK(tokd_quantize_file(src, a, "F16", 2, NULL, &err) == 0 && files_equal(a, ref), "F16 byte-identical to llama.cpp's");
    const char *more[] = {"Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q5_K_M", "BF16"};
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
        tmp_path(a, sizeof a, more[i]);
        int rc = tokd_quantize_file(src, a, more[i], 2, NULL, &err);
        CHECK(rc == 0, "quantize %s: %s", more[i], rc ? err.msg : "");
        tokd_model *m = rc ? NULL : tokd_model_load(a, &err);
        CHECK(m != NULL, "%s loads: %s", more[i], m ? "" : err.msg);
        tokd_model_free(m);
    }

    /* errors */
    tmp_path(a, sizeof a, "bad");
    CHECK(tokd_quantize_file(src, a, "Q7_Z", 2, NULL, &err) != 0 && strstr(err.msg, "Q7_Z"), "unknown type: %s", err.msg);
    snprintf(ref, sizeof ref, "%s/models/tiny-llama-Q8_0.gguf", t_shared());
    CHECK(tokd_quantize_file(ref, a, "Q4_0", 2, NULL, &err) != 0 && strstr(err.msg, "already quantized"),
          "requantize refused: %s", err.msg);
    CHECK(access(a, F_OK) != 0, "no partial output left behind");
    CHECK(tokd_quantize_file("/nonexistent/x.gguf", a, "Q4_0", 2, NULL, &err) != 0, "missing input");

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    CHECK(system(cmd) == 0, "cleanup");
    T_DONE();
}
