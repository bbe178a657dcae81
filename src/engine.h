/* engine.h — the serving engine: many requests decoded together over one paged KV cache.
 *
 * A library piece with no HTTP inside. A scheduler thread runs the loop one step at a
 * time; each step is one tokd_forward batch made of
 *   - one decode token for every running sequence, then
 *   - prefill chunks of running-but-unfinished prompts and of newly admitted requests,
 *     under a per-step token budget (chunked prefill: a long prompt never stalls the
 *     others' decoding).
 * Requests join and leave at every step, in FIFO order of arrival. When the KV pool runs
 * out, the newest running sequence is preempted: its blocks are released and it goes
 * back to the head of the queue; later its prompt and the tokens it already generated
 * are recomputed (bit-identical, the forward pass is batch invariant) and generation
 * continues where it stopped, so preemption never changes the text. A request that can
 * never fit (prompt past the context, or more KV blocks than the pool has) is refused at
 * submission with a message naming both numbers.
 *
 * Prefix caching (kvcache.h): every full block a sequence computes is published under a
 * key chained over all the token ids up to it; an admitted request attaches the cached
 * blocks of its longest matching prefix (always recomputing at least its last prompt
 * token, so that it gets logits) and reports them as cached tokens.
 *
 * Events. After a successful tokd_engine_submit the request's on_event callback is called
 * from the scheduler thread: TOKD_EV_TOKEN for every sampled token (with the text that is
 * now safe to release: whole UTF-8 characters, stop strings held back; and text_pos, where
 * the token's own text starts in the whole output, which does not lag), then exactly one
 * TOKD_EV_DONE (finish reason, final text, usage and timings), after which the callback is
 * never called again. A callback must not block for long (it delays every sequence) and
 * must not call tokd_engine_free; it may call tokd_engine_cancel.
 *
 * Cancellation: tokd_engine_cancel(id) marks the request; at the next step its sequence
 * and blocks are released and DONE arrives with status TOKD_REQ_CANCELLED. */
#ifndef TOKD_ENGINE_H
#define TOKD_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "generate.h" /* tokd_finish */
#include "grammar.h"
#include "model.h"
#include "sampler.h"

typedef struct tokd_engine tokd_engine;

typedef struct {
    int32_t max_seqs;     /* sequences decoded together (default 16) */
    int32_t n_ctx;        /* max positions per sequence (0: the model's, capped at 4096 and at the pool) */
    int64_t n_blocks;     /* KV blocks (0: from kv_mem_mib, else enough for max_seqs full sequences) */
    int64_t kv_mem_mib;   /* KV pool size in MiB when n_blocks is 0 (0: unused) */
    int32_t block_size;   /* positions per KV block (default 16) */
    int32_t n_threads;    /* <= 0: physical cores */
    int32_t step_tokens;  /* token budget of one step (default 256; at least max_seqs) */
    int32_t max_waiting;  /* queued requests beyond which submit answers TOKD_ENGINE_EBUSY (default 512) */
    bool no_prefix_cache; /* disable prefix caching */
} tokd_engine_params;
void tokd_engine_params_default(tokd_engine_params *p);

tokd_engine *tokd_engine_new(const tokd_model *m, const tokd_engine_params *p, tokd_err *err);
/* Stops the scheduler; every request still in flight gets DONE with TOKD_REQ_CANCELLED
 * (from the calling thread). */
void tokd_engine_free(tokd_engine *e);

typedef enum { TOKD_EV_TOKEN, TOKD_EV_DONE } tokd_event_kind;
typedef enum { TOKD_REQ_OK = 0, TOKD_REQ_CANCELLED, TOKD_REQ_ERROR } tokd_req_status;

typedef struct {
    int32_t n_prompt;     /* prompt tokens */
    int32_t n_cached;     /* of which attached from the prefix cache at first admission */
    int32_t n_gen;        /* generated tokens (an end-of-generation token counts) */
    int32_t n_preempted;  /* times the sequence was preempted */
    double queue_s;       /* submission -> first admission */
    double ttft_s;        /* submission -> first token */
    double prefill_tps;   /* prompt tokens computed per second, admission -> first token */
    double decode_tps;    /* tokens per second after the first */
    double total_s;       /* submission -> done */
} tokd_usage;

typedef struct {
    tokd_event_kind kind;
    uint64_t id;
    const char *text;                 /* released text (may be empty, never NULL) */
    size_t len;
    /* TOKD_EV_TOKEN */
    int32_t token;
    size_t text_pos;                  /* where the token's text starts in the whole output (bytes;
                                         text held back for stop strings counts) */
    const tokd_sample_result *sample; /* logprob and alternatives when n_logprobs > 0, else NULL */
    /* TOKD_EV_DONE */
    tokd_req_status status;
    tokd_finish finish;               /* when status is OK */
    const char *error;                /* when status is ERROR */
    bool bad_request;                 /* ERROR caused by the request itself (its grammar, or
                                         logit_bias banning every token it allows) */
    const tokd_usage *usage;
} tokd_event;

typedef struct {
    const int32_t *prompt;    /* copied */
    int32_t n_prompt;
    tokd_sampler_params sampling;
    int32_t max_tokens;       /* < 0: until the context is full */
    const char *const *stop;  /* copied */
    int32_t n_stop;
    bool ignore_eos;
    /* Grammar-constrained output (NULL: none). The request gets its own matcher state; every
     * token the grammar cannot continue with is masked before sampling, end-of-generation is
     * allowed only when the output is a complete sentence, and the request finishes (EOG)
     * as soon as nothing more can follow. If no token at all can continue (a grammar the
     * vocabulary cannot complete, or logit_bias banned every allowed token), the request
     * ends with TOKD_REQ_ERROR, bad_request set and a message saying so. The grammar must
     * stay alive until the DONE event (the engine drops its state before calling on_event
     * with DONE); ignore_eos does not apply under a grammar. */
    const tokd_grammar *grammar;
    /* Detokenize control tokens as their text (tool-call markers that are special tokens). */
    bool render_special;
    void (*on_event)(void *ud, const tokd_event *ev);
    void *ud;
} tokd_request_params;
void tokd_request_params_default(tokd_request_params *p);

enum {
    TOKD_ENGINE_EINVAL = -1,  /* bad parameters */
    TOKD_ENGINE_ETOOBIG = -2, /* can never fit (context or KV pool) */
    TOKD_ENGINE_EBUSY = -3,   /* queue full: retry later */
    TOKD_ENGINE_ESTOPPED = -4 /* engine shutting down */
};
/* Queue a request. Returns 0 and its id in *id, or a negative TOKD_ENGINE_E* with err. */
int tokd_engine_submit(tokd_engine *e, const tokd_request_params *p, uint64_t *id, tokd_err *err);
/* Cancel a request by id (no effect if it is already done). Thread-safe. */
void tokd_engine_cancel(tokd_engine *e, uint64_t id);
/* Stop accepting new requests (submit answers ESTOPPED). */
void tokd_engine_close(tokd_engine *e);

typedef struct {
    int32_t running, waiting, max_seqs, n_ctx, block_size;
    int64_t kv_blocks, kv_used, kv_free, kv_cached; /* used + free + cached == blocks */
    uint64_t prompt_tokens, cached_tokens, gen_tokens, steps, preemptions, evictions;
    uint64_t req_ok, req_cancelled, req_error, req_refused;
} tokd_engine_stats;
void tokd_engine_get_stats(tokd_engine *e, tokd_engine_stats *s);
/* Requests that may be in flight at once (max_seqs running + max_waiting queued): a submit
 * beyond answers EBUSY, so a client needing more at once can never be served. */
int32_t tokd_engine_capacity(const tokd_engine *e);
/* Requests submitted and not yet done. */
int32_t tokd_engine_active(tokd_engine *e);
/* Prometheus text exposition of the engine's metrics (histograms of TTFT, inter-token
 * latency, end-to-end latency, queue time; token and request counters; gauges). */
void tokd_engine_metrics(tokd_engine *e, tokd_buf *out);
const tokd_model *tokd_engine_model(const tokd_engine *e);

#endif
