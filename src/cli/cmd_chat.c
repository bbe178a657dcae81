/* cmd_chat.c — `tokd chat`: an interactive terminal chat on the model's own chat
 * template (ChatML when the file has none), with the conversation kept as history.
 * Each turn re-renders the whole conversation; the part of it already in the KV cache
 * (the common token prefix with the previous turn) is kept, only the rest is evaluated.
 * Commands at the prompt: /reset clears the history, /exit (or end of input) quits.
 * Ctrl-C during a reply ends the reply there (what was written stays in the history);
 * at the prompt, or twice, it quits as SIGINT does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_render.h"
#include "cli.h"
#include "generate.h"

typedef struct {
    tokd_buf reply;
    int32_t *toks;
    size_t n, cap;
} turn_state;

static void on_text(void *ud, const char *text, size_t len) {
    turn_state *ts = ud;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    tokd_buf_append(&ts->reply, text, len);
}

static void on_token(void *ud, int32_t tok) {
    turn_state *ts = ud;
    if (ts->n == ts->cap) ts->toks = tokd_xrealloc(ts->toks, (ts->cap = ts->cap ? ts->cap * 2 : 256) * sizeof(int32_t));
    ts->toks[ts->n++] = tok;
}

/* Reads one line from stdin without its newline; NULL at end of input. */
static char *read_line(void) {
    tokd_buf b = {0};
    int ch, any = 0;
    while ((ch = getchar()) != EOF) {
        any = 1;
        if (ch == '\n') break;
        char c = (char)ch;
        tokd_buf_append(&b, &c, 1);
    }
    if (!any) return NULL;
    tokd_buf_append(&b, "", 0);
    return b.data;
}

int cmd_chat(int argc, char **argv) {
    const char *model_path = "../shared/models/stories260K.gguf", *system = NULL;
    tokd_gen_params gp;
    tokd_gen_params_default(&gp);
    gp.n_predict = 256;
    long n_threads = 0, ctx_size = 0;
    const cli_option opts[] = {
        CLI_MODEL(&model_path),
        CLI_STR("--system", NULL, &system, "TEXT", "the system message"),
        CLI_N_PREDICT(&gp.n_predict, 1, 1 << 20, "tokens of each reply at most (default 256)"),
        CLI_TEMP(&gp.sampling),
        CLI_INT("--seed", "-s", &gp.sampling.seed, 0, 0x7fffffffL, "S", "the sampler's random seed (default 0)"),
        CLI_THREADS(&n_threads),
        CLI_CTX_SIZE(&ctx_size, 16),
        CLI_END,
    };
    int parsed = cli_parse("chat", argc, argv, opts);
    if (parsed) return cli_exit_code(parsed);
    tokd_err err;
    tokd_model *m = tokd_model_load(model_path, &err);
    if (!m) {
        fprintf(stderr, "tokd chat: %s\n", err.msg);
        return 1;
    }
    tokd_chat_template *tpl = tokd_chat_template_new(m, &err);
    tokd_ctx_params cp;
    tokd_ctx_params_default(&cp);
    cp.n_threads = (int32_t)n_threads;
    cp.n_ctx = (int32_t)ctx_size;
    tokd_ctx *c = tpl ? tokd_ctx_new(m, &cp, &err) : NULL;
    if (!c) {
        fprintf(stderr, "tokd chat: %s\n", err.msg);
        tokd_chat_template_free(tpl);
        tokd_model_free(m);
        return 1;
    }
    const char *const *stops = tokd_chat_template_stops(tpl);
    int32_t n_stops = 0;
    while (stops[n_stops]) n_stops++;
    gp.stop = stops;
    gp.n_stop = n_stops;
    gp.on_text = on_text;
    gp.on_token = on_token;
    gp.interrupted = cli_interrupted;
    cli_interrupt_install();

    cJSON *messages = cJSON_CreateArray();
    if (system) {
        cJSON *msg = cJSON_CreateObject();
        cJSON_AddStringToObject(msg, "role", "system");
        cJSON_AddStringToObject(msg, "content", system);
        cJSON_AddItemToArray(messages, msg);
    }
    int32_t *kv_toks = NULL; /* tokens the sequence's KV cache holds */
    size_t kv_n = 0;
    fprintf(stderr, "tokd chat: %s%s — /reset clears the history, /exit quits\n", model_path,
            tokd_chat_template_is_fallback(tpl) ? " (no chat template in the file: ChatML)" : "");
    int rc = 0;
    for (;;) {
        printf("> ");
        fflush(stdout);
        char *line = read_line();
        if (!line || !strcmp(line, "/exit")) {
            free(line);
            break;
        }
        if (!strcmp(line, "/reset")) {
            cJSON_Delete(messages);
            messages = cJSON_CreateArray();
            kv_n = 0;
            free(line);
            continue;
        }
        if (!line[0]) {
            free(line);
            continue;
        }
        cJSON *msg = cJSON_CreateObject();
        cJSON_AddStringToObject(msg, "role", "user");
        cJSON_AddStringToObject(msg, "content", line);
        cJSON_AddItemToArray(messages, msg);
        free(line);
        char *text = NULL;
        size_t text_len = 0;
        int32_t *prompt = NULL;
        size_t n_prompt = 0;
        int failed = tokd_chat_render(tpl, messages, NULL, true, NULL, &text, &text_len, &err);
        if (failed && tokd_chat_system_into_user(messages, false)) { /* a template without a system role */
            cJSON *merged = cJSON_Duplicate(messages, 1);
            tokd_chat_system_into_user(merged, true);
            tokd_err err2;
            failed = tokd_chat_render(tpl, merged, NULL, true, NULL, &text, &text_len, &err2);
            cJSON_Delete(merged);
        }
        if (failed || tokd_chat_tokenize(m, text, text_len, &prompt, &n_prompt, &err)) {
            fprintf(stderr, "tokd chat: %s\n", err.msg);
            free(text);
            cJSON_DeleteItemFromArray(messages, cJSON_GetArraySize(messages) - 1);
            continue;
        }
        free(text);
        size_t keep = 0;
        while (keep < kv_n && keep < n_prompt && kv_toks[keep] == prompt[keep]) keep++;
        gp.n_keep = (int32_t)keep;
        turn_state ts = {0};
        gp.ud = &ts;
        tokd_gen_stats st;
        cli_interrupt_arm(true);
        const int failed_gen = tokd_generate(c, m, prompt, (int32_t)n_prompt, &gp, &st, &err);
        cli_interrupt_arm(false);
        if (failed_gen || (st.finish == TOKD_FINISH_INTERRUPT && st.n_gen == 0)) {
            /* failed, or interrupted in the prompt: the turn is dropped, and the cache,
               holding part of it, is evaluated afresh next turn */
            if (failed_gen && n_prompt >= (size_t)tokd_ctx_n_ctx(c))
                fprintf(stderr, "tokd chat: %s (/reset starts a new conversation; -c sets the context)\n", err.msg);
            else if (failed_gen) fprintf(stderr, "tokd chat: %s\n", err.msg);
            else fprintf(stderr, "\n[tokd] interrupted before the reply\n");
            cJSON_DeleteItemFromArray(messages, cJSON_GetArraySize(messages) - 1);
            kv_n = 0;
        } else {
            printf("\n");
            fflush(stdout);
            cJSON *reply = cJSON_CreateObject();
            cJSON_AddStringToObject(reply, "role", "assistant");
            cJSON_AddStringToObject(reply, "content", ts.reply.data ? ts.reply.data : "");
            cJSON_AddItemToArray(messages, reply);
            /* the cache now holds the prompt and every generated token but the last */
            kv_n = n_prompt + (ts.n > 0 ? ts.n - 1 : 0);
            kv_toks = tokd_xrealloc(kv_toks, (kv_n ? kv_n : 1) * sizeof *kv_toks);
            memcpy(kv_toks, prompt, n_prompt * sizeof *kv_toks);
            if (ts.n > 1) memcpy(kv_toks + n_prompt, ts.toks, (ts.n - 1) * sizeof *kv_toks);
            fprintf(stderr, "[tokd] %d prompt tokens (%zu cached), %d generated, %.1f tok/s%s\n", st.n_prompt, keep,
                    st.n_gen, st.gen_tps, st.finish == TOKD_FINISH_INTERRUPT ? ", interrupted" : "");
        }
        free(prompt);
        free(ts.toks);
        tokd_buf_free(&ts.reply);
    }
    free(kv_toks);
    cJSON_Delete(messages);
    tokd_ctx_free(c);
    tokd_chat_template_free(tpl);
    tokd_model_free(m);
    return rc;
}
