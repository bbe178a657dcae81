/* model.c — loading a Llama-family GGUF model: hyperparameters from metadata, every
 * weight bound to its mmapped tensor after checking its shape and type, then the
 * matrices copied once into huge pages for the kernels (pack_weights: the packed layout
 * where the type has one on this CPU, the file's layout otherwise).
 *
 * Architectures: `llama` (also Mistral-style files) and `qwen2` (q/k/v biases, NEOX
 * RoPE). Small vectors (norm weights, biases) are converted to F32 once at load; the
 * matrices stay in the file's types and are read through the type table. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_EMBD 65536
#define MAX_LAYERS 1024
#define MAX_HEADS 1024
#define MAX_FF (1 << 20)

static int get_u32_req(const gguf_file *f, const char *arch, const char *suffix, int32_t *out, int32_t max, tokd_err *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    uint32_t v;
    int r = gguf_get_u32(f, key, &v, err);
    if (r < 0) return -1;
    if (r > 0) return tokd_seterr(err, "missing metadata '%s'", key);
    if (v == 0 || v > (uint32_t)max) return tokd_seterr(err, "metadata '%s' = %u is out of range (1..%d)", key, v, max);
    *out = (int32_t)v;
    return 0;
}

static int get_u32_opt(const gguf_file *f, const char *arch, const char *suffix, int32_t *out, int32_t max, tokd_err *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    uint32_t v;
    int r = gguf_get_u32(f, key, &v, err);
    if (r < 0) return -1;
    if (r > 0) return 0;
    if (v == 0 || v > (uint32_t)max) return tokd_seterr(err, "metadata '%s' = %u is out of range (1..%d)", key, v, max);
    *out = (int32_t)v;
    return 0;
}

static int get_f32_opt(const gguf_file *f, const char *arch, const char *suffix, float *out, tokd_err *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int r = gguf_get_f32(f, key, out, err);
    if (r < 0) return -1;
    if (r == 0 && !isfinite(*out)) return tokd_seterr(err, "metadata '%s' is not finite", key);
    return 0;
}

static int load_hparams(tokd_model *m, tokd_err *err) {
    const gguf_file *f = m->gguf;
    gguf_str arch;
    int r = gguf_get_str(f, "general.architecture", &arch, err);
    if (r < 0) return -1;
    if (r > 0) return tokd_seterr(err, "missing metadata 'general.architecture' (vocabulary-only file?)");
    tokd_hparams *hp = &m->hp;
    if (gguf_str_eq(arch, "llama")) hp->arch = TOKD_ARCH_LLAMA;
    else if (gguf_str_eq(arch, "qwen2")) hp->arch = TOKD_ARCH_QWEN2;
    else {
        char a[32];
        size_t n = arch.len < 31 ? (size_t)arch.len : 31;
        for (size_t i = 0; i < n; i++) a[i] = (arch.ptr[i] >= 0x20 && arch.ptr[i] < 0x7f) ? arch.ptr[i] : '?';
        a[n] = 0;
        return tokd_seterr(err, "unsupported architecture '%s' (supported: llama, qwen2)", a);
    }
    snprintf(m->arch_name, sizeof m->arch_name, "%s", hp->arch == TOKD_ARCH_LLAMA ? "llama" : "qwen2");
    gguf_str name;
    if (gguf_get_str(f, "general.name", &name, NULL) == 0) {
        size_t n = name.len < sizeof m->name - 1 ? (size_t)name.len : sizeof m->name - 1;
        memcpy(m->name, name.ptr, n);
        m->name[n] = 0;
    }
    const char *a = m->arch_name;
    if (get_u32_req(f, a, "embedding_length", &hp->n_embd, MAX_EMBD, err) ||
        get_u32_req(f, a, "block_count", &hp->n_layer, MAX_LAYERS, err) ||
        get_u32_req(f, a, "feed_forward_length", &hp->n_ff, MAX_FF, err) ||
        get_u32_req(f, a, "attention.head_count", &hp->n_head, MAX_HEADS, err))
        return -1;
    hp->n_head_kv = hp->n_head;
    hp->n_ctx_train = 2048;
    if (get_u32_opt(f, a, "attention.head_count_kv", &hp->n_head_kv, MAX_HEADS, err) ||
        get_u32_opt(f, a, "context_length", &hp->n_ctx_train, 1 << 24, err))
        return -1;
    if (hp->n_embd % hp->n_head) return tokd_seterr(err, "embedding length %d is not a multiple of the head count %d", hp->n_embd, hp->n_head);
    hp->head_dim = hp->n_embd / hp->n_head;
    if (get_u32_opt(f, a, "attention.key_length", &hp->head_dim, 4096, err)) return -1;
    int32_t vdim = hp->head_dim;
    if (get_u32_opt(f, a, "attention.value_length", &vdim, 4096, err)) return -1;
    if (vdim != hp->head_dim) return tokd_seterr(err, "key length %d != value length %d is not supported", hp->head_dim, vdim);
    if (hp->n_head % hp->n_head_kv)
        return tokd_seterr(err, "head count %d is not a multiple of the KV head count %d", hp->n_head, hp->n_head_kv);
    hp->n_rot = hp->head_dim;
    if (get_u32_opt(f, a, "rope.dimension_count", &hp->n_rot, 4096, err)) return -1;
    if (hp->n_rot > hp->head_dim || hp->n_rot % 2)
        return tokd_seterr(err, "rope dimension count %d must be even and <= the head size %d", hp->n_rot, hp->head_dim);
    hp->rope_freq_base = 10000.0f;
    hp->rope_freq_scale = 1.0f;
    hp->norm_eps = 1e-5f;
    if (get_f32_opt(f, a, "rope.freq_base", &hp->rope_freq_base, err) ||
        get_f32_opt(f, a, "attention.layer_norm_rms_epsilon", &hp->norm_eps, err))
        return -1;
    /* linear RoPE scaling: rope.scaling.type = linear with rope.scaling.factor, or the
     * older rope.scale_linear */
    float factor = 0.0f;
    if (get_f32_opt(f, a, "rope.scale_linear", &factor, err)) return -1;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    gguf_str st;
    int has_type = gguf_get_str(f, key, &st, err);
    if (has_type < 0) return -1;
    if (has_type == 0 && !gguf_str_eq(st, "none") && !gguf_str_eq(st, "linear"))
        return tokd_seterr(err, "unsupported RoPE scaling type '%.*s' (supported: none, linear)", (int)(st.len > 40 ? 40 : st.len), st.ptr);
    if (has_type != 0 || gguf_str_eq(st, "linear"))
        if (get_f32_opt(f, a, "rope.scaling.factor", &factor, err)) return -1;
    if (has_type == 0 && gguf_str_eq(st, "none")) factor = 0.0f;
    if (factor != 0.0f) {
        if (!(factor > 0.0f)) return tokd_seterr(err, "RoPE scaling factor %g must be positive", factor);
        hp->rope_freq_scale = 1.0f / factor;
    }
    if (!(hp->rope_freq_base > 0.0f)) return tokd_seterr(err, "rope.freq_base %g must be positive", hp->rope_freq_base);
    if (!(hp->norm_eps >= 0.0f)) return tokd_seterr(err, "RMS norm epsilon %g must be >= 0", hp->norm_eps);
    hp->rope_neox = hp->arch == TOKD_ARCH_QWEN2;
    return 0;
}

/* Bind a matrix of n_out rows x K columns. */
static int bind_matrix(tokd_model *m, const char *name, int64_t K, int64_t n_out, tokd_matrix *out, tokd_err *err) {
    const gguf_tensor *t = gguf_find_tensor(m->gguf, name);
    if (!t) return tokd_seterr(err, "missing tensor '%s'", name);
    if (t->n_dims > 2 || (int64_t)t->ne[0] != K || (int64_t)t->ne[1] != n_out)
        return tokd_seterr(err, "tensor '%s' has shape [%llu, %llu], expected [%lld, %lld]", name,
                           (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], (long long)K, (long long)n_out);
    const tokd_type_traits *tt = tokd_type_get(t->type);
    if (!tt) return tokd_seterr(err, "tensor '%s' has type %s, which tokd cannot compute with yet", name, ggml_type_name(t->type));
    out->data = t->data;
    out->tt = tt;
    out->K = K;
    out->n_out = n_out;
    out->row_bytes = tokd_row_bytes(tt, K);
    m->weight_bytes += t->nbytes;
    return 0;
}

/* Bind a vector of n elements and convert it to F32 (owned). optional: absent → *out NULL. */
static int load_vector(tokd_model *m, const char *name, int64_t n, bool optional, float **out, tokd_err *err) {
    *out = NULL;
    const gguf_tensor *t = gguf_find_tensor(m->gguf, name);
    if (!t) return optional ? 0 : tokd_seterr(err, "missing tensor '%s'", name);
    if (t->n_dims != 1 || (int64_t)t->ne[0] != n)
        return tokd_seterr(err, "tensor '%s' has %u dims [%llu, ...], expected a vector of %lld", name, t->n_dims,
                           (unsigned long long)t->ne[0], (long long)n);
    const tokd_type_traits *tt = tokd_type_get(t->type);
    if (!tt) return tokd_seterr(err, "tensor '%s' has unsupported type %s", name, ggml_type_name(t->type));
    *out = tokd_xmalloc((size_t)n * sizeof(float));
    tt->to_float(t->data, *out, n);
    m->weight_bytes += t->nbytes;
    return 0;
}

static int bind_weights(tokd_model *m, tokd_err *err) {
    const tokd_hparams *hp = &m->hp;
    int64_t E = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim, kvd = (int64_t)hp->n_head_kv * hp->head_dim;
    const gguf_tensor *emb = gguf_find_tensor(m->gguf, "token_embd.weight");
    if (!emb) return tokd_seterr(err, "missing tensor 'token_embd.weight'");
    if (emb->ne[1] == 0 || emb->ne[1] > (1u << 24)) return tokd_seterr(err, "token_embd.weight has an absurd vocabulary size");
    m->hp.n_vocab = (int32_t)emb->ne[1];
    if (bind_matrix(m, "token_embd.weight", E, hp->n_vocab, &m->tok_embd, err)) return -1;
    if (load_vector(m, "output_norm.weight", E, false, &m->output_norm, err)) return -1;
    /* Llama 3.1 and later: the converter turns rope_scaling (type "llama3") into one
       divisor per rotated pair, which the reference's RoPE applies to each angle */
    if (load_vector(m, "rope_freqs.weight", hp->n_rot / 2, true, &m->rope_freqs, err)) return -1;
    for (int32_t i = 0; m->rope_freqs && i < hp->n_rot / 2; i++)
        if (!(m->rope_freqs[i] > 0.0f && m->rope_freqs[i] < INFINITY))
            return tokd_seterr(err, "rope_freqs.weight[%d] = %g: RoPE frequency factors must be positive and finite", i,
                               m->rope_freqs[i]);
    if (gguf_find_tensor(m->gguf, "output.weight")) {
        if (bind_matrix(m, "output.weight", E, hp->n_vocab, &m->output, err)) return -1;
    } else {
        m->output = m->tok_embd;
        m->tied_output = true;
    }
    m->layers = tokd_xcalloc((size_t)hp->n_layer, sizeof(tokd_layer));
    for (int32_t l = 0; l < hp->n_layer; l++) {
        tokd_layer *L = &m->layers[l];
        char n[96];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", l, s), n)
        if (load_vector(m, NAME("attn_norm.weight"), E, false, &L->attn_norm, err) ||
            load_vector(m, NAME("ffn_norm.weight"), E, false, &L->ffn_norm, err) ||
            bind_matrix(m, NAME("attn_q.weight"), E, qd, &L->wq, err) ||
            bind_matrix(m, NAME("attn_k.weight"), E, kvd, &L->wk, err) ||
            bind_matrix(m, NAME("attn_v.weight"), E, kvd, &L->wv, err) ||
            bind_matrix(m, NAME("attn_output.weight"), qd, E, &L->wo, err) ||
            bind_matrix(m, NAME("ffn_gate.weight"), E, hp->n_ff, &L->w_gate, err) ||
            bind_matrix(m, NAME("ffn_up.weight"), E, hp->n_ff, &L->w_up, err) ||
            bind_matrix(m, NAME("ffn_down.weight"), hp->n_ff, E, &L->w_down, err) ||
            load_vector(m, NAME("attn_q.bias"), qd, true, &L->bq, err) ||
            load_vector(m, NAME("attn_k.bias"), kvd, true, &L->bk, err) ||
            load_vector(m, NAME("attn_v.bias"), kvd, true, &L->bv, err))
            return -1;
#undef NAME
    }
    return 0;
}

/* Every matrix a forward pass multiplies with, in the order a forward pass reads them:
 * the output matrix last, also when it is the embedding table's rows (tied). */
static int model_matrices(tokd_model *m, tokd_matrix **out) {
    int n = 0;
    for (int32_t l = 0; m->layers && l < m->hp.n_layer; l++) {
        tokd_layer *L = &m->layers[l];
        tokd_matrix *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (int i = 0; i < 7; i++) out[n++] = ws[i];
    }
    out[n++] = &m->output;
    return n;
}

/* The file's copy of a matrix is never read again once the arena holds it: drop its
 * pages from this process (the mapping is private and read-only, so they would come back
 * from the file). */
static void drop_file_pages(const tokd_matrix *W) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)W->data + page - 1) & ~(page - 1);
    uintptr_t e = ((uintptr_t)W->data + W->row_bytes * (size_t)W->n_out) & ~(page - 1);
    if (e > a) madvise((void *)a, e - a, MADV_DONTNEED);
}

/* Map the file's pages of a matrix about to be copied in one call (MADV_POPULATE_READ,
 * Linux 5.14+; elsewhere a no-op): the copy then reads mapped pages, where faulting
 * them in 16 pages at a time (fault-around) on this VM took about as long as the copy. */
static void map_file_pages(const void *data, size_t len) {
#ifdef MADV_POPULATE_READ
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = (uintptr_t)data & ~(page - 1), e = ((uintptr_t)data + len + page - 1) & ~(page - 1);
    (void)madvise((void *)a, e - a, MADV_POPULATE_READ);
#else
    (void)data, (void)len;
#endif
}

/* A copy of n bytes split across the pool's threads. Most of a large copy's time is the
 * kernel zeroing the fresh huge pages as they are first written (2.1 GB of BF16 here:
 * two thirds of the load in clear_page_erms), and each thread pays that for its own
 * pages, so the threads share it. */
typedef struct {
    uint8_t *dst;
    const uint8_t *src;
    size_t n;
} copy_job;
static void copy_slice(void *arg, int ith, int nth) {
    const copy_job *j = arg;
    const size_t a = j->n / (size_t)nth * (size_t)ith, b = ith == nth - 1 ? j->n : j->n / (size_t)nth * (size_t)(ith + 1);
    memcpy(j->dst + a, j->src + a, b - a);
}
static void copy_on(tokd_pool *pool, void *dst, const void *src, size_t n) {
    copy_job j = {dst, src, n};
    tokd_pool_run(pool, copy_slice, &j);
}

/* Repack the matrices whose type has a packed form on this CPU (packed.h): a copy in
 * the interleaved layout replaces the file's rows for every product. The other
 * matrices (F32, F16, BF16, and any type without a packed form here) are copied as the
 * file has them, so that decode reads them from huge pages too: TinyLlama shape in BF16,
 * 2 threads, tg 14.7-15.8 tok/s from the file's mapping against 17.9-18.0 from the copy
 * (with the stream dot products of dot_avx512.c, 33.7-34.5; BENCHMARKS.md,
 * thirty-seventh session). All the copies share one buffer in huge pages
 * (tokd_huge_alloc), laid out in the order decode reads them, and the embedding table,
 * which decode reads first, goes in front as the file has it. In the file's mapping,
 * 4 KiB pages, the one row a decode step reads took 37-80 us on this machine's VM (a
 * page walk or fault per new token), against ~10 us here. TOKD_REPACK=0 leaves every
 * matrix in the file's mapping.
 *
 * A tied output matrix (the embedding table's rows) is packed like any other: through
 * the file layout's vec_dot, Llama 3.2 1B's Q6_K output (28 % of a decode step's bytes)
 * cost 1.28x the Q4_K products' time a byte, packed 0.96x (perf, tg128, AVX2). Its rows
 * then stay in the file's mapping for the lookups instead of a second copy in the
 * arena: the model holds the table once, and a lookup pays the page's first touch. */
typedef struct {
    int n;                /* matrices, in decode order (model_matrices) */
    tokd_matrix **ws;
    size_t *bytes;        /* each one's bytes in the arena; 0: stays in the file */
    bool *as_is;          /* copied in the file's layout */
    bool embd_in_file;    /* a tied table: its rows stay in the file for lookups */
    size_t embd_bytes;    /* the embedding table copied in front, or 0 */
    size_t total;         /* the arena's bytes */
} copy_plan;

static void plan_copy(tokd_model *m, copy_plan *p) {
    p->ws = tokd_xmalloc(sizeof *p->ws * (1 + 7 * (size_t)m->hp.n_layer));
    p->bytes = tokd_xmalloc(sizeof *p->bytes * (1 + 7 * (size_t)m->hp.n_layer));
    p->n = model_matrices(m, p->ws);
    p->as_is = tokd_xcalloc((size_t)p->n, sizeof *p->as_is);
    p->total = 0;
    for (int i = 0; i < p->n; i++) {
        p->bytes[i] = tokd_matrix_packed_bytes(p->ws[i], tokd_packed_get(p->ws[i]->tt->id));
        if (!p->bytes[i] && tokd_repack_enabled() && !(m->tied_output && i == p->n - 1)) {
            p->as_is[i] = true;
            p->bytes[i] = p->ws[i]->row_bytes * (size_t)p->ws[i]->n_out;
        }
        p->total += (p->bytes[i] + 63) & ~(size_t)63;
    }
    p->embd_in_file = m->tied_output && p->bytes[p->n - 1] > 0; /* ws[n - 1] is the output */
    p->embd_bytes = p->total && !p->embd_in_file ? m->tok_embd.row_bytes * (size_t)m->tok_embd.n_out : 0;
    if (p->total) p->total += (p->embd_bytes + 63) & ~(size_t)63;
}
static void copy_plan_free(copy_plan *p) {
    free(p->ws);
    free(p->bytes);
    free(p->as_is);
}

/* From this many bytes of copies on, a model loads as a large one (pack_weights).
 * TOKD_LARGE_MODEL_BYTES overrides it, so that the tests' small models can take the
 * large path too. */
static size_t large_model_bytes(void) {
    const char *e = getenv("TOKD_LARGE_MODEL_BYTES");
    char *end;
    const unsigned long long v = e ? strtoull(e, &end, 10) : 0;
    return e && *e && !*end ? (size_t)v : (size_t)32 << 20;
}
static void pack_weights(tokd_model *m, const copy_plan *p) {
    const int n = p->n;
    tokd_matrix *const *ws = p->ws;
    const size_t total = p->total;
    uint8_t *arena = total ? tokd_xhuge_alloc(total) : NULL;
    /* The copies on every core, and each matrix's file pages dropped once copied, but not
       for a small model: there starting the threads, and each drop's TLB flush (on every
       core the process runs on), cost more than they save. */
    const bool large = total >= large_model_bytes();
    tokd_pool *pool = total ? tokd_pool_new(large ? 0 : 1) : NULL;
    size_t at = 0;
    if (p->embd_bytes) {
        if (large) map_file_pages(m->tok_embd.data, p->embd_bytes);
        copy_on(pool, arena, m->tok_embd.data, p->embd_bytes);
        if (large) drop_file_pages(&m->tok_embd);
        m->tok_embd.data = arena;
        if (m->tied_output) m->output.data = arena;
        at = (p->embd_bytes + 63) & ~(size_t)63;
    }
    size_t *offset = tokd_xmalloc(sizeof *offset * (size_t)n);
    for (int i = 0; i < n; i++) {
        offset[i] = at;
        at += (p->bytes[i] + 63) & ~(size_t)63;
    }
    /* Each matrix's file pages are dropped once it is packed, so the process holds the
       arena written so far and one matrix's file pages. A tied output goes first: its
       rows are the largest matrix, and with the arena almost full they raised the peak
       by their size (Llama 3.2 1B: 1.00 GB against 0.82). */
    for (int k = 0; k < n; k++) {
        const int i = p->embd_in_file ? (k + n - 1) % n : k;
        if (!p->bytes[i]) continue;
        if (large) map_file_pages(ws[i]->data, ws[i]->row_bytes * (size_t)ws[i]->n_out);
        if (p->as_is[i]) copy_on(pool, arena + offset[i], ws[i]->data, p->bytes[i]);
        else tokd_matrix_pack_into(pool, ws[i], tokd_packed_get(ws[i]->tt->id), arena + offset[i]);
        if (large) drop_file_pages(ws[i]);
        if (p->as_is[i]) ws[i]->data = arena + offset[i];
    }
    tokd_pool_free(pool);
    free(offset);
    m->packed = arena;
    m->packed_bytes = total;
}

void tokd_model_free(tokd_model *m) {
    if (!m) return;
    tokd_huge_free(m->packed, m->packed_bytes);
    if (m->layers) {
        for (int32_t l = 0; l < m->hp.n_layer; l++) {
            tokd_layer *L = &m->layers[l];
            free(L->attn_norm);
            free(L->ffn_norm);
            free(L->bq);
            free(L->bk);
            free(L->bv);
        }
        free(m->layers);
    }
    free(m->output_norm);
    free(m->rope_freqs);
    tokd_tokenizer_free(m->tok);
    gguf_close(m->gguf);
    free(m);
}

static tokd_model *load(const char *path, bool copy_weights, tokd_err *err) {
    tokd_model *m = tokd_xcalloc(1, sizeof *m);
    m->gguf = gguf_open(path, err);
    if (!m->gguf) {
        free(m);
        return NULL;
    }
    if (load_hparams(m, err) || bind_weights(m, err)) goto fail;
    copy_plan plan;
    plan_copy(m, &plan);
    m->copy_bytes = plan.total;
    if (copy_weights) pack_weights(m, &plan);
    copy_plan_free(&plan);
    m->tok = tokd_tokenizer_load(m->gguf, err);
    if (!m->tok) goto fail;
    if (tokd_tokenizer_n_vocab(m->tok) != m->hp.n_vocab) {
        tokd_seterr(err, "the tokenizer has %d tokens but the embedding matrix has %d rows",
                    tokd_tokenizer_n_vocab(m->tok), m->hp.n_vocab);
        goto fail;
    }
    return m;
fail:
    tokd_model_free(m);
    return NULL;
}

tokd_model *tokd_model_load(const char *path, tokd_err *err) { return load(path, true, err); }
tokd_model *tokd_model_load_uncopied(const char *path, tokd_err *err) { return load(path, false, err); }

void tokd_model_get_info(const tokd_model *m, tokd_model_info *info) {
    const tokd_hparams *hp = &m->hp;
    info->arch = m->arch_name;
    info->name = m->name;
    info->n_vocab = hp->n_vocab;
    info->n_ctx_train = hp->n_ctx_train;
    info->n_embd = hp->n_embd;
    info->n_layer = hp->n_layer;
    info->n_head = hp->n_head;
    info->n_head_kv = hp->n_head_kv;
    info->head_dim = hp->head_dim;
    info->n_ff = hp->n_ff;
    info->n_rot = hp->n_rot;
    info->rope_freq_base = hp->rope_freq_base;
    info->rope_freq_scale = hp->rope_freq_scale;
    info->norm_eps = hp->norm_eps;
    info->rope_neox = hp->rope_neox;
    info->rope_freq_factors = m->rope_freqs != NULL;
    info->tied_output = m->tied_output;
    info->weight_bytes = m->weight_bytes;
    info->copied_bytes = m->copy_bytes;
}

uint64_t tokd_kv_bytes_per_token(const tokd_model *m) {
    return 2ull * (uint64_t)m->hp.n_layer * (uint64_t)m->hp.n_head_kv * (uint64_t)m->hp.head_dim * sizeof(uint16_t);
}
