/* imatrix_collect.h — computing an importance matrix (`tokd imatrix`): run a model over a
 * calibration text and, for every weight matrix, accumulate the square of each input
 * column's activation over all tokens. The mean square per column is what
 * `tokd quantize --imatrix` (and llama-quantize) weigh each column's rounding error by.
 *
 * The collector is a forward-pass observer (model.h: tokd_ctx_set_observer): it sees the
 * four inputs of each layer's products once each (the attention input serves attn_q,
 * attn_k and attn_v; the FFN input ffn_gate and ffn_up) and, with process_output, the
 * output's. Sums are kept in double. Its result is a tokd_imatrix (imatrix.h) whose
 * entries hold those sums and the tokens they were summed over, which
 * tokd_imatrix_write puts in either of llama-imatrix's formats (both tokd and
 * llama-quantize read them). As llama-imatrix by default, the output matrix is left out
 * unless process_output (and a tied output, whose matrix is the token embedding, always:
 * llama-imatrix records only blk.* and output.weight). */
#ifndef TOKD_IMATRIX_COLLECT_H
#define TOKD_IMATRIX_COLLECT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "imatrix.h"
#include "model.h"

typedef struct tokd_imatrix_collector tokd_imatrix_collector;

tokd_imatrix_collector *tokd_imatrix_collector_new(const tokd_model *m, bool process_output);
void tokd_imatrix_collector_free(tokd_imatrix_collector *c);
/* The observer to install with tokd_ctx_set_observer(ctx, tokd_imatrix_observe, collector). */
void tokd_imatrix_observe(void *collector, int32_t layer, tokd_mm_input which, const float *x, int32_t n, int64_t K);
/* Tokens seen so far (rows of the attention input summed over layers / n_layer). */
int64_t tokd_imatrix_collector_tokens(const tokd_imatrix_collector *c);
/* What has been collected, entries sorted by name: each entry's sums of squares over
 * its count of tokens, and the mean squares as a GGUF file of them gives back; dataset
 * (NULL or "": none) and chunks recorded as given. No entries when nothing was seen. */
tokd_imatrix *tokd_imatrix_collector_result(const tokd_imatrix_collector *c, const char *dataset, int chunks);

/* Run the model over text, chunk by chunk as llama-imatrix does: the text tokenized
 * once (with the model's BOS), cut into chunks of n_ctx tokens, each chunk's first token
 * made BOS where the model adds one, each evaluated from an empty cache in batches of at
 * most n_batch. n_chunks <= 0: all whole chunks; first_chunk: whole chunks skipped first
 * (llama-imatrix's --chunk). Progress lines to log (or NULL).
 * parse_special: special tokens written in the text are read as such (as
 * llama-imatrix's --parse-special). chunk_done, where set, is called after each chunk
 * with the chunks run so far (tokd imatrix --save-frequency saves from there).
 * With ppl, also the model's perplexity on the text as llama-imatrix and llama-perplexity
 * compute it: each chunk's second half of positions (from n_ctx / 2 to n_ctx - 2) scored
 * on the token that follows, the negative log-likelihoods summed in double; each
 * progress line then carries the running estimate exp(nll / n). With c NULL nothing is
 * collected: only the perplexity (`tokd perplexity`).
 * Returns the number of chunks run, or -1 with err set (a text shorter than one chunk). */
typedef struct {
    int32_t n_ctx, n_batch, n_chunks, n_threads, first_chunk;
    bool parse_special;
    void (*chunk_done)(void *user, const tokd_imatrix_collector *c, int chunks);
    /* Where set, called after each forward batch with the batch as evaluated (the BOS in
     * place, positions from 0 at each chunk) and the logits of the rows that asked for
     * them, in batch order (with ppl: the scored rows); non-zero stops the run with err
     * set (`tokd perplexity --kl-model` runs a second model on the same batches). */
    int (*on_batch)(void *user, const tokd_batch_entry *batch, int32_t n, const float *logits, tokd_err *err);
    void *user;
    const char *log_name; /* the progress lines' prefix (NULL: "tokd imatrix") */
} tokd_imatrix_params;
typedef struct {
    double nll, nll2; /* sums of -log p(next token) and of its square */
    int64_t n;        /* positions scored */
} tokd_imatrix_ppl;
int tokd_imatrix_compute(const tokd_model *m, const char *text, size_t len, const tokd_imatrix_params *p,
                         tokd_imatrix_collector *c, tokd_imatrix_ppl *ppl, FILE *log, tokd_err *err);
/* The final estimate llama-imatrix and llama-perplexity print: exp(mean nll) and its
 * standard error (from the nll's variance over n - 1); false when fewer than two
 * positions were scored. */
bool tokd_imatrix_ppl_estimate(const tokd_imatrix_ppl *ppl, double *estimate, double *std_error);

#endif
