/* chatml.c — see chatml.h. */
#include "server/chatml.h"

void tokd_server_chatml(const tokd_server_msg *msgs, int n, bool add_generation_prompt, tokd_buf *out) {
    tokd_buf_append(out, "", 0);
    for (int i = 0; i < n; i++) {
        const char *role = strcmp(msgs[i].role, "developer") ? msgs[i].role : "system";
        tokd_buf_appendf(out, "<|im_start|>%s\n%s<|im_end|>\n", role, msgs[i].content ? msgs[i].content : "");
    }
    if (add_generation_prompt) tokd_buf_append(out, "<|im_start|>assistant\n", 22);
}
