/* chatml.h — turning chat messages into prompt text. For now a built-in ChatML
 * rendering (<|im_start|>role\ncontent<|im_end|>\n ... <|im_start|>assistant\n); the
 * model's own Jinja template (src/chat/) replaces it behind this one function. */
#ifndef TOKD_SERVER_CHATML_H
#define TOKD_SERVER_CHATML_H

#include <stdbool.h>

#include "util.h"

typedef struct {
    const char *role, *content;
} tokd_server_msg;

void tokd_server_chatml(const tokd_server_msg *msgs, int n, bool add_generation_prompt, tokd_buf *out);

#endif
