/* grammar.h — grammar-constrained sampling: a GBNF-style grammar, an incremental matcher over
 * bytes, and a token mask for the sampler.
 *
 * Grammar syntax (GBNF-like). A grammar is a list of rules `name ::= alternatives`; the rule
 * named `root` is the start. A rule's body runs until the next `name ::=` or the end of the
 * text, so newlines are free-form. Elements:
 *   "text"        literal, escapes \n \r \t \\ \" \' \[ \] \- \^ \/ \xHH \uHHHH \UHHHHHHHH
 *   [a-z_]        character class over code points (same escapes); [^...] negated
 *   .             any code point
 *   name          reference to a rule (may come before or after its definition)
 *   ( ... )       grouping, with | between alternatives; an empty alternative matches ""
 *   x* x+ x?      repetition; x{m} x{m,} x{m,n} with m, n <= 10000
 *   # ...         comment to end of line
 * Errors name the line and column ("line 3, column 7: ..."): unknown or malformed syntax,
 * undefined or duplicate rules, a missing root, invalid UTF-8, and left recursion (a rule
 * that can reach itself without consuming a character, e.g. `a ::= a "x"` or `("x"?)*`),
 * which is rejected rather than handled.
 *
 * Compiled form. Every rule is a list of alternatives, each a sequence of elements ended by
 * END; an element is a character class (sorted, merged code-point ranges plus a 128-bit ASCII
 * bitmap) or a rule reference. Repetitions and groups are lowered to generated rules:
 * x* -> S ::= x S | ""; x{m,n} -> m copies of x then n-m nested optionals.
 *
 * Matcher. A state is the set of live parse stacks after the bytes consumed so far (the
 * technique of llama.cpp's GBNF sampler and of pushdown automata in general; our own code).
 * A stack is a persistent linked list of positions, hash-consed so that equal stacks are the
 * same node id; its top is always a character class to match next, or the stack is empty
 * (the input so far is a complete sentence: "accepting"). Calls in tail position push
 * nothing, so repetitions do not deepen stacks. Bytes are decoded as UTF-8; while a code
 * point is incomplete, the state keeps its prefix and only stacks whose class intersects the
 * code points with that prefix survive, so a token ending mid-character is allowed only if
 * some completion can match. Invalid UTF-8 never matches. Bounds: a step expands each
 * (position, stack) pair once, and a state holds at most TOKD_GRAMMAR_MAX_STACKS stacks;
 * beyond that (a grammar so ambiguous it would blow up) the mask disallows the token that
 * would get there, and accept_bytes marks the state failed: the mask then allows only
 * end-of-generation tokens and accept returns -1. A mask call also does at most
 * TOKD_GRAMMAR_MASK_WORK items of closure work (the steps of every token it explores
 * together); past that it marks the state failed too, so that no grammar a client sends
 * can hold the scheduler for long on one token.
 *
 * Token mask. tokd_grammar_vocab holds, once per tokenizer, a trie of every token's output
 * bytes (tokd_token_piece without special rendering) in preorder with per-subtree byte
 * sets. The mask walks the trie and the grammar state together: a dead state prunes a whole
 * subtree, transitions (state, byte) are memoised per call, and when a byte leaves the state
 * unchanged (string bodies, digit runs) a subtree whose bytes all do so is allowed without
 * walking. Tokens with empty pieces (control, unused) are never allowed; end-of-generation
 * tokens are allowed exactly when the state is accepting.
 *
 * Threads: a tokd_grammar and a tokd_grammar_vocab are immutable and shareable; a
 * tokd_grammar_state belongs to one sequence. */
#ifndef TOKD_GRAMMAR_H
#define TOKD_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"
#include "util.h"

#define TOKD_GRAMMAR_MAX_STACKS 4096
#define TOKD_GRAMMAR_MASK_WORK (1LL << 23) /* a state's default; tokd_grammar_state_set_work_budget */

typedef struct tokd_grammar tokd_grammar;
typedef struct tokd_grammar_vocab tokd_grammar_vocab;
typedef struct tokd_grammar_state tokd_grammar_state;

/* Parse grammar text (len bytes, any bytes). NULL with err ("grammar: line L, column C: ...")
 * on error. */
tokd_grammar *tokd_grammar_parse(const char *src, size_t len, tokd_err *err);
void tokd_grammar_free(tokd_grammar *g);
int32_t tokd_grammar_n_rules(const tokd_grammar *g);

/* Whole-string match of len bytes against the grammar (tests, debugging). */
bool tokd_grammar_match(const tokd_grammar *g, const char *s, size_t len);

/* Token trie of a tokenizer; the tokenizer may be freed afterwards. */
tokd_grammar_vocab *tokd_grammar_vocab_new(const tokd_tokenizer *tok);
void tokd_grammar_vocab_free(tokd_grammar_vocab *v);

/* A matcher at the start of the grammar. g and v must outlive it. v may be NULL for a
 * byte-only state (accept_bytes, done); mask and accept then need a vocabulary. */
tokd_grammar_state *tokd_grammar_state_new(const tokd_grammar *g, const tokd_grammar_vocab *v);
void tokd_grammar_state_free(tokd_grammar_state *s);
void tokd_grammar_state_reset(tokd_grammar_state *s);

/* Set logits[i] = -INFINITY for every token that cannot continue the output. n_vocab may
 * differ from the vocabulary's (extra entries are banned). Allocation-free once warm. */
void tokd_grammar_mask(tokd_grammar_state *s, float *logits, int32_t n_vocab);
/* The same with the signature of tokd_sampler_set_mask; ud is the tokd_grammar_state. */
void tokd_grammar_mask_hook(void *ud, float *logits, int32_t n_vocab);

/* Advance by a token: 0, or -1 if the token cannot continue the output (state unchanged).
 * An end-of-generation token is accepted when the state is accepting and changes nothing. */
int tokd_grammar_accept(tokd_grammar_state *s, int32_t token);
/* Advance by bytes: 0, or -1 (state unchanged). */
int tokd_grammar_accept_bytes(tokd_grammar_state *s, const char *bytes, size_t len);

/* The output so far is a complete sentence (end-of-generation allowed). */
bool tokd_grammar_done(const tokd_grammar_state *s);
/* Some byte may still follow (false once the sentence can only end). */
bool tokd_grammar_can_continue(const tokd_grammar_state *s);
/* The state blew past its bounds (see above). */
bool tokd_grammar_failed(const tokd_grammar_state *s);
/* The closure work one mask call of s may do (default TOKD_GRAMMAR_MASK_WORK; tests and the
 * fuzzer set less). */
void tokd_grammar_state_set_work_budget(tokd_grammar_state *s, int64_t items);
/* The closure work the last mask call did (up to just past its budget). */
int64_t tokd_grammar_mask_work(const tokd_grammar_state *s);

/* JSON Schema -> grammar (json_schema.c; see the comment there for what is supported).
 * any_object: ignore the schema (may be NULL) and accept any JSON object (response_format
 * json_object). tokd_json_schema_to_gbnf returns the grammar text (malloc'd). */
struct cJSON;
tokd_grammar *tokd_grammar_from_json_schema(const struct cJSON *schema, bool any_object, tokd_err *err);
char *tokd_json_schema_to_gbnf(const struct cJSON *schema, bool any_object, tokd_err *err);

#endif
