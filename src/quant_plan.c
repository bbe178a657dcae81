/* quant_plan.c — see quant_plan.h. */
#include "quant_plan.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "kernels/quants.h"
#include "kernels/types.h"

/* llama.cpp's LLAMA_FTYPE_* values written to general.file_type */
enum {
    FT_ALL_F32 = 0, FT_F16 = 1, FT_Q4_0 = 2, FT_Q4_1 = 3, FT_Q8_0 = 7, FT_Q5_0 = 8, FT_Q5_1 = 9, FT_Q2_K = 10,
    FT_Q3_K_S = 11, FT_Q3_K_M = 12, FT_Q3_K_L = 13, FT_Q4_K_S = 14, FT_Q4_K_M = 15, FT_Q5_K_S = 16, FT_Q5_K_M = 17,
    FT_Q6_K = 18, FT_IQ2_XXS = 19, FT_IQ2_XS = 20, FT_Q2_K_S = 21, FT_IQ3_XS = 22, FT_IQ3_XXS = 23, FT_IQ1_S = 24,
    FT_IQ4_NL = 25, FT_IQ3_S = 26, FT_IQ3_M = 27, FT_IQ2_S = 28, FT_IQ2_M = 29, FT_IQ4_XS = 30, FT_IQ1_M = 31, FT_BF16 = 32
};

static const tokd_qtarget targets[] = {
    {"F32", GGML_TYPE_F32, FT_ALL_F32, false},  {"F16", GGML_TYPE_F16, FT_F16, false},
    {"BF16", GGML_TYPE_BF16, FT_BF16, false},   {"Q8_0", GGML_TYPE_Q8_0, FT_Q8_0, false},
    {"Q4_0", GGML_TYPE_Q4_0, FT_Q4_0, false},   {"Q4_1", GGML_TYPE_Q4_1, FT_Q4_1, false},
    {"Q5_0", GGML_TYPE_Q5_0, FT_Q5_0, false},   {"Q5_1", GGML_TYPE_Q5_1, FT_Q5_1, false},
    {"Q2_K", GGML_TYPE_Q2_K, FT_Q2_K, true},    {"Q3_K", GGML_TYPE_Q3_K, FT_Q3_K_S, true},
    {"Q4_K", GGML_TYPE_Q4_K, FT_Q4_K_S, true},  {"Q5_K", GGML_TYPE_Q5_K, FT_Q5_K_S, true},
    {"Q6_K", GGML_TYPE_Q6_K, FT_Q6_K, false},   {"Q2_K_M", GGML_TYPE_Q2_K, FT_Q2_K, false},
    {"Q3_K_S", GGML_TYPE_Q3_K, FT_Q3_K_S, false}, {"Q3_K_M", GGML_TYPE_Q3_K, FT_Q3_K_M, false},
    {"Q3_K_L", GGML_TYPE_Q3_K, FT_Q3_K_L, false}, {"Q4_K_S", GGML_TYPE_Q4_K, FT_Q4_K_S, false},
    {"Q4_K_M", GGML_TYPE_Q4_K, FT_Q4_K_M, false}, {"Q5_K_S", GGML_TYPE_Q5_K, FT_Q5_K_S, false},
    {"Q5_K_M", GGML_TYPE_Q5_K, FT_Q5_K_M, false}, {"IQ4_NL", GGML_TYPE_IQ4_NL, FT_IQ4_NL, false},
    {"IQ4_XS", GGML_TYPE_IQ4_XS, FT_IQ4_XS, false},
    /* llama.cpp's importance-matrix file types (IQ2_S's base is IQ2_XS, as in llama.cpp) */
    {"Q2_K_S", GGML_TYPE_Q2_K, FT_Q2_K_S, false},   {"IQ2_XXS", GGML_TYPE_IQ2_XXS, FT_IQ2_XXS, false},
    {"IQ2_XS", GGML_TYPE_IQ2_XS, FT_IQ2_XS, false}, {"IQ2_S", GGML_TYPE_IQ2_XS, FT_IQ2_S, false},
    {"IQ2_M", GGML_TYPE_IQ2_S, FT_IQ2_M, false},    {"IQ3_XXS", GGML_TYPE_IQ3_XXS, FT_IQ3_XXS, false},
    {"IQ3_XS", GGML_TYPE_IQ3_S, FT_IQ3_XS, false},  {"IQ3_S", GGML_TYPE_IQ3_S, FT_IQ3_S, false},
    {"IQ3_M", GGML_TYPE_IQ3_S, FT_IQ3_M, false},    {"IQ1_S", GGML_TYPE_IQ1_S, FT_IQ1_S, false},
    {"IQ1_M", GGML_TYPE_IQ1_M, FT_IQ1_M, false},
};
#define N_TARGETS (sizeof targets / sizeof targets[0])

const tokd_qtarget *tokd_qtarget_find(const char *name) {
    for (size_t i = 0; i < N_TARGETS; i++)
        if (!strcasecmp(name, targets[i].name)) return &targets[i];
    return NULL;
}

const char *tokd_qtarget_list(void) {
    return "F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K Q4_K Q5_K Q6_K Q2_K_M Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M "
           "Q5_K_S Q5_K_M IQ4_NL IQ4_XS; with --imatrix also Q2_K_S IQ1_S IQ1_M IQ2_XXS IQ2_XS IQ2_S IQ2_M IQ3_XXS "
           "(IQ3_XS IQ3_S IQ3_M with or without)";
}

int tokd_qtarget_unknown(const char *name, tokd_err *err) {
    return tokd_seterr(err, "unknown type '%s' (supported: %s)", name, tokd_qtarget_list());
}

bool tokd_type_is_quantized(uint32_t t) { return t != GGML_TYPE_F32 && t != GGML_TYPE_F16 && t != GGML_TYPE_BF16; }

/* ---- the model's facts ------------------------------------------------------------- */

static int arch_u32(const gguf_file *f, const char *arch, const char *suffix, int *out, tokd_err *err) {
    char key[96];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    if (!gguf_get(f, key)) return 0;
    uint32_t v;
    if (gguf_get_u32(f, key, &v, err) < 0) return -1;
    *out = v > (uint32_t)1 << 30 ? 1 << 30 : (int)v;
    return 0;
}

int tokd_qmodel_read(const gguf_file *f, tokd_qmodel *m, tokd_err *err) {
    memset(m, 0, sizeof *m);
    gguf_str arch;
    if (gguf_get_str(f, "general.architecture", &arch, NULL) != 0 || arch.len >= sizeof m->arch) return 0;
    memcpy(m->arch, arch.ptr, arch.len);
    m->arch[arch.len] = 0;
    m->n_head_kv = -1;
    if (arch_u32(f, m->arch, "block_count", &m->n_layer, err) || arch_u32(f, m->arch, "attention.head_count", &m->n_head, err) ||
        arch_u32(f, m->arch, "expert_count", &m->n_expert, err))
        return -1;
    /* a per-layer array of KV head counts (some models) is read as its first entry */
    char key[96];
    snprintf(key, sizeof key, "%s.attention.head_count_kv", m->arch);
    const gguf_value *v = gguf_get(f, key);
    if (v && v->type == GGUF_TYPE_ARRAY && gguf_type_size(v->v.arr.elem_type) && v->v.arr.n)
        m->n_head_kv = (int)gguf_arr_i64(&v->v.arr, 0);
    else if (arch_u32(f, m->arch, "attention.head_count_kv", &m->n_head_kv, err))
        return -1;
    if (m->n_head_kv < 0) m->n_head_kv = m->n_head;
    return 0;
}

/* ---- the plan ------------------------------------------------------------------------ */

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

void tokd_qplan_init(tokd_qplan *p, const tokd_qtarget *t, const tokd_qmodel *m, const char *const *names, uint64_t n_names) {
    memset(p, 0, sizeof *p);
    p->t = t;
    p->m = *m;
    p->output_type = p->embd_type = TOKD_QTYPE_NONE;
    for (uint64_t i = 0; i < n_names; i++) {
        if (strstr(names[i], "attn_v.weight") || strstr(names[i], "attn_qkv.weight") || strstr(names[i], "attn_kv_b.weight"))
            p->n_attn_v++;
        else if (!strcmp(names[i], "output.weight")) p->has_output = true;
    }
    p->is_falcon = !strcmp(m->arch, "falcon");
    /* llama.cpp's model type 70B, the one size its rules look at */
    p->is_70b = m->n_layer == 80 && ((!strcmp(m->arch, "llama") && m->n_expert != 8 && m->n_head != m->n_head_kv) ||
                                     !strcmp(m->arch, "qwen2"));
}

bool tokd_qplan_converts(const char *name, uint32_t n_dims) {
    return ends_with(name, "weight") && n_dims >= 2 && !strstr(name, "_norm.weight") && !strstr(name, "ffn_gate_inp.weight") &&
           strcmp(name, "position_embd.weight") != 0 && strcmp(name, "token_types.weight") != 0 &&
           !strstr(name, "ssm_conv1d.weight") && !strstr(name, "time_mix_first.weight");
}

/* llama.cpp's file types of 1 to 2.7 bits a weight, which have their own rules. */
static bool low_bit(uint32_t ft) {
    return ft == FT_IQ2_XXS || ft == FT_IQ2_XS || ft == FT_IQ1_S || ft == FT_IQ2_S || ft == FT_IQ2_M || ft == FT_IQ1_M;
}
static bool iq2_s_or_m(uint32_t ft) { return ft == FT_IQ2_S || ft == FT_IQ2_M; }

bool tokd_qtarget_needs_imatrix(const tokd_qtarget *t) {
    const uint32_t ft = t->file_type;
    return ft == FT_IQ2_XXS || ft == FT_IQ2_XS || ft == FT_IQ2_S || ft == FT_Q2_K_S || ft == FT_IQ1_S || ft == FT_IQ1_M;
}

bool tokd_qtarget_writes_without_imatrix(const tokd_qtarget *t) {
    return !tokd_qtarget_needs_imatrix(t) && t->file_type != FT_IQ3_XXS; /* IQ3_XXS: its IQ2_S attn_q, attn_k */
}

bool tokd_qplan_tensor_needs_imatrix(const tokd_qplan *p, const char *name, uint32_t type) {
    const bool embd = !strcmp(name, "token_embd.weight"), out = !strcmp(name, "output.weight");
    return type == GGML_TYPE_IQ2_XXS || type == GGML_TYPE_IQ2_XS || type == GGML_TYPE_IQ2_S || type == GGML_TYPE_IQ1_S ||
           (type == GGML_TYPE_IQ1_M && !embd && !out) || (type == GGML_TYPE_Q2_K && p->t->file_type == FT_Q2_K_S && !embd);
}

/* llama.cpp's choice of layers that get more bits. */
static bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static uint32_t blck_of(uint32_t type) {
    const tokd_type_traits *tt = tokd_type_get(type);
    return tt ? tt->blck : 1;
}

static uint32_t output_type(const tokd_qplan *p, uint64_t ne0) {
    const uint32_t base = p->t->base, ft = p->t->file_type;
    if (p->is_falcon || ne0 % blck_of(base)) return GGML_TYPE_Q8_0;
    if (low_bit(ft) || ft == FT_IQ3_XXS) return GGML_TYPE_Q5_K;
    return base == GGML_TYPE_Q8_0 ? base : GGML_TYPE_Q6_K;
}

static uint32_t token_embd_type(const tokd_qplan *p, uint32_t t) {
    switch (p->t->file_type) {
    case FT_IQ2_XXS: case FT_IQ2_XS: case FT_IQ1_S: case FT_IQ1_M: return GGML_TYPE_Q2_K;
    case FT_IQ2_S: case FT_IQ2_M: case FT_IQ3_XXS: return GGML_TYPE_IQ3_S;
    default: return t;
    }
}

/* The low-bit types' rules, which replace the others (no 70B or falcon rule there). */
static uint32_t low_bit_type(tokd_qplan *p, const char *name, uint32_t t) {
    const uint32_t ft = p->t->file_type;
    const int gqa = p->m.n_head_kv > 0 ? p->m.n_head / p->m.n_head_kv : 0;
    if (strstr(name, "attn_v.weight")) {
        t = gqa >= 4 || p->m.n_expert >= 4 ? GGML_TYPE_Q4_K : iq2_s_or_m(ft) ? GGML_TYPE_IQ3_S : GGML_TYPE_Q2_K;
        p->i_attn_v++;
    } else if (p->m.n_expert == 8 && strstr(name, "attn_k.weight")) {
        t = GGML_TYPE_Q4_K;
    } else if (strstr(name, "ffn_down")) {
        if (p->i_ffn_down < p->m.n_layer / 8) t = iq2_s_or_m(ft) ? GGML_TYPE_IQ3_S : GGML_TYPE_Q2_K;
        p->i_ffn_down++;
    } else if (strstr(name, "attn_output.weight")) {
        if (p->m.n_expert == 8) t = GGML_TYPE_Q5_K;
        else if (ft == FT_IQ1_S || ft == FT_IQ1_M) t = GGML_TYPE_IQ2_XXS;
        else if (iq2_s_or_m(ft)) t = GGML_TYPE_IQ3_S;
    }
    return t;
}

static uint32_t attn_v_type(const tokd_qplan *p, uint32_t t) {
    const int i = p->i_attn_v, n = p->n_attn_v, gqa = p->m.n_head_kv > 0 ? p->m.n_head / p->m.n_head_kv : 0;
    switch (p->t->file_type) {
    case FT_Q2_K: t = gqa >= 4 ? GGML_TYPE_Q4_K : GGML_TYPE_Q3_K; break;
    case FT_Q2_K_S: if (gqa >= 4) t = GGML_TYPE_Q4_K; break;
    case FT_IQ3_XXS: t = gqa >= 4 ? GGML_TYPE_Q4_K : !p->has_imatrix ? GGML_TYPE_IQ3_S : GGML_TYPE_IQ3_XXS; break;
    case FT_IQ3_XS: case FT_IQ3_S: if (gqa >= 4) t = GGML_TYPE_Q4_K; break;
    case FT_IQ3_M: t = GGML_TYPE_Q4_K; break;
    case FT_Q3_K_M: t = i < 2 ? GGML_TYPE_Q5_K : GGML_TYPE_Q4_K; break;
    case FT_Q3_K_L: t = GGML_TYPE_Q5_K; break;
    case FT_Q4_K_M: case FT_Q5_K_M: if (use_more_bits(i, n)) t = GGML_TYPE_Q6_K; break;
    case FT_Q4_K_S: if (i < 4) t = GGML_TYPE_Q5_K; break;
    case FT_IQ4_NL: case FT_IQ4_XS: if (gqa >= 4) t = GGML_TYPE_Q5_K; break;
    default: break;
    }
    if (p->is_70b && (t == GGML_TYPE_Q3_K || t == GGML_TYPE_Q4_K)) t = GGML_TYPE_Q5_K;
    if (p->m.n_expert == 8) t = GGML_TYPE_Q8_0;
    return t;
}

static uint32_t ffn_down_type(const tokd_qplan *p, int i, uint32_t t) {
    const int n = p->m.n_layer;
    const bool falcon = p->is_falcon, more = use_more_bits(i, n);
    switch (p->t->file_type) {
    case FT_Q2_K: return GGML_TYPE_Q3_K;
    case FT_Q2_K_S: return i < n / 8 ? GGML_TYPE_Q4_K : t;
    case FT_IQ3_XXS: return p->has_imatrix ? t : i < n / 8 ? GGML_TYPE_Q4_K : GGML_TYPE_Q3_K;
    case FT_IQ3_M: return i < n / 8 || (p->m.n_expert == 8 && more) ? GGML_TYPE_Q4_K : t;
    case FT_Q3_K_M: return i < n / 16 ? GGML_TYPE_Q5_K : !falcon || more ? GGML_TYPE_Q4_K : GGML_TYPE_Q3_K;
    case FT_Q3_K_L: return falcon ? GGML_TYPE_Q4_K : GGML_TYPE_Q5_K;
    case FT_Q4_K_M:
        if (falcon) return i < n / 16 ? GGML_TYPE_Q6_K : more ? GGML_TYPE_Q5_K : GGML_TYPE_Q4_K;
        return more ? GGML_TYPE_Q6_K : t;
    case FT_Q5_K_M: return more ? GGML_TYPE_Q6_K : t;
    case FT_Q4_K_S: return !falcon && i < n / 8 ? GGML_TYPE_Q5_K : t;
    case FT_IQ4_NL: case FT_IQ4_XS: return i < n / 8 && !p->has_imatrix ? GGML_TYPE_Q5_K : t;
    /* with an importance matrix only: the first eighth of ffn_down in the type with a min */
    case FT_Q4_0: return p->has_imatrix && i < n / 8 ? GGML_TYPE_Q4_1 : t;
    case FT_Q5_0: return p->has_imatrix && i < n / 8 ? GGML_TYPE_Q5_1 : t;
    default: return t;
    }
}

static uint32_t attn_output_type(const tokd_qplan *p, uint32_t t) {
    const uint32_t ft = p->t->file_type;
    if (p->is_falcon) return ft == FT_Q3_K_L ? GGML_TYPE_Q4_K : t;
    if (p->m.n_expert == 8)
        return ft == FT_Q2_K || ft == FT_Q3_K_S || ft == FT_Q3_K_M || ft == FT_Q4_K_S || ft == FT_Q4_K_M || ft == FT_IQ4_NL ||
                       ft == FT_IQ4_XS || ft == FT_IQ3_XS || ft == FT_IQ3_XXS || ft == FT_IQ3_S || ft == FT_IQ3_M
                   ? GGML_TYPE_Q5_K
                   : t;
    switch (ft) {
    case FT_Q2_K: return GGML_TYPE_Q3_K;
    case FT_IQ3_XXS: return GGML_TYPE_IQ3_S;
    case FT_IQ3_M: return GGML_TYPE_Q4_K;
    case FT_Q3_K_M: return GGML_TYPE_Q4_K;
    case FT_Q3_K_L: return GGML_TYPE_Q5_K;
    default: return t;
    }
}

static uint32_t attn_qkv_type(const tokd_qplan *p, uint32_t t) {
    switch (p->t->file_type) {
    case FT_Q3_K_M: case FT_Q3_K_L: case FT_IQ3_M: return GGML_TYPE_Q4_K;
    case FT_Q4_K_M: return GGML_TYPE_Q5_K;
    case FT_Q5_K_M: return GGML_TYPE_Q6_K;
    default: return t;
    }
}

/* A type whose block does not divide the rows: the nearest type whose block does. */
static uint32_t fit_rows(uint32_t t, uint64_t ne0) {
    if (ne0 % blck_of(t) == 0) return t;
    switch (t) {
    case GGML_TYPE_Q4_K: t = GGML_TYPE_Q5_0; break;
    case GGML_TYPE_Q5_K: t = GGML_TYPE_Q5_1; break;
    case GGML_TYPE_Q6_K: t = GGML_TYPE_Q8_0; break;
    case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_IQ4_XS: case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS:
    case GGML_TYPE_IQ2_S: case GGML_TYPE_IQ3_XXS: case GGML_TYPE_IQ3_S: case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ1_M:
        t = GGML_TYPE_IQ4_NL;
        break;
    default: return GGML_TYPE_F16;
    }
    return ne0 % blck_of(t) ? GGML_TYPE_F16 : t;
}

/* The rules and fallbacks, for a quantized target without --pure. */
static uint32_t rule_type(tokd_qplan *p, const char *name, uint64_t ne0) {
    uint32_t t = p->t->base;
    if (!strcmp(name, "output.weight") || (!p->has_output && !strcmp(name, "token_embd.weight")))
        return fit_rows(p->output_type != TOKD_QTYPE_NONE ? p->output_type : output_type(p, ne0), ne0);
    if (!strcmp(name, "token_embd.weight"))
        return fit_rows(p->embd_type != TOKD_QTYPE_NONE ? p->embd_type : token_embd_type(p, t), ne0);
    if (p->t->plain) return fit_rows(t, ne0);
    const uint32_t ft = p->t->file_type;
    if (low_bit(ft)) return fit_rows(low_bit_type(p, name, t), ne0);
    if (strstr(name, "attn_v.weight")) {
        t = attn_v_type(p, t);
        p->i_attn_v++;
    } else if (strstr(name, "attn_k.weight")) {
        if (p->m.n_expert == 8) t = GGML_TYPE_Q8_0;
        else if (ft == FT_IQ3_XS) t = GGML_TYPE_IQ3_XXS;
        else if (ft == FT_IQ3_XXS) t = GGML_TYPE_IQ2_S;
    } else if (strstr(name, "attn_q.weight")) {
        if (ft == FT_IQ3_XS) t = GGML_TYPE_IQ3_XXS;
        else if (ft == FT_IQ3_XXS) t = GGML_TYPE_IQ2_S;
    } else if (strstr(name, "ffn_down")) {
        int layer = p->i_ffn_down++;
        if (p->m.n_expert > 1 && (sscanf(name, "blk.%d.", &layer) != 1 || layer < 0 || layer >= p->m.n_layer))
            return TOKD_QTYPE_NO_LAYER;
        t = ffn_down_type(p, layer, t);
    } else if (strstr(name, "attn_output.weight")) {
        t = attn_output_type(p, t);
    } else if (strstr(name, "attn_qkv.weight")) {
        t = attn_qkv_type(p, t);
    } else if (strstr(name, "ffn_gate") || strstr(name, "ffn_up")) {
        /* IQ3_XS: the middle three quarters of the layers in IQ3_XXS */
        int *counter = strstr(name, "ffn_gate") ? &p->i_ffn_gate : &p->i_ffn_up;
        int layer = (*counter)++, n = p->m.n_layer;
        if (p->m.n_expert > 1 && (sscanf(name, "blk.%d.", &layer) != 1 || layer < 0 || layer >= n)) return TOKD_QTYPE_NO_LAYER;
        if (ft == FT_IQ3_XS && layer >= n / 8 && layer < 7 * n / 8) t = GGML_TYPE_IQ3_XXS;
    }
    return fit_rows(t, ne0);
}

uint32_t tokd_qplan_type(tokd_qplan *p, const char *name, uint64_t ne0) {
    uint32_t t = p->t->base;
    if (!p->pure && tokd_type_is_quantized(t)) t = rule_type(p, name, ne0);
    if (t == TOKD_QTYPE_NO_LAYER) return t;
    if (p->embd_type != TOKD_QTYPE_NONE && !strcmp(name, "token_embd.weight")) t = p->embd_type;
    if (p->output_type != TOKD_QTYPE_NONE && !strcmp(name, "output.weight")) t = p->output_type;
    return t;
}
