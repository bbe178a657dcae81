/* chat_render.h — a model's chat template, rendered the way Hugging Face does it.
 *
 * The template is the GGUF file's `tokenizer.chat_template` (Jinja), or ChatML when the
 * file has none. Rendering passes `messages`, `tools` (when given),
 * `add_generation_prompt`, and the model's BOS/EOS token texts as `bos_token` and
 * `eos_token`, exactly as transformers' apply_chat_template does. Used by the chat
 * endpoint of the server and by `tokd chat`. */
#ifndef TOKD_CHAT_RENDER_H
#define TOKD_CHAT_RENDER_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "model.h"

typedef struct tokd_chat_template tokd_chat_template;

/* The model's template (or ChatML). NULL with err if the model's template does not parse. */
tokd_chat_template *tokd_chat_template_new(const tokd_model *m, tokd_err *err);
/* A template from source text (tests, `--chat-template-file`). */
tokd_chat_template *tokd_chat_template_from_source(const tokd_model *m, const char *src, size_t len, tokd_err *err);
void tokd_chat_template_free(tokd_chat_template *t);
/* true when the model has no template and ChatML is used. */
bool tokd_chat_template_is_fallback(const tokd_chat_template *t);

/* Render messages (a JSON array) and optional tools (a JSON array or NULL). *out is
 * malloc'd and NUL-terminated. Extra variables (e.g. from a request's
 * chat_template_kwargs) may be passed as a JSON object in extra, or NULL. */
int tokd_chat_render(const tokd_chat_template *t, const cJSON *messages, const cJSON *tools,
                     bool add_generation_prompt, const cJSON *extra, char **out, size_t *out_len, tokd_err *err);

/* Whether messages start with system (or developer) messages followed by a user message.
 * With apply, their texts are then put before the user's, each followed by a blank line,
 * and the messages themselves removed: for templates without a system role (Gemma 2
 * raises on one), as llama.cpp's server does. */
bool tokd_chat_system_into_user(cJSON *messages, bool apply);

/* Tokenize rendered chat text: special tokens are parsed (templates write them as text),
 * and BOS is added only when the model adds one and the text does not already begin
 * with it. *out is malloc'd. */
int tokd_chat_tokenize(const tokd_model *m, const char *text, size_t len, int32_t **out, size_t *n_out, tokd_err *err);

/* Stop strings a template implies when the model's vocabulary lacks its end-of-turn
 * token as a special token (ChatML fallback on a plain model): NULL-terminated list. */
const char *const *tokd_chat_template_stops(const tokd_chat_template *t);

#endif
