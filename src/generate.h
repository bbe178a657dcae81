/* generate.h — one sequence from prompt to finished text: prefill in batched chunks,
 * then decode one token per step, sampling, stop conditions and incremental
 * detokenisation with stop-string holdback. Used by `tokd run` and `tokd chat`; the
 * server's scheduler drives many sequences with the same pieces. */
#ifndef TOKD_GENERATE_H
#define TOKD_GENERATE_H

#include "grammar.h"
#include "model.h"
#include "sampler.h"
#include "stop.h"

typedef enum {
    TOKD_FINISH_NONE = 0,
    TOKD_FINISH_EOG,        /* end-of-generation token */
    TOKD_FINISH_STOP,       /* a stop string */
    TOKD_FINISH_LENGTH,     /* n_predict reached */
    TOKD_FINISH_CONTEXT,    /* context full */
    TOKD_FINISH_TIME,       /* wall-clock limit */
    TOKD_FINISH_INTERRUPT,  /* the caller's interrupted() said so (Ctrl-C in tokd run and chat) */
} tokd_finish;
const char *tokd_finish_name(tokd_finish f);
/* OpenAI's finish_reason: "stop" for EOG and stop strings, else "length". */
const char *tokd_finish_openai(tokd_finish f);

typedef struct {
    tokd_sampler_params sampling;
    int32_t n_predict;          /* max new tokens (0: the prompt only); < 0: until the context is full */
    const char *const *stop;    /* stop strings (never emitted) */
    int32_t n_stop;
    double time_limit_s;        /* from the prompt's start, checked between prefill chunks and tokens; <= 0: none */
    int32_t seq;                /* sequence slot of the context to use (it is reset first) */
    void (*on_text)(void *ud, const char *text, size_t len); /* called with each safe chunk */
    void (*on_token)(void *ud, int32_t token);                /* each sampled token (optional) */
    void *ud;
    /* Optional grammar constraint (NULL: none), owned by the caller and advanced in place:
     * it masks each sampling step, is advanced by every generated token, and generation ends
     * with finish "eog" once the grammar admits nothing more. An end-of-generation token is
     * then allowed only where the grammar is complete. */
    tokd_grammar_state *grammar;
    int32_t n_keep;             /* the sequence already holds prompt[0, n_keep) (e.g. the shared
                                   part of a chat's previous turn); it is kept, the rest of the
                                   prompt is evaluated. Clamped to n_prompt - 1. */
    /* Optional: asked (with ud) before each prefill chunk and each decode step; once it
     * returns true, generation ends there with finish "interrupted", the text so far
     * emitted as at any other finish. Interrupted during the prefill, nothing is
     * generated (n_gen 0) and the sequence holds only the chunks evaluated. It must be
     * cheap and safe to call from the generating thread (a signal handler's flag). */
    bool (*interrupted)(void *ud);
} tokd_gen_params;
void tokd_gen_params_default(tokd_gen_params *p);

typedef struct {
    int32_t n_prompt, n_gen;
    double t_prefill_s, t_first_token_s, t_total_s;   /* from the start of prefill */
    double prompt_tps, gen_tps;                      /* tokens per second */
    double itl_p50_ms, itl_p99_ms;                   /* inter-token latency */
    tokd_finish finish;
} tokd_gen_stats;

int tokd_generate(tokd_ctx *c, const tokd_model *m, const int32_t *prompt, int32_t n_prompt,
                  const tokd_gen_params *p, tokd_gen_stats *stats, tokd_err *err);

#endif
