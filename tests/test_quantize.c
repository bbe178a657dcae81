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
 * Every other target, and llama-quantize's options (--pure, --output-tensor-type,
 * --token-embedding-type, --allow-requantize), match llama-quantize's files by size and
 * hash, and the targets' files load. Plus the
 * type-choice rules against llama-quantize's per-layer choices (mixes, 70B, experts,
 * falcon, tied outputs), the fallbacks at rows of 896 and 100, F16 output, thread-count
 * invariance, and errors (unknown type, already-quantized input). */
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

/* FNV-1a (64-bit) of a file's bytes, and its size in *n (0 if unreadable). */
static uint64_t file_fnv1a(const char *path, size_t *n) {
    *n = 0;
    char *bytes = t_slurp(path, n);
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t k = 0; bytes && k < *n; k++) h = (h ^ (uint8_t)bytes[k]) * 0x100000001b3ull;
    free(bytes);
    return h;
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
                tokd_quant_row(t->type, (const float *)st->data + y * K, row, K, NULL);
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

/* Models for the type rules (the tensors the plan sees are built from these). */
typedef struct {
    tokd_qmodel m;
    bool tied;
} rule_model;
static const rule_model TINYLLAMA = {{"llama", 22, 8, 2, 0}, false}, LLAMA_70B = {{"llama", 80, 8, 2, 0}, false},
                        MOE_8 = {{"llama", 8, 8, 2, 8}, false}, FALCON = {{"falcon", 32, 8, 8, 0}, false},
                        QWEN_TIED = {{"qwen2", 24, 8, 8, 0}, true};

/* One type per character: llama-quantize's choice for each layer of each role. */
typedef struct {
    const rule_model *model;
    const char *target;
    char output, token_embd;   /* '-': no such tensor */
    const char *roles[7];      /* attn_q attn_k attn_v attn_output ffn_gate ffn_up ffn_down */
    bool imatrix;              /* llama-quantize ran with an importance matrix */
} rule_case;
static const char *const ROLE_NAMES[7] = {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
                                         "ffn_gate", "ffn_up", "ffn_down"};

/* Read off the files llama-quantize (llama.cpp c392e5094, no importance matrix) wrote for
 * small F32 models of these shapes; the same command on the full files gave byte-identical
 * output from tokd quantize (BENCHMARKS.md, fortieth session). */
static const rule_case RULE_CASES[] = {
    {&TINYLLAMA, "Q2_K_M", '6', '2', {"2222222222222222222222", "2222222222222222222222", "4444444444444444444444", "3333333333333333333333", "2222222222222222222222", "2222222222222222222222", "3333333333333333333333"}, false},
    {&TINYLLAMA, "Q3_K_S", '6', '3', {"3333333333333333333333", "3333333333333333333333", "3333333333333333333333", "3333333333333333333333", "3333333333333333333333", "3333333333333333333333", "3333333333333333333333"}, false},
    {&TINYLLAMA, "Q3_K_M", '6', '3', {"3333333333333333333333", "3333333333333333333333", "5544444444444444444444", "4444444444444444444444", "3333333333333333333333", "3333333333333333333333", "5444444444444444444444"}, false},
    {&TINYLLAMA, "Q3_K_L", '6', '3', {"3333333333333333333333", "3333333333333333333333", "5555555555555555555555", "5555555555555555555555", "3333333333333333333333", "3333333333333333333333", "5555555555555555555555"}, false},
    {&TINYLLAMA, "Q4_K_S", '6', '4', {"4444444444444444444444", "4444444444444444444444", "5555444444444444444444", "4444444444444444444444", "4444444444444444444444", "4444444444444444444444", "5544444444444444444444"}, false},
    {&TINYLLAMA, "Q4_K_M", '6', '4', {"4444444444444444444444", "4444444444444444444444", "6644644644644644644666", "4444444444444444444444", "4444444444444444444444", "4444444444444444444444", "6644644644644644644666"}, false},
    {&TINYLLAMA, "Q5_K_S", '6', '5', {"5555555555555555555555", "5555555555555555555555", "5555555555555555555555", "5555555555555555555555", "5555555555555555555555", "5555555555555555555555", "5555555555555555555555"}, false},
    {&TINYLLAMA, "Q5_K_M", '6', '5', {"5555555555555555555555", "5555555555555555555555", "6655655655655655655666", "5555555555555555555555", "5555555555555555555555", "5555555555555555555555", "6655655655655655655666"}, false},
    {&TINYLLAMA, "Q6_K", '6', '6', {"6666666666666666666666", "6666666666666666666666", "6666666666666666666666", "6666666666666666666666", "6666666666666666666666", "6666666666666666666666", "6666666666666666666666"}, false},
    {&TINYLLAMA, "Q4_0", '6', '0', {"0000000000000000000000", "0000000000000000000000", "0000000000000000000000", "0000000000000000000000", "0000000000000000000000", "0000000000000000000000", "0000000000000000000000"}, false},
    {&TINYLLAMA, "Q8_0", '8', '8', {"8888888888888888888888", "8888888888888888888888", "8888888888888888888888", "8888888888888888888888", "8888888888888888888888", "8888888888888888888888", "8888888888888888888888"}, false},
    {&LLAMA_70B, "Q2_K_M", '6', '2', {"22222222222222222222222222222222222222222222222222222222222222222222222222222222", "22222222222222222222222222222222222222222222222222222222222222222222222222222222", "55555555555555555555555555555555555555555555555555555555555555555555555555555555", "33333333333333333333333333333333333333333333333333333333333333333333333333333333", "22222222222222222222222222222222222222222222222222222222222222222222222222222222", "22222222222222222222222222222222222222222222222222222222222222222222222222222222", "33333333333333333333333333333333333333333333333333333333333333333333333333333333"}, false},
    {&LLAMA_70B, "Q3_K_S", '6', '3', {"33333333333333333333333333333333333333333333333333333333333333333333333333333333", "33333333333333333333333333333333333333333333333333333333333333333333333333333333", "55555555555555555555555555555555555555555555555555555555555555555555555555555555", "33333333333333333333333333333333333333333333333333333333333333333333333333333333", "33333333333333333333333333333333333333333333333333333333333333333333333333333333", "33333333333333333333333333333333333333333333333333333333333333333333333333333333", "33333333333333333333333333333333333333333333333333333333333333333333333333333333"}, false},
    {&LLAMA_70B, "Q3_K_M", '6', '3', {"33333333333333333333333333333333333333333333333333333333333333333333333333333333", "33333333333333333333333333333333333333333333333333333333333333333333333333333333", "55555555555555555555555555555555555555555555555555555555555555555555555555555555", "44444444444444444444444444444444444444444444444444444444444444444444444444444444", "33333333333333333333333333333333333333333333333333333333333333333333333333333333", "33333333333333333333333333333333333333333333333333333333333333333333333333333333", "55555444444444444444444444444444444444444444444444444444444444444444444444444444"}, false},
    {&LLAMA_70B, "Q4_K_S", '6', '4', {"44444444444444444444444444444444444444444444444444444444444444444444444444444444", "44444444444444444444444444444444444444444444444444444444444444444444444444444444", "55555555555555555555555555555555555555555555555555555555555555555555555555555555", "44444444444444444444444444444444444444444444444444444444444444444444444444444444", "44444444444444444444444444444444444444444444444444444444444444444444444444444444", "44444444444444444444444444444444444444444444444444444444444444444444444444444444", "55555555554444444444444444444444444444444444444444444444444444444444444444444444"}, false},
    {&LLAMA_70B, "Q4_K_M", '6', '4', {"44444444444444444444444444444444444444444444444444444444444444444444444444444444", "44444444444444444444444444444444444444444444444444444444444444444444444444444444", "66666666665565565565565565565565565565565565565565565565565565565565566666666666", "44444444444444444444444444444444444444444444444444444444444444444444444444444444", "44444444444444444444444444444444444444444444444444444444444444444444444444444444", "44444444444444444444444444444444444444444444444444444444444444444444444444444444", "66666666664464464464464464464464464464464464464464464464464464464464466666666666"}, false},
    {&MOE_8, "Q2_K_M", '6', '2', {"22222222", "88888888", "88888888", "55555555", "22222222", "22222222", "33333333"}, false},
    {&MOE_8, "Q3_K_S", '6', '3', {"33333333", "88888888", "88888888", "55555555", "33333333", "33333333", "33333333"}, false},
    {&MOE_8, "Q3_K_M", '6', '3', {"33333333", "88888888", "88888888", "55555555", "33333333", "33333333", "44444444"}, false},
    {&MOE_8, "Q4_K_M", '6', '4', {"44444444", "88888888", "88888888", "55555555", "44444444", "44444444", "64464466"}, false},
    {&MOE_8, "Q5_K_M", '6', '5', {"55555555", "88888888", "88888888", "55555555", "55555555", "55555555", "65565566"}, false},
    {&MOE_8, "Q4_0", '6', '0', {"00000000", "88888888", "88888888", "00000000", "00000000", "00000000", "00000000"}, false},
    {&FALCON, "Q3_K_M", '8', '3', {"33333333333333333333333333333333", "33333333333333333333333333333333", "55444444444444444444444444444444", "33333333333333333333333333333333", "33333333333333333333333333333333", "33333333333333333333333333333333", "55443343343343343343343343344444"}, false},
    {&FALCON, "Q3_K_L", '8', '3', {"33333333333333333333333333333333", "33333333333333333333333333333333", "55555555555555555555555555555555", "44444444444444444444444444444444", "33333333333333333333333333333333", "33333333333333333333333333333333", "44444444444444444444444444444444"}, false},
    {&FALCON, "Q4_K_S", '8', '4', {"44444444444444444444444444444444", "44444444444444444444444444444444", "55554444444444444444444444444444", "44444444444444444444444444444444", "44444444444444444444444444444444", "44444444444444444444444444444444", "44444444444444444444444444444444"}, false},
    {&FALCON, "Q4_K_M", '8', '4', {"44444444444444444444444444444444", "44444444444444444444444444444444", "66664464464464464464464464466666", "44444444444444444444444444444444", "44444444444444444444444444444444", "44444444444444444444444444444444", "66554454454454454454454454455555"}, false},
    {&QWEN_TIED, "Q2_K_M", '-', '6', {"222222222222222222222222", "222222222222222222222222", "333333333333333333333333", "333333333333333333333333", "222222222222222222222222", "222222222222222222222222", "333333333333333333333333"}, false},
    {&QWEN_TIED, "Q4_K_M", '-', '6', {"444444444444444444444444", "444444444444444444444444", "666446446446446446446666", "444444444444444444444444", "444444444444444444444444", "444444444444444444444444", "666446446446446446446666"}, false},
    {&TINYLLAMA, "IQ4_NL", '6', 'n', {"nnnnnnnnnnnnnnnnnnnnnn", "nnnnnnnnnnnnnnnnnnnnnn", "5555555555555555555555", "nnnnnnnnnnnnnnnnnnnnnn", "nnnnnnnnnnnnnnnnnnnnnn", "nnnnnnnnnnnnnnnnnnnnnn", "55nnnnnnnnnnnnnnnnnnnn"}, false},
    {&TINYLLAMA, "IQ4_XS", '6', 'x', {"xxxxxxxxxxxxxxxxxxxxxx", "xxxxxxxxxxxxxxxxxxxxxx", "5555555555555555555555", "xxxxxxxxxxxxxxxxxxxxxx", "xxxxxxxxxxxxxxxxxxxxxx", "xxxxxxxxxxxxxxxxxxxxxx", "55xxxxxxxxxxxxxxxxxxxx"}, false},
    {&MOE_8, "IQ4_XS", '6', 'x', {"xxxxxxxx", "88888888", "88888888", "55555555", "xxxxxxxx", "xxxxxxxx", "5xxxxxxx"}, false},
    {&QWEN_TIED, "IQ4_NL", '-', '6', {"nnnnnnnnnnnnnnnnnnnnnnnn", "nnnnnnnnnnnnnnnnnnnnnnnn", "nnnnnnnnnnnnnnnnnnnnnnnn", "nnnnnnnnnnnnnnnnnnnnnnnn", "nnnnnnnnnnnnnnnnnnnnnnnn", "nnnnnnnnnnnnnnnnnnnnnnnn", "555nnnnnnnnnnnnnnnnnnnnn"}, false},
    /* with an importance matrix: llama-quantize --imatrix on the same shapes (a matrix from
     * llama-imatrix, or for the expert and falcon models one with an entry for every matrix) */
    {&TINYLLAMA, "IQ2_M", '5', 'E', {"FFFFFFFFFFFFFFFFFFFFFF", "FFFFFFFFFFFFFFFFFFFFFF", "4444444444444444444444", "EEEEEEEEEEEEEEEEEEEEEE", "FFFFFFFFFFFFFFFFFFFFFF", "FFFFFFFFFFFFFFFFFFFFFF", "EEFFFFFFFFFFFFFFFFFFFF"}, true},
    {&TINYLLAMA, "IQ2_S", '5', 'E', {"BBBBBBBBBBBBBBBBBBBBBB", "BBBBBBBBBBBBBBBBBBBBBB", "4444444444444444444444", "EEEEEEEEEEEEEEEEEEEEEE", "BBBBBBBBBBBBBBBBBBBBBB", "BBBBBBBBBBBBBBBBBBBBBB", "EEBBBBBBBBBBBBBBBBBBBB"}, true},
    {&TINYLLAMA, "IQ2_XS", '5', '2', {"BBBBBBBBBBBBBBBBBBBBBB", "BBBBBBBBBBBBBBBBBBBBBB", "4444444444444444444444", "BBBBBBBBBBBBBBBBBBBBBB", "BBBBBBBBBBBBBBBBBBBBBB", "BBBBBBBBBBBBBBBBBBBBBB", "22BBBBBBBBBBBBBBBBBBBB"}, true},
    {&TINYLLAMA, "IQ2_XXS", '5', '2', {"AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAA", "4444444444444444444444", "AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAA", "22AAAAAAAAAAAAAAAAAAAA"}, true},
    {&TINYLLAMA, "IQ3_M", '6', 'E', {"EEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEE", "4444444444444444444444", "4444444444444444444444", "EEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEE", "44EEEEEEEEEEEEEEEEEEEE"}, true},
    {&TINYLLAMA, "IQ3_S", '6', 'E', {"EEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEE", "4444444444444444444444", "EEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEE"}, true},
    {&TINYLLAMA, "IQ3_XS", '6', 'E', {"CCCCCCCCCCCCCCCCCCCCCC", "CCCCCCCCCCCCCCCCCCCCCC", "4444444444444444444444", "EEEEEEEEEEEEEEEEEEEEEE", "EECCCCCCCCCCCCCCCCCEEE", "EECCCCCCCCCCCCCCCCCEEE", "EEEEEEEEEEEEEEEEEEEEEE"}, true},
    {&TINYLLAMA, "IQ3_XXS", '5', 'E', {"FFFFFFFFFFFFFFFFFFFFFF", "FFFFFFFFFFFFFFFFFFFFFF", "4444444444444444444444", "EEEEEEEEEEEEEEEEEEEEEE", "CCCCCCCCCCCCCCCCCCCCCC", "CCCCCCCCCCCCCCCCCCCCCC", "CCCCCCCCCCCCCCCCCCCCCC"}, true},
    {&TINYLLAMA, "Q2_K_S", '6', '2', {"2222222222222222222222", "2222222222222222222222", "4444444444444444444444", "2222222222222222222222", "2222222222222222222222", "2222222222222222222222", "4422222222222222222222"}, true},
    {&LLAMA_70B, "IQ2_M", '5', 'E', {"FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF", "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF", "44444444444444444444444444444444444444444444444444444444444444444444444444444444", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF", "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF", "EEEEEEEEEEFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF"}, true},
    {&LLAMA_70B, "IQ2_S", '5', 'E', {"BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", "44444444444444444444444444444444444444444444444444444444444444444444444444444444", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", "EEEEEEEEEEBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"}, true},
    {&LLAMA_70B, "IQ2_XS", '5', '2', {"BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", "44444444444444444444444444444444444444444444444444444444444444444444444444444444", "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", "2222222222BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"}, true},
    {&LLAMA_70B, "IQ2_XXS", '5', '2', {"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "44444444444444444444444444444444444444444444444444444444444444444444444444444444", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "2222222222AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}, true},
    {&LLAMA_70B, "IQ3_M", '6', 'E', {"EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "55555555555555555555555555555555555555555555555555555555555555555555555555555555", "44444444444444444444444444444444444444444444444444444444444444444444444444444444", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "4444444444EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE"}, true},
    {&LLAMA_70B, "IQ3_S", '6', 'E', {"EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "55555555555555555555555555555555555555555555555555555555555555555555555555555555", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE"}, true},
    {&LLAMA_70B, "IQ3_XS", '6', 'E', {"CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC", "CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC", "55555555555555555555555555555555555555555555555555555555555555555555555555555555", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEECCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCEEEEEEEEEE", "EEEEEEEEEECCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE"}, true},
    {&LLAMA_70B, "IQ3_XXS", '5', 'E', {"FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF", "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF", "55555555555555555555555555555555555555555555555555555555555555555555555555555555", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC", "CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC", "CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC"}, true},
    {&LLAMA_70B, "Q2_K_S", '6', '2', {"22222222222222222222222222222222222222222222222222222222222222222222222222222222", "22222222222222222222222222222222222222222222222222222222222222222222222222222222", "55555555555555555555555555555555555555555555555555555555555555555555555555555555", "22222222222222222222222222222222222222222222222222222222222222222222222222222222", "22222222222222222222222222222222222222222222222222222222222222222222222222222222", "22222222222222222222222222222222222222222222222222222222222222222222222222222222", "44444444442222222222222222222222222222222222222222222222222222222222222222222222"}, true},
    {&MOE_8, "IQ2_M", '5', 'E', {"FFFFFFFF", "44444444", "44444444", "55555555", "FFFFFFFF", "FFFFFFFF", "EFFFFFFF"}, true},
    {&MOE_8, "IQ2_S", '5', 'E', {"BBBBBBBB", "44444444", "44444444", "55555555", "BBBBBBBB", "BBBBBBBB", "EBBBBBBB"}, true},
    {&MOE_8, "IQ2_XS", '5', '2', {"BBBBBBBB", "44444444", "44444444", "55555555", "BBBBBBBB", "BBBBBBBB", "2BBBBBBB"}, true},
    {&MOE_8, "IQ2_XXS", '5', '2', {"AAAAAAAA", "44444444", "44444444", "55555555", "AAAAAAAA", "AAAAAAAA", "2AAAAAAA"}, true},
    {&MOE_8, "IQ3_M", '6', 'E', {"EEEEEEEE", "88888888", "88888888", "55555555", "EEEEEEEE", "EEEEEEEE", "4EE4EE44"}, true},
    {&MOE_8, "IQ3_S", '6', 'E', {"EEEEEEEE", "88888888", "88888888", "55555555", "EEEEEEEE", "EEEEEEEE", "EEEEEEEE"}, true},
    {&MOE_8, "IQ3_XS", '6', 'E', {"CCCCCCCC", "88888888", "88888888", "55555555", "ECCCCCCE", "ECCCCCCE", "EEEEEEEE"}, true},
    {&MOE_8, "IQ3_XXS", '5', 'E', {"FFFFFFFF", "88888888", "88888888", "55555555", "CCCCCCCC", "CCCCCCCC", "CCCCCCCC"}, true},
    {&MOE_8, "Q2_K_S", '6', '2', {"22222222", "88888888", "88888888", "22222222", "22222222", "22222222", "42222222"}, true},
    {&FALCON, "IQ2_M", '8', 'E', {"FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF", "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF", "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF", "EEEEFFFFFFFFFFFFFFFFFFFFFFFFFFFF"}, true},
    {&FALCON, "IQ2_S", '8', 'E', {"BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", "EEEEBBBBBBBBBBBBBBBBBBBBBBBBBBBB"}, true},
    {&FALCON, "IQ2_XS", '8', '2', {"BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", "22222222222222222222222222222222", "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB", "2222BBBBBBBBBBBBBBBBBBBBBBBBBBBB"}, true},
    {&FALCON, "IQ2_XXS", '8', '2', {"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "22222222222222222222222222222222", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "2222AAAAAAAAAAAAAAAAAAAAAAAAAAAA"}, true},
    {&FALCON, "IQ3_M", '8', 'E', {"EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "44444444444444444444444444444444", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "4444EEEEEEEEEEEEEEEEEEEEEEEEEEEE"}, true},
    {&FALCON, "IQ3_S", '8', 'E', {"EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE"}, true},
    {&FALCON, "IQ3_XS", '8', 'E', {"CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC", "CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE", "EEEECCCCCCCCCCCCCCCCCCCCCCCCEEEE", "EEEECCCCCCCCCCCCCCCCCCCCCCCCEEEE", "EEEEEEEEEEEEEEEEEEEEEEEEEEEEEEEE"}, true},
    {&FALCON, "IQ3_XXS", '8', 'E', {"FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF", "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF", "CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC", "CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC", "CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC", "CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC", "CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC"}, true},
    {&FALCON, "Q2_K_S", '8', '2', {"22222222222222222222222222222222", "22222222222222222222222222222222", "22222222222222222222222222222222", "22222222222222222222222222222222", "22222222222222222222222222222222", "22222222222222222222222222222222", "44442222222222222222222222222222"}, true},
    {&QWEN_TIED, "IQ2_M", '-', '5', {"FFFFFFFFFFFFFFFFFFFFFFFF", "FFFFFFFFFFFFFFFFFFFFFFFF", "EEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEE", "FFFFFFFFFFFFFFFFFFFFFFFF", "FFFFFFFFFFFFFFFFFFFFFFFF", "EEEFFFFFFFFFFFFFFFFFFFFF"}, true},
    {&QWEN_TIED, "IQ2_S", '-', '5', {"BBBBBBBBBBBBBBBBBBBBBBBB", "BBBBBBBBBBBBBBBBBBBBBBBB", "EEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEE", "BBBBBBBBBBBBBBBBBBBBBBBB", "BBBBBBBBBBBBBBBBBBBBBBBB", "EEEBBBBBBBBBBBBBBBBBBBBB"}, true},
    {&QWEN_TIED, "IQ2_XS", '-', '5', {"BBBBBBBBBBBBBBBBBBBBBBBB", "BBBBBBBBBBBBBBBBBBBBBBBB", "222222222222222222222222", "BBBBBBBBBBBBBBBBBBBBBBBB", "BBBBBBBBBBBBBBBBBBBBBBBB", "BBBBBBBBBBBBBBBBBBBBBBBB", "222BBBBBBBBBBBBBBBBBBBBB"}, true},
    {&QWEN_TIED, "IQ2_XXS", '-', '5', {"AAAAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAAAA", "222222222222222222222222", "AAAAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAAAA", "222AAAAAAAAAAAAAAAAAAAAA"}, true},
    {&QWEN_TIED, "IQ3_M", '-', '6', {"EEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEE", "444444444444444444444444", "444444444444444444444444", "EEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEE", "444EEEEEEEEEEEEEEEEEEEEE"}, true},
    {&QWEN_TIED, "IQ3_S", '-', '6', {"EEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEE"}, true},
    {&QWEN_TIED, "IQ3_XS", '-', '6', {"CCCCCCCCCCCCCCCCCCCCCCCC", "CCCCCCCCCCCCCCCCCCCCCCCC", "EEEEEEEEEEEEEEEEEEEEEEEE", "EEEEEEEEEEEEEEEEEEEEEEEE", "EEECCCCCCCCCCCCCCCCCCEEE", "EEECCCCCCCCCCCCCCCCCCEEE", "EEEEEEEEEEEEEEEEEEEEEEEE"}, true},
    {&QWEN_TIED, "IQ3_XXS", '-', '5', {"FFFFFFFFFFFFFFFFFFFFFFFF", "FFFFFFFFFFFFFFFFFFFFFFFF", "CCCCCCCCCCCCCCCCCCCCCCCC", "EEEEEEEEEEEEEEEEEEEEEEEE", "CCCCCCCCCCCCCCCCCCCCCCCC", "CCCCCCCCCCCCCCCCCCCCCCCC", "CCCCCCCCCCCCCCCCCCCCCCCC"}, true},
    {&QWEN_TIED, "Q2_K_S", '-', '6', {"222222222222222222222222", "222222222222222222222222", "222222222222222222222222", "222222222222222222222222", "222222222222222222222222", "222222222222222222222222", "444222222222222222222222"}, true},
};

static char type_code(uint32_t t) {
    switch (t) {
    case GGML_TYPE_Q2_K: return '2';
    case GGML_TYPE_Q3_K: return '3';
    case GGML_TYPE_Q4_K: return '4';
    case GGML_TYPE_Q5_K: return '5';
    case GGML_TYPE_Q6_K: return '6';
    case GGML_TYPE_Q4_0: return '0';
    case GGML_TYPE_Q8_0: return '8';
    case GGML_TYPE_IQ4_NL: return 'n';
    case GGML_TYPE_IQ4_XS: return 'x';
    case GGML_TYPE_IQ2_XXS: return 'A';
    case GGML_TYPE_IQ2_XS: return 'B';
    case GGML_TYPE_IQ3_XXS: return 'C';
    case GGML_TYPE_IQ3_S: return 'E';
    case GGML_TYPE_IQ2_S: return 'F';
    default: return '?';
    }
}

/* Runs the plan over a model's tensors in llama.cpp's order: the non-block tensors, then
 * each block's tensors by name. */
static void check_rule_case(const rule_case *c) {
    const tokd_qtarget *t = tokd_qtarget_find(c->target);
    CHECK(t != NULL, "target %s", c->target);
    if (!t) return;
    const tokd_qmodel *m = &c->model->m;
    const bool moe = m->n_expert > 1;
    const char *ffn[3] = {moe ? "ffn_down_exps.weight" : "ffn_down.weight", moe ? "ffn_gate_exps.weight" : "ffn_gate.weight",
                          moe ? "ffn_up_exps.weight" : "ffn_up.weight"};
    const char *per_block[] = {"attn_k.weight", "attn_output.weight", "attn_q.weight", "attn_v.weight", ffn[0], ffn[1], ffn[2]};
    enum { PER_BLOCK = 7 };
    const int n = 2 + m->n_layer * PER_BLOCK;
    char(*buf)[48] = calloc((size_t)n, sizeof *buf);
    const char **names = calloc((size_t)n, sizeof *names);
    int k = 0;
    if (!c->model->tied) snprintf(buf[k++], sizeof buf[0], "output.weight");
    snprintf(buf[k++], sizeof buf[0], "token_embd.weight");
    for (int l = 0; l < m->n_layer; l++)
        for (int j = 0; j < PER_BLOCK; j++) snprintf(buf[k++], sizeof buf[0], "blk.%d.%s", l, per_block[j]);
    for (int i = 0; i < k; i++) names[i] = buf[i];
    tokd_qplan p;
    tokd_qplan_init(&p, t, m, names, (uint64_t)k);
    p.has_imatrix = c->imatrix;
    char got[7][96] = {{0}}, output = '-', embd = '-';
    for (int i = 0; i < k; i++) {
        const uint32_t ty = tokd_qplan_type(&p, names[i], 256);
        int l = -1;
        if (sscanf(names[i], "blk.%d.", &l) != 1) {
            *(strcmp(names[i], "output.weight") ? &embd : &output) = type_code(ty);
            continue;
        }
        for (int r = 0; r < 7; r++)
            if (strstr(names[i], ROLE_NAMES[r]) && l < 95) got[r][l] = type_code(ty);
    }
    CHECK(output == c->output && embd == c->token_embd, "%s, %d layers, %s: output %c token_embd %c, want %c %c", m->arch,
          m->n_layer, c->target, output, embd, c->output, c->token_embd);
    for (int r = 0; r < 7; r++)
        CHECK(!strcmp(got[r], c->roles[r]), "%s, %d layers, %d experts, %s: %s %s, want %s", m->arch, m->n_layer, m->n_expert,
              c->target, ROLE_NAMES[r], got[r], c->roles[r]);
    free(buf);
    free(names);
}

static void check_rules(void) {
    for (size_t i = 0; i < sizeof RULE_CASES / sizeof RULE_CASES[0]; i++) check_rule_case(&RULE_CASES[i]);

    const tokd_qtarget *km = tokd_qtarget_find("q4_k_m"), *q8 = tokd_qtarget_find("Q8_0"), *q40 = tokd_qtarget_find("Q4_0"),
                       *f16 = tokd_qtarget_find("F16"), *q4k = tokd_qtarget_find("Q4_K");
    CHECK(km && q8 && q40 && f16 && q4k, "targets found (case-insensitive)");
    CHECK(!tokd_qtarget_find("Q4_K_X") && !tokd_qtarget_find("") && !tokd_qtarget_find("IQ1_S"), "unknown targets");
    if (!km || !q8 || !q40 || !f16 || !q4k) return;
    tokd_qplan p;
    /* rows of 896 (Qwen2.5-0.5B): K-quants fall back; tied output -> token_embd is the output */
    const char *qn[] = {"token_embd.weight", "blk.0.attn_v.weight"};
    const tokd_qmodel one = {"qwen2", 1, 14, 2, 0};
    tokd_qplan_init(&p, km, &one, qn, 2);
    CHECK(tokd_qplan_type(&p, "token_embd.weight", 896) == GGML_TYPE_Q8_0, "tied output with rows of 896 -> Q8_0");
    CHECK(tokd_qplan_type(&p, "blk.0.attn_v.weight", 896) == GGML_TYPE_Q8_0, "Q6_K rows of 896 -> Q8_0");
    CHECK(tokd_qplan_type(&p, "blk.0.attn_q.weight", 896) == GGML_TYPE_Q5_0, "Q4_K rows of 896 -> Q5_0");
    tokd_qplan_init(&p, tokd_qtarget_find("Q3_K_S"), &one, qn, 2);
    CHECK(tokd_qplan_type(&p, "blk.0.attn_q.weight", 896) == GGML_TYPE_IQ4_NL, "Q3_K rows of 896 -> IQ4_NL");
    tokd_qplan_init(&p, tokd_qtarget_find("IQ4_XS"), &one, qn, 2);
    CHECK(tokd_qplan_type(&p, "blk.0.attn_q.weight", 896) == GGML_TYPE_IQ4_NL, "IQ4_XS rows of 896 -> IQ4_NL");
    CHECK(tokd_qplan_type(&p, "blk.0.attn_q.weight", 100) == GGML_TYPE_F16, "IQ4_XS rows of 100 -> F16");
    tokd_qplan_init(&p, q4k, &one, qn, 2);
    CHECK(tokd_qplan_type(&p, "blk.0.attn_q.weight", 2048) == GGML_TYPE_Q4_K, "plain Q4_K");
    CHECK(tokd_qplan_type(&p, "blk.0.attn_v.weight", 2048) == GGML_TYPE_Q4_K, "plain Q4_K: attn_v too");
    CHECK(tokd_qplan_type(&p, "token_embd.weight", 2048) == GGML_TYPE_Q6_K, "tied output Q6_K");
    tokd_qplan_init(&p, q8, &one, qn, 2);
    CHECK(tokd_qplan_type(&p, "token_embd.weight", 2048) == GGML_TYPE_Q8_0, "Q8_0 keeps a Q8_0 output");
    tokd_qplan_init(&p, q40, &one, qn, 2);
    CHECK(tokd_qplan_type(&p, "blk.0.attn_q.weight", 100) == GGML_TYPE_F16, "rows of 100 -> F16");
    tokd_qplan_init(&p, f16, &one, qn, 2);
    CHECK(tokd_qplan_type(&p, "token_embd.weight", 2048) == GGML_TYPE_F16, "F16 target: output F16 too");
    /* an expert model's ffn_down must name its layer */
    const tokd_qmodel moe = {"llama", 4, 8, 2, 8};
    tokd_qplan_init(&p, km, &moe, qn, 2);
    CHECK(tokd_qplan_type(&p, "ffn_down_exps.weight", 2048) == TOKD_QTYPE_NO_LAYER, "expert tensor without a layer");
    CHECK(tokd_qplan_type(&p, "blk.4.ffn_down_exps.weight", 2048) == TOKD_QTYPE_NO_LAYER, "expert tensor past the last layer");
    CHECK(tokd_qplan_type(&p, "blk.3.ffn_down_exps.weight", 2048) == GGML_TYPE_Q6_K, "expert tensor of the last layer");
    CHECK(tokd_qplan_converts("blk.0.attn_q.weight", 2) && !tokd_qplan_converts("blk.0.attn_norm.weight", 1) &&
              !tokd_qplan_converts("blk.0.attn_q.bias", 1) && !tokd_qplan_converts("output_norm.weight", 2) &&
              !tokd_qplan_converts("blk.0.ffn_gate_inp.weight", 2) && tokd_qplan_converts("blk.0.ffn_up_exps.weight", 3),
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
    /* Every other target: the file llama-quantize (llama.cpp c392e5094) writes for the
     * same command, by size and FNV-1a hash (checked byte for byte there), and it loads.
     * The plain K types are tokd's own (no reference). */
    static const struct {
        const char *type;
        size_t size;
        uint64_t fnv1a;
    } more[] = {
        {"Q4_1", 903648, 0x7889a8b6ec9b3492ull},   {"Q5_0", 981472, 0x840884d9f653cae1ull},
        {"Q5_1", 1059296, 0x73cb461c57eabc9bull},  {"Q6_K", 1146848, 0xf6bc6e92492746dbull},
        {"Q5_K_M", 1001056, 0x569d9480cd84feb9ull}, {"Q2_K_M", 581600, 0x2f59b72fdfaf008aull},
        {"Q3_K_S", 660448, 0xb59542ace99378adull}, {"Q3_K_M", 721120, 0xa735ebbc8f71249full},
        {"Q3_K_L", 770272, 0x2bf9a52e2d835501ull}, {"Q4_K_S", 829920, 0x1cc5363f032ee540ull},
        {"Q5_K_S", 981472, 0xe50e1036f040e277ull}, {"IQ4_NL", 829920, 0xf3343415e6bd9434ull},
        {"IQ4_XS", 792032, 0x55241c1cd0f2c066ull}, {"BF16", 2770400, 0xc356408ab201745eull},
        {"Q2_K", 0, 0},                            {"Q3_K", 0, 0},
        {"Q4_K", 0, 0},                            {"Q5_K", 0, 0},
    };
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
        tmp_path(a, sizeof a, more[i].type);
        int rc = tokd_quantize_file(src, a, more[i].type, 2, NULL, &err);
        CHECK(rc == 0, "quantize %s: %s", more[i].type, rc ? err.msg : "");
        if (rc) continue;
        if (more[i].size) {
            size_t n = 0;
            const uint64_t h = file_fnv1a(a, &n);
            CHECK(n == more[i].size && h == more[i].fnv1a, "%s: %zu bytes, FNV-1a %016llx; llama.cpp's file: %zu, %016llx",
                  more[i].type, n, (unsigned long long)h, more[i].size, (unsigned long long)more[i].fnv1a);
        }
        tokd_model *m = tokd_model_load(a, &err);
        CHECK(m != NULL, "%s loads: %s", more[i].type, m ? "" : err.msg);
        tokd_model_free(m);
    }

    /* llama-quantize's options: the same files as llama-quantize writes with them */
    static const struct {
        const char *src, *type;
        tokd_quantize_opts opts;
        size_t size;
        uint64_t fnv1a;
    } with_opts[] = {
        {"tiny-llama-f32.gguf", "Q4_K_M", {.pure = true}, 792032, 0xafb7cd6ffc22345full},
        {"tiny-llama-f32.gguf", "Q4_K_M", {.output_type = "q8_0"}, 895584, 0xca9e8717274f3c40ull},
        {"tiny-llama-f32.gguf", "IQ4_XS", {.embd_type = "q6_k"}, 829920, 0xb46d0d2823729cd6ull},
        {"tiny-llama-f32.gguf", "F16", {.output_type = "q4_0"}, 2581984, 0x8412f7e0a2ebd5acull},
        {"tiny-llama-Q8_0.gguf", "Q4_K_M", {.allow_requantize = true}, 863840, 0x491e5ca8c77f6f0aull},
        {"tiny-qwen2-F16.gguf", "Q4_K_M", {.output_type = "q5_0"}, 818112, 0x1caaee346b08c3a8ull}, /* tied output */
        {"stories260K.gguf", "Q4_K_M", {0}, 304096, 0x1233da4eeaedbafbull}, /* rows of 64 and 172: the fallbacks */
    };
    for (size_t i = 0; i < sizeof with_opts / sizeof with_opts[0]; i++) {
        char in[512];
        snprintf(in, sizeof in, "%s/models/%s", t_shared(), with_opts[i].src);
        tmp_path(a, sizeof a, "opts");
        int rc = tokd_quantize_file_opts(in, a, with_opts[i].type, &with_opts[i].opts, 2, NULL, &err);
        CHECK(rc == 0, "options case %zu: %s", i, rc ? err.msg : "");
        size_t n = 0;
        const uint64_t h = rc ? 0 : file_fnv1a(a, &n);
        CHECK(n == with_opts[i].size && h == with_opts[i].fnv1a, "options case %zu (%s from %s): %zu bytes, %016llx", i,
              with_opts[i].type, with_opts[i].src, n, (unsigned long long)h);
        unlink(a);
    }
    tmp_path(a, sizeof a, "bad");
    const tokd_quantize_opts bad_type = {.output_type = "Q9_9"}, q8_1 = {.embd_type = "Q8_1"};
    CHECK(tokd_quantize_file_opts(src, a, "Q4_0", &bad_type, 2, NULL, &err) != 0 && strstr(err.msg, "Q9_9"),
          "unknown override type: %s", err.msg);
    CHECK(tokd_quantize_file_opts(src, a, "Q4_0", &q8_1, 2, NULL, &err) != 0 && strstr(err.msg, "Q8_1"),
          "activation-only type refused as an override: %s", err.msg);
    CHECK(access(a, F_OK) != 0, "no output after a refused option");
    const tokd_quantize_opts pure = {.pure = true};
    char stories[512];
    snprintf(stories, sizeof stories, "%s/models/stories260K.gguf", t_shared());
    CHECK(tokd_quantize_file_opts(stories, a, "Q4_K_M", &pure, 2, NULL, &err) != 0 && strstr(err.msg, "not a multiple"),
          "--pure has no fallback for rows of 64: %s", err.msg);
    CHECK(access(a, F_OK) != 0, "no partial output after rows that do not fit");

    /* errors */
    tmp_path(a, sizeof a, "bad");
    CHECK(tokd_quantize_file(src, a, "Q7_Z", 2, NULL, &err) != 0 && strstr(err.msg, "Q7_Z"), "unknown type: %s", err.msg);
    CHECK(tokd_quantize_file(src, a, "iq1_s", 2, NULL, &err) != 0 && strstr(err.msg, "reads IQ1_S files but does not write"),
          "IQ1_S is named as read-only: %s", err.msg);
    CHECK(tokd_quantize_file(src, a, "iq2_xxs", 2, NULL, &err) != 0 && strstr(err.msg, "needs an importance matrix"),
          "IQ2_XXS without an importance matrix is refused, as in llama.cpp: %s", err.msg);
    CHECK(access(a, F_OK) != 0, "no output for a type tokd does not write");
    snprintf(ref, sizeof ref, "%s/models/tiny-llama-Q8_0.gguf", t_shared());
    CHECK(tokd_quantize_file(ref, a, "Q4_0", 2, NULL, &err) != 0 && strstr(err.msg, "already quantized"),
          "requantize refused: %s", err.msg);
    CHECK(access(a, F_OK) != 0, "no partial output left behind");
    CHECK(tokd_quantize_file("/nonexistent/x.gguf", a, "Q4_0", 2, NULL, &err) != 0, "missing input");

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    CHECK(system(cmd) == 0, "cleanup");
    T_DONE();
}
