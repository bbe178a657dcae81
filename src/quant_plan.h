/* quant_plan.h — which type each tensor of a model gets when it is quantized: the
 * targets `tokd quantize` and `tokd synth` accept, and llama.cpp's per-tensor rules for
 * them (with and without an importance matrix), so that a file we
 * write for a llama.cpp file type is the file llama-quantize writes, byte for byte.
 *
 * Targets (tokd_qtarget):
 *   - F32, F16, BF16: every converted tensor in that type, the output too;
 *   - the single types Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q6_K IQ4_NL IQ4_XS: llama.cpp's file
 *     types of the same names;
 *   - the K mixes Q2_K_M Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M: llama.cpp's
 *     file types. Q2_K_M is the one llama-quantize calls "Q2_K" (its ftype name is
 *     "Q2_K - Medium"); llama-quantize's "Q3_K", "Q4_K" and "Q5_K" are its _M mixes;
 *   - the plain K types Q2_K Q3_K Q4_K Q5_K: one type for every converted tensor but the
 *     output (tokd's own targets, for measuring one type's kernels; general.file_type
 *     says MOSTLY_Q2_K, Q3_K_S, Q4_K_S, Q5_K_S).
 *
 * The rules (every target but the plain ones and F32/F16/BF16):
 *   - only 2-D or 3-D tensors whose name ends in "weight" are converted, except norms,
 *     ffn_gate_inp (expert routers), position_embd, token_types, ssm_conv1d and
 *     time_mix_first; the rest is copied in its own type;
 *   - the output (output.weight, or token_embd.weight when there is no output.weight)
 *     becomes Q6_K (Q8_0 stays Q8_0), or Q8_0 when its rows are not a multiple of the
 *     target's block or the architecture is falcon. This one applies to plain targets too;
 *   - attn_v, counted over attn_v/attn_qkv/attn_kv_b tensors in file order (i of n):
 *     Q2_K_M: Q4_K when n_head / n_head_kv >= 4, else Q3_K; Q3_K_M: Q5_K for i < 2, else
 *     Q4_K; Q3_K_L: Q5_K; Q4_K_M, Q5_K_M: Q6_K where use_more_bits(i, n); Q4_K_S: Q5_K
 *     for i < 4; IQ4_NL, IQ4_XS: Q5_K when n_head / n_head_kv >= 4. Then a 70B model (llama with 80 layers and grouped KV heads, or qwen2
 *     with 80 layers) moves Q3_K/Q4_K to Q5_K, and a model of 8 experts takes Q8_0;
 *   - attn_k: Q8_0 in a model of 8 experts;
 *   - ffn_down in layer i of n (n = block_count; i counted in file order, or read from
 *     the name "blk.i." when the model has experts): Q2_K_M: Q3_K; Q3_K_M: Q5_K for
 *     i < n/16, else Q4_K (falcon: Q4_K only where use_more_bits, else Q3_K); Q3_K_L:
 *     Q5_K (falcon Q4_K); Q4_K_M: Q6_K where use_more_bits (falcon: Q6_K for i < n/16,
 *     Q5_K where use_more_bits); Q5_K_M: Q6_K where use_more_bits; Q4_K_S: Q5_K for
 *     i < n/8 (not falcon); IQ4_NL, IQ4_XS: Q5_K for i < n/8 without an importance
 *     matrix; with one, Q4_0: Q4_1 and Q5_0: Q5_1 for i < n/8;
 *   - attn_output: with 8 experts, Q5_K for Q2_K_M, Q3_K_S, Q3_K_M, Q4_K_S, Q4_K_M,
 *     IQ4_NL, IQ4_XS;
 *     otherwise Q2_K_M: Q3_K, Q3_K_M: Q4_K, Q3_K_L: Q5_K (falcon: Q3_K_L: Q4_K only);
 *   - attn_qkv: Q3_K_M, Q3_K_L: Q4_K; Q4_K_M: Q5_K; Q5_K_M: Q6_K;
 *   - use_more_bits(i, n): i < n/8, i >= 7n/8, or (i - n/8) % 3 == 2;
 *   - a row length that is not a multiple of the chosen type's block falls back:
 *     Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K/IQ4_XS -> IQ4_NL; anything
 *     else, or a fallback that still does not fit, -> F16 (llama.cpp stops with an error
 *     there).
 *
 * llama.cpp's importance-matrix file types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ2_M,
 * Q2_K_S need a matrix, as in llama.cpp (IQ2_M for its IQ2_S tensors); IQ3_XXS needs one for its IQ2_S tensors; IQ3_XS, IQ3_S, IQ3_M
 * do without). Bases: IQ2_S -> IQ2_XS (sic, llama.cpp's), IQ2_M -> IQ2_S, IQ3_XS, IQ3_M ->
 * IQ3_S, Q2_K_S -> Q2_K, the others their own type.
 *   - output: Q5_K for IQ2_XXS, IQ2_XS, IQ2_S, IQ2_M, IQ3_XXS (the Q8_0 cases first);
 *   - token_embd: Q2_K for IQ2_XXS, IQ2_XS; IQ3_S for IQ2_S, IQ2_M, IQ3_XXS;
 *   - the low-bit types IQ2_XXS, IQ2_XS, IQ2_S, IQ2_M (and IQ1_S, IQ1_M) have rules of
 *     their own, in place of all the above (no 70B, falcon or 8-expert Q8_0 rule): attn_v
 *     Q4_K when n_head / n_head_kv >= 4 or 4+ experts, else IQ3_S (IQ2_S, IQ2_M) or Q2_K;
 *     attn_k Q4_K with 8 experts; ffn_down for the first n/8 counted: IQ3_S (IQ2_S, IQ2_M)
 *     or Q2_K; attn_output Q5_K with 8 experts, else IQ3_S (IQ2_S, IQ2_M);
 *   - attn_v: Q2_K_S Q4_K when n_head / n_head_kv >= 4; IQ3_XXS Q4_K when that, else
 *     IQ3_XXS with a matrix and IQ3_S without; IQ3_XS, IQ3_S Q4_K when that; IQ3_M Q4_K;
 *   - attn_k and attn_q (not with 8 experts for attn_k): IQ3_XS IQ3_XXS, IQ3_XXS IQ2_S;
 *   - ffn_down: Q2_K_S Q4_K for i < n/8; IQ3_XXS without a matrix Q4_K for i < n/8, else
 *     Q3_K; IQ3_M Q4_K for i < n/8 (with 8 experts also where use_more_bits);
 *   - attn_output: with 8 experts also IQ3_XS, IQ3_XXS, IQ3_S, IQ3_M -> Q5_K; otherwise
 *     IQ3_XXS IQ3_S, IQ3_M Q4_K; attn_qkv: IQ3_M Q4_K;
 *   - ffn_gate, ffn_up in layer i of n (counted, or from the name with experts): IQ3_XS
 *     IQ3_XXS for n/8 <= i < 7n/8;
 *   - the grid types fall back to IQ4_NL where rows are not a multiple of 256.
 * Not covered: the size-based model types of architectures other than llama and qwen2 (only 70B matters,
 * and only for attn_v). */
#ifndef TOKD_QUANT_PLAN_H
#define TOKD_QUANT_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf.h"
#include "util.h"

typedef struct {
    const char *name;     /* as given on the command line */
    uint32_t base;        /* GGML_TYPE_* of most weight matrices */
    uint32_t file_type;   /* llama.cpp's general.file_type (LLAMA_FTYPE_*) */
    bool plain;           /* only the output rule applies */
} tokd_qtarget;

/* NULL when unknown (case-insensitive). */
const tokd_qtarget *tokd_qtarget_find(const char *name);
/* "F32 F16 BF16 Q8_0 ..." — for error messages and usage lines. */
const char *tokd_qtarget_list(void);
/* The error for a name tokd_qtarget_find does not know, with the list. -1. */
int tokd_qtarget_unknown(const char *name, tokd_err *err);
/* Whether llama.cpp refuses the target without an importance matrix (IQ2_XXS, IQ2_XS,
 * IQ2_S, Q2_K_S, IQ1_S, IQ1_M). */
bool tokd_qtarget_needs_imatrix(const tokd_qtarget *t);
/* Whether a whole file of the target can be written without one: not those, nor IQ3_XXS
 * (whose attn_q and attn_k are IQ2_S). */
bool tokd_qtarget_writes_without_imatrix(const tokd_qtarget *t);
/* Whether a GGML type is a quantized one (not F32, F16 or BF16). */
bool tokd_type_is_quantized(uint32_t type);

/* What the rules need to know of the model. */
typedef struct {
    char arch[32];   /* general.architecture ("" when absent) */
    int n_layer;     /* {arch}.block_count */
    int n_head;      /* {arch}.attention.head_count */
    int n_head_kv;   /* {arch}.attention.head_count_kv (= n_head when absent) */
    int n_expert;    /* {arch}.expert_count (0 when absent) */
} tokd_qmodel;

/* Reads tokd_qmodel from a file's metadata; missing keys leave 0 (or n_head). */
int tokd_qmodel_read(const gguf_file *f, tokd_qmodel *m, tokd_err *err);

/* No override (tokd_qplan's output_type / embd_type). */
#define TOKD_QTYPE_NONE UINT32_MAX

/* Per-file state of the type choice. After tokd_qplan_init the caller may set the
 * overrides, as llama-quantize's options of the same names:
 *   pure (--pure): no rules at all, every converted tensor in the target's type (no
 *     fallback either: rows that do not fit are an error of the conversion);
 *   output_type (--output-tensor-type): the output's type, in place of its rule; also
 *     output.weight's type after the rules and fallbacks;
 *   embd_type (--token-embedding-type): token_embd.weight's type likewise;
 *   has_imatrix (--imatrix): llama.cpp's two rules that depend on it (ffn_down above).
 * The overrides apply to F32/F16/BF16 targets too. */
typedef struct tokd_qplan {
    const tokd_qtarget *t;
    tokd_qmodel m;
    int n_attn_v, i_attn_v, i_ffn_down, i_ffn_gate, i_ffn_up;
    bool has_output, is_70b, is_falcon;
    bool pure;
    bool has_imatrix; /* quantizing with an importance matrix (--imatrix) */
    uint32_t output_type, embd_type;
} tokd_qplan;

/* names: every tensor name of the file in file order (to count attn_v tensors and see
 * whether output.weight exists). */
void tokd_qplan_init(tokd_qplan *p, const tokd_qtarget *t, const tokd_qmodel *m, const char *const *names, uint64_t n_names);
/* Whether a tensor is converted at all (else copied as is). */
bool tokd_qplan_converts(const char *name, uint32_t n_dims);

/* tokd_qplan_type's answer for an expert tensor whose layer its name does not give. */
#define TOKD_QTYPE_NO_LAYER UINT32_MAX
/* The type of a converted tensor with rows of ne0 elements. Call once per converted
 * tensor, in file order (advances the layer counters). */
uint32_t tokd_qplan_type(tokd_qplan *p, const char *name, uint64_t ne0);
/* Whether a tensor of this type, in this plan's file, needs its importance weights (an
 * entry in the matrix): IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S; IQ1_M but for token_embd and
 * output; Q2_K in a Q2_K_S file but for token_embd. llama.cpp stops without them. */
bool tokd_qplan_tensor_needs_imatrix(const tokd_qplan *p, const char *name, uint32_t type);

#endif
