/* synth.c — see synth.h. */
#include "synth.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gguf.h"
#include "gguf_stream.h"
#include "kernels/types.h"
#include "quantize.h"

static const tokd_synth_shape shapes[] = {
    /* name, arch, embd, layers, heads, kv heads, ffn, vocab, ctx, rope base, eps, bias, tied, vocab file,
       Llama 3 RoPE scaling: factor, low and high frequency factors, original context */
    {"tiny", "llama", 256, 2, 4, 2, 512, 512, 2048, 10000.0f, 1e-5f, false, false, "models/stories260K.gguf",
     0, 0, 0, 0},
    {"tiny-qwen2", "qwen2", 256, 2, 4, 2, 512, 512, 2048, 1000000.0f, 1e-6f, true, true, "models/stories260K.gguf",
     0, 0, 0, 0},
    {"tiny-llama3", "llama", 256, 2, 4, 2, 512, 512, 2048, 500000.0f, 1e-5f, false, true, "models/stories260K.gguf",
     32.0f, 1.0f, 4.0f, 8192},
    {"tinyllama-1.1b", "llama", 2048, 22, 32, 4, 5632, 32000, 2048, 10000.0f, 1e-5f, false, false,
     "vocab/ggml-vocab-llama-spm.gguf", 0, 0, 0, 0},
    {"llama-3.2-1b", "llama", 2048, 16, 32, 8, 8192, 128256, 131072, 500000.0f, 1e-5f, false, true,
     "vocab/ggml-vocab-gpt-2.gguf", 32.0f, 1.0f, 4.0f, 8192},
    {"qwen2.5-0.5b", "qwen2", 896, 24, 14, 2, 4864, 151936, 32768, 1000000.0f, 1e-6f, true, true,
     "vocab/ggml-vocab-gpt-2.gguf", 0, 0, 0, 0},
};

const tokd_synth_shape *tokd_synth_shape_find(const char *name) {
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (!strcasecmp(name, shapes[i].name)) return &shapes[i];
    return NULL;
}

const char *tokd_synth_shape_list(void) { return "tiny tiny-qwen2 tiny-llama3 tinyllama-1.1b llama-3.2-1b qwen2.5-0.5b"; }

/* ---- random numbers ----------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t hash_str(const char *s) { /* FNV-1a */
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

typedef enum { FILL_NORMAL, FILL_ONES, FILL_ROPE_FACTORS } fill_kind;

typedef struct {
    uint64_t tensor_seed;
    fill_kind kind;
    float std;
    const tokd_synth_shape *shape;
} synth_rows;

/* The divisor of RoPE pair i of n_pairs under Llama 3.1's scaling (the rope_scaling
 * "llama3" rule of the Hugging Face configs): pairs whose wavelength is under
 * original context / high_freq keep their frequency (1), those over original context /
 * low_freq are divided by factor, and those between blend the two by where the
 * wavelength falls. */
static float llama3_rope_factor(const tokd_synth_shape *sh, int64_t i, int64_t n_pairs) {
    const double freq = pow((double)sh->rope_base, -(double)i / (double)n_pairs), wavelen = 2.0 * M_PI / freq;
    const double orig = sh->rope_orig_ctx, low = sh->rope_low_freq, high = sh->rope_high_freq;
    if (wavelen < orig / high) return 1.0f;
    if (wavelen > orig / low) return sh->rope_factor;
    const double smooth = (orig / wavelen - low) / (high - low);
    return (float)(1.0 / ((1.0 - smooth) / sh->rope_factor + smooth));
}

/* Near-normal values: a sum of four 16-bit uniforms (Irwin-Hall, variance 4/12), scaled
 * to the wanted std. One 64-bit draw per element. */
static void fill_synth(void *ctx, int64_t row, float *out, int64_t n) {
    const synth_rows *r = ctx;
    if (r->kind == FILL_ONES) {
        for (int64_t i = 0; i < n; i++) out[i] = 1.0f;
        return;
    }
    if (r->kind == FILL_ROPE_FACTORS) {
        for (int64_t i = 0; i < n; i++) out[i] = llama3_rope_factor(r->shape, i, n);
        return;
    }
    uint64_t s = r->tensor_seed ^ ((uint64_t)row * 0xD1B54A32D192ED03ull);
    splitmix64(&s);
    const float scale = r->std * 1.7320508f / 65536.0f;
    for (int64_t i = 0; i < n; i++) {
        uint64_t x = splitmix64(&s);
        uint32_t sum = (uint32_t)(x & 0xFFFF) + (uint32_t)((x >> 16) & 0xFFFF) + (uint32_t)((x >> 32) & 0xFFFF) +
                       (uint32_t)(x >> 48);
        out[i] = ((float)sum - 131070.0f) * scale;
    }
}

/* ---- the model ---------------------------------------------------------------------- */

typedef struct {
    char name[64];
    uint32_t n_dims;
    uint64_t ne[2];
    fill_kind kind;
} synth_tensor;

static void add(synth_tensor *ts, int *n, const char *name, uint64_t ne0, uint64_t ne1, fill_kind kind) {
    synth_tensor *t = &ts[(*n)++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = ne1 ? 2 : 1;
    t->ne[0] = ne0;
    t->ne[1] = ne1 ? ne1 : 1;
    t->kind = kind;
}

/* Copy the tokenizer keys of the vocabulary file, padded to n_vocab tokens. */
static int copy_vocab(gguf_writer *w, const gguf_file *v, int64_t n_file, int64_t n_vocab, tokd_err *err) {
    for (uint64_t i = 0; i < v->n_kv; i++) {
        const gguf_kv *kv = &v->kv[i];
        if (kv->key.len < 10 || memcmp(kv->key.ptr, "tokenizer.", 10) != 0) continue;
        bool tokens = gguf_str_eq(kv->key, "tokenizer.ggml.tokens"), scores = gguf_str_eq(kv->key, "tokenizer.ggml.scores"),
             types = gguf_str_eq(kv->key, "tokenizer.ggml.token_type");
        if (n_vocab == n_file || !(tokens || scores || types)) {
            gguf_writer_copy_kv(w, kv);
            continue;
        }
        const gguf_array *a = &kv->value.v.arr;
        if (kv->value.type != GGUF_TYPE_ARRAY || (int64_t)a->n != n_file)
            return tokd_seterr(err, "vocabulary: '%.*s' does not have one entry per token", (int)kv->key.len, kv->key.ptr);
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)kv->key.len, kv->key.ptr);
        if (tokens) {
            if (a->elem_type != GGUF_TYPE_STRING) return tokd_seterr(err, "vocabulary: tokenizer.ggml.tokens is not strings");
            gguf_str *strs = tokd_xmalloc((size_t)n_vocab * sizeof *strs);
            char *pads = tokd_xmalloc((size_t)(n_vocab - n_file) * 24);
            memcpy(strs, a->strs, (size_t)n_file * sizeof *strs);
            for (int64_t t = n_file; t < n_vocab; t++) {
                char *p = pads + (size_t)(t - n_file) * 24;
                int len = snprintf(p, 24, "[PAD%lld]", (long long)t);
                strs[t] = (gguf_str){p, (uint64_t)len};
            }
            gguf_writer_set_str_arr(w, key, strs, (uint64_t)n_vocab);
            free(strs);
            free(pads);
        } else {
            size_t es = gguf_type_size(a->elem_type);
            if (!es || es > 8) return tokd_seterr(err, "vocabulary: '%s' has an unexpected element type", key);
            uint8_t *data = tokd_xcalloc((size_t)n_vocab, es);
            memcpy(data, a->data, (size_t)n_file * es);
            for (int64_t t = n_file; t < n_vocab; t++) {
                uint8_t *p = data + (size_t)t * es;
                if (types) { /* 5 = unused, in the array's integer type */
                    uint64_t five = 5;
                    memcpy(p, &five, es);
                }
                /* scores: 0 (all-zero bytes) */
            }
            gguf_writer_set_arr(w, key, a->elem_type, data, (uint64_t)n_vocab);
            free(data);
        }
    }
    return 0;
}

int tokd_synth(const tokd_synth_params *p, tokd_err *err) {
    const tokd_synth_shape *sh = tokd_synth_shape_find(p->shape);
    if (!sh) return tokd_seterr(err, "unknown shape '%s' (shapes: %s)", p->shape, tokd_synth_shape_list());
    const tokd_qtarget *target = tokd_qtarget_find(p->type);
    if (!target) return tokd_qtarget_unknown(p->type, err);
    if (!tokd_qtarget_writes_without_imatrix(target))
        return tokd_seterr(err, "%s needs an importance matrix, which random weights do not have: synthesise F16 and "
                                "use tokd quantize --imatrix",
                           target->name);

    char vpath[4096];
    if (p->vocab_path) snprintf(vpath, sizeof vpath, "%s", p->vocab_path);
    else {
        const char *shared = getenv("TOKD_SHARED");
        snprintf(vpath, sizeof vpath, "%s/%s", shared ? shared : "../shared", sh->default_vocab);
    }
    gguf_file *vf = gguf_open(vpath, err);
    if (!vf) return -1;
    int rc = -1;
    gguf_writer *meta = gguf_writer_new();
    synth_tensor *ts = NULL;
    gguf_stream_tensor *infos = NULL;
    const char **names = NULL;
    gguf_stream *s = NULL;
    tokd_pool *pool = NULL;

    gguf_array toks;
    int r = gguf_get_arr(vf, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks, err);
    if (r) {
        if (r > 0) tokd_seterr(err, "'%s' has no tokenizer (tokenizer.ggml.tokens)", vpath);
        goto done;
    }
    int64_t n_file = (int64_t)toks.n, n_vocab = p->n_vocab > 0 ? p->n_vocab : sh->n_vocab;
    if (n_file > n_vocab) {
        if (p->log) fprintf(p->log, "synth: the vocabulary has %lld tokens: n_vocab %lld -> %lld\n", (long long)n_file,
                            (long long)n_vocab, (long long)n_file);
        n_vocab = n_file;
    } else if (n_file < n_vocab && p->log) {
        fprintf(p->log, "synth: the vocabulary has %lld tokens: padded to %lld with unused [PAD<id>] tokens\n",
                (long long)n_file, (long long)n_vocab);
    }

    /* metadata */
    const char *a = sh->arch;
    char key[128], name[96];
#define K(suffix) (snprintf(key, sizeof key, "%s.%s", a, suffix), key)
    gguf_writer_set_str(meta, "general.architecture", a);
    snprintf(name, sizeof name, "synth-%s", sh->name);
    gguf_writer_set_str(meta, "general.name", name);
    gguf_writer_set_u32(meta, K("context_length"), (uint32_t)sh->n_ctx);
    gguf_writer_set_u32(meta, K("embedding_length"), (uint32_t)sh->n_embd);
    gguf_writer_set_u32(meta, K("block_count"), (uint32_t)sh->n_layer);
    gguf_writer_set_u32(meta, K("feed_forward_length"), (uint32_t)sh->n_ff);
    gguf_writer_set_u32(meta, K("attention.head_count"), (uint32_t)sh->n_head);
    gguf_writer_set_u32(meta, K("attention.head_count_kv"), (uint32_t)sh->n_head_kv);
    gguf_writer_set_f32(meta, K("attention.layer_norm_rms_epsilon"), sh->norm_eps);
    gguf_writer_set_f32(meta, K("rope.freq_base"), sh->rope_base);
    gguf_writer_set_u32(meta, K("rope.dimension_count"), (uint32_t)(sh->n_embd / sh->n_head));
    gguf_writer_set_u32(meta, K("vocab_size"), (uint32_t)n_vocab);
#undef K
    gguf_writer_set_u32(meta, "general.quantization_version", 2);
    gguf_writer_set_u32(meta, "general.file_type", target->file_type);
    gguf_writer_set_u64(meta, "tokd.synth.seed", p->seed);
    if (copy_vocab(meta, vf, n_file, n_vocab, err)) goto done;

    /* tensors, in llama.cpp's order (by name, grouped by block) */
    const int64_t E = sh->n_embd, hd = sh->n_embd / sh->n_head, qd = sh->n_head * hd, kvd = sh->n_head_kv * hd, F = sh->n_ff;
    int max_t = 4 + sh->n_layer * 12, n = 0;
    ts = tokd_xcalloc((size_t)max_t, sizeof *ts);
    if (!sh->tied_output) add(ts, &n, "output.weight", (uint64_t)E, (uint64_t)n_vocab, FILL_NORMAL);
    add(ts, &n, "output_norm.weight", (uint64_t)E, 0, FILL_ONES);
    if (sh->rope_factor > 0) add(ts, &n, "rope_freqs.weight", (uint64_t)(hd / 2), 0, FILL_ROPE_FACTORS);
    add(ts, &n, "token_embd.weight", (uint64_t)E, (uint64_t)n_vocab, FILL_NORMAL);
    for (int l = 0; l < sh->n_layer; l++) {
        char nm[64];
#define N(s) (snprintf(nm, sizeof nm, "blk.%d.%s", l, s), nm)
        if (sh->qkv_bias) add(ts, &n, N("attn_k.bias"), (uint64_t)kvd, 0, FILL_NORMAL);
        add(ts, &n, N("attn_k.weight"), (uint64_t)E, (uint64_t)kvd, FILL_NORMAL);
        add(ts, &n, N("attn_norm.weight"), (uint64_t)E, 0, FILL_ONES);
        add(ts, &n, N("attn_output.weight"), (uint64_t)qd, (uint64_t)E, FILL_NORMAL);
        if (sh->qkv_bias) add(ts, &n, N("attn_q.bias"), (uint64_t)qd, 0, FILL_NORMAL);
        add(ts, &n, N("attn_q.weight"), (uint64_t)E, (uint64_t)qd, FILL_NORMAL);
        if (sh->qkv_bias) add(ts, &n, N("attn_v.bias"), (uint64_t)kvd, 0, FILL_NORMAL);
        add(ts, &n, N("attn_v.weight"), (uint64_t)E, (uint64_t)kvd, FILL_NORMAL);
        add(ts, &n, N("ffn_down.weight"), (uint64_t)F, (uint64_t)E, FILL_NORMAL);
        add(ts, &n, N("ffn_gate.weight"), (uint64_t)E, (uint64_t)F, FILL_NORMAL);
        add(ts, &n, N("ffn_norm.weight"), (uint64_t)E, 0, FILL_ONES);
        add(ts, &n, N("ffn_up.weight"), (uint64_t)E, (uint64_t)F, FILL_NORMAL);
#undef N
    }
    names = tokd_xcalloc((size_t)n, sizeof *names);
    for (int i = 0; i < n; i++) names[i] = ts[i].name;
    tokd_qmodel qm = {.n_layer = sh->n_layer, .n_head = sh->n_head, .n_head_kv = sh->n_head_kv};
    snprintf(qm.arch, sizeof qm.arch, "%s", sh->arch);
    tokd_qplan plan;
    tokd_qplan_init(&plan, target, &qm, names, (uint64_t)n);
    infos = tokd_xcalloc((size_t)n, sizeof *infos);
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        gguf_stream_tensor *o = &infos[i];
        o->name = ts[i].name;
        o->n_dims = ts[i].n_dims;
        o->ne[0] = ts[i].ne[0];
        o->ne[1] = ts[i].ne[1];
        o->ne[2] = o->ne[3] = 1;
        o->type = tokd_qplan_converts(ts[i].name, ts[i].n_dims) ? tokd_qplan_type(&plan, ts[i].name, ts[i].ne[0])
                                                                 : GGML_TYPE_F32;
        const tokd_type_traits *tt = tokd_type_get(o->type);
        o->nbytes = o->ne[1] * tokd_row_bytes(tt, (int64_t)o->ne[0]);
        total += o->nbytes;
    }
    s = gguf_stream_create(p->out_path, meta, infos, (uint64_t)n, err);
    if (!s) goto done;
    pool = tokd_pool_new(p->n_threads);
    double t0 = tokd_now();
    uint64_t done_bytes = 0;
    for (int i = 0; i < n; i++) {
        synth_rows sr = {p->seed * 0x9E3779B97F4A7C15ull ^ hash_str(ts[i].name), ts[i].kind, 0.02f, sh};
        if (tokd_quant_stream_tensor(pool, s, infos[i].type, (int64_t)ts[i].ne[1], (int64_t)ts[i].ne[0], NULL, fill_synth, &sr,
                                     err)) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            tokd_seterr(err, "tensor '%s': %s", ts[i].name, msg);
            goto done;
        }
        done_bytes += infos[i].nbytes;
        if (p->log && infos[i].nbytes > (64u << 20))
            fprintf(p->log, "synth: %-28s %-5s %6.1f%% (%.0f s)\n", ts[i].name, ggml_type_name(infos[i].type),
                    100.0 * (double)done_bytes / (double)total, tokd_now() - t0);
    }
    rc = gguf_stream_close(s, err);
    s = NULL;
    if (!rc && p->log)
        fprintf(p->log, "synth: wrote %s: %s, %s, %lld tensors, %.1f MiB in %.1f s\n", p->out_path, sh->name, target->name,
                (long long)n, (double)total / (1 << 20), tokd_now() - t0);
done:
    gguf_stream_abort(s);
    tokd_pool_free(pool);
    free(infos);
    free(names);
    free(ts);
    gguf_writer_free(meta);
    gguf_close(vf);
    return rc;
}
