/* sampler.h — logits processors and token sampling.
 *
 * One tokd_sampler per sequence. It owns the sequence's penalty history, its PRNG and scratch
 * space sized for the vocabulary at creation, so tokd_sampler_sample() never allocates.
 *
 * Processing order of one sample call (the caller's logits are never modified):
 *
 *   copy (NaN -> -inf)  ->  logit bias  ->  penalties (repeat, then presence/frequency)  ->  mask hook
 *   -> greedy (temperature < 1e-6): argmax, ties -> lowest token id
 *   -> else: top-k -> temperature -> softmax -> top-p -> min-p -> renormalise -> one seeded draw
 *
 * Ordering and ties. Candidates are ordered by processed logit, descending, ties -> lower token
 * id first; every cut (top-k, top-p, min-p) keeps a prefix of that order, so all cuts are
 * deterministic. top-p keeps the shortest prefix whose probability mass (over the top-k set) is
 * >= top_p; min-p keeps tokens with p >= min_p * p_max; top-p and min-p both apply (their
 * intersection, which is the shorter prefix). At least one token always survives.
 *
 * Which history each penalty counts:
 *   - repeat_penalty (llama.cpp semantics: a positive logit is divided by the penalty, a negative
 *     or zero one multiplied, once per distinct token) counts the last repeat_last_n tokens fed with
 *     tokd_sampler_accept_prompt() or tokd_sampler_accept() (prompt and generated alike);
 *     repeat_last_n = -1 means the whole history, 0 turns it off.
 *   - presence/frequency penalties (OpenAI semantics: logit -= presence*(count>0) + frequency*count)
 *     count only tokens fed with tokd_sampler_accept() (the generated ones), over the whole
 *     generation, no window.
 *
 * Robustness. A NaN logit is treated as -inf (banned). +inf logits win: if any survive processing,
 * the draw is uniform among them. If processing bans every token (all -inf/NaN after bias,
 * penalties and mask), sample returns the argmax of the *raw* logits (NaN skipped; token 0 if
 * every raw logit is NaN) and sets res->all_banned = 1, so the caller can tell and end the
 * sequence; the PRNG is not advanced in that case.
 *
 * PRNG. xoshiro256** with its 256-bit state filled from `seed` by splitmix64. Each non-greedy
 * sample call that has at least one candidate consumes exactly one 64-bit output (its top 53 bits
 * give u in [0,1)), whatever the number of surviving candidates, so the random stream never
 * depends on the shape of the distribution. Greedy calls consume nothing. The weights use our own
 * exp (no libm) in plain IEEE float operations that no compiler may fuse, sums are in double in
 * an order fixed by the algorithm, so the same seed and the same logits give the same tokens on
 * any IEEE-754 machine and compiler (tests pin the stream and the first tokens for one seed).
 *
 * Cost, per call: O(n_vocab) passes (copy with NaN check, candidate list, and the raw log-softmax
 * only when res is non-NULL). top-k: one pass against a heap of the best k when k <= n/16 (the
 * common case), else quickselect with a heapsort fallback; only the k survivors are sorted.
 * top-p without top-k: a 256-bucket histogram of the weights finds the bucket where the mass
 * crosses top_p; only that bucket is sorted, and only as far as needed. Never a full sort of the
 * vocabulary, never an allocation. About 55 us per call on a 32,000-token vocabulary with the
 * default parameters (x86-64, -O2), ~0.35 ms with top-p alone. */
#ifndef TOKD_SAMPLER_H
#define TOKD_SAMPLER_H

#include <stdint.h>

#include "util.h"

#define TOKD_SAMPLER_MAX_LOGPROBS 20
#define TOKD_SAMPLER_MAX_VOCAB (1 << 24) /* sanity bound for n_vocab */

typedef struct {
    int32_t token;
    float bias; /* added to the logit; -INFINITY bans the token; NaN and +INFINITY are rejected */
} tokd_logit_bias;

typedef struct {
    float temperature;       /* >= 0; < 1e-6 = greedy argmax, ties -> lowest token id */
    int32_t top_k;           /* <= 0: off */
    float top_p;             /* in [0, ...); >= 1: off; 0 keeps only the top token */
    float min_p;             /* <= 0: off; at most 1 */
    float repeat_penalty;    /* > 0; 1: off */
    int32_t repeat_last_n;   /* window, default 64; -1 = whole history; 0 = off */
    float presence_penalty;  /* in [-2, 2] */
    float frequency_penalty; /* in [-2, 2] */
    uint64_t seed;
    const tokd_logit_bias *logit_bias; /* copied by tokd_sampler_new; a token may appear more than once (biases add) */
    int32_t n_logit_bias;
    int32_t n_logprobs; /* 0..20: also report the top-N alternatives */
} tokd_sampler_params;

/* temperature 0.8, top_k 40, top_p 0.95, min_p 0.05, repeat 1.0 over 64, penalties 0, seed 0,
 * no bias, no logprobs. */
void tokd_sampler_params_default(tokd_sampler_params *p);

typedef struct {
    int32_t token;
    float logprob;
} tokd_token_logprob;

typedef struct {
    int32_t token;   /* chosen */
    float logprob;   /* log-softmax of the raw (unprocessed) logits at the chosen token; -inf if
                        every raw logit is -inf/NaN or the chosen one is */
    int32_t n_top;   /* min(n_logprobs, n_vocab) */
    tokd_token_logprob top[TOKD_SAMPLER_MAX_LOGPROBS]; /* top-N by raw log-prob, descending, ties -> lower id first */
    int32_t all_banned; /* 1 if processing banned every token (see the header comment) */
} tokd_sample_result;

typedef struct tokd_sampler tokd_sampler;

/* Validates the parameters (ranges, bias token ids) and n_vocab (1..TOKD_SAMPLER_MAX_VOCAB);
 * NULL with a message on error. Allocates all scratch. */
tokd_sampler *tokd_sampler_new(const tokd_sampler_params *p, int32_t n_vocab, tokd_err *err);
void tokd_sampler_free(tokd_sampler *s);

/* Clear the history and counts and restart the PRNG from the seed: the sampler is as new. */
void tokd_sampler_reset(tokd_sampler *s);

/* Record a generated token: counts for repeat (window) and presence/frequency penalties.
 * Out-of-range ids are ignored. */
void tokd_sampler_accept(tokd_sampler *s, int32_t token);

/* Record prompt tokens: they count for the repeat penalty window only. Out-of-range ids are
 * ignored. */
void tokd_sampler_accept_prompt(tokd_sampler *s, const int32_t *tokens, int32_t n);

/* Choose the next token from logits[n_vocab]. Never modifies logits; res may be NULL (then the
 * raw log-softmax is not computed). Does not record the token: call tokd_sampler_accept. */
int32_t tokd_sampler_sample(tokd_sampler *s, const float *logits, tokd_sample_result *res);

/* Hook for grammar-constrained output: called on the processed logits (after bias and penalties)
 * before selection; it sets the logits of forbidden tokens to -INFINITY. NULL removes it. */
void tokd_sampler_set_mask(tokd_sampler *s, void (*mask)(void *ud, float *logits, int32_t n_vocab), void *ud);

/* Exposed for tests and debugging: write into out[n_vocab] the processed logits the selection
 * stage sees (NaN -> -inf, bias, penalties, mask). */
void tokd_sampler_apply_processors(tokd_sampler *s, const float *logits, float *out);

/* Exposed for tests: the next raw output of the sampler's PRNG (advances it). */
uint64_t tokd_sampler_next_u64(tokd_sampler *s);

#endif
