/* cmd_serve.c — `tokd serve`: the OpenAI-compatible server (src/server/) over the engine. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "engine.h"
#include "server/http_lib.h"
#include "server/server.h"

static volatile sig_atomic_t g_stop;
static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
}

static const char *basename_noext(const char *path, char *buf, size_t cap) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    snprintf(buf, cap, "%s", b);
    size_t n = strlen(buf);
    if (n > 5 && !strcmp(buf + n - 5, ".gguf")) buf[n - 5] = 0;
    return buf;
}

int cmd_serve(int argc, char **argv) {
    const char *model_path = NULL, *alias = NULL, *template_path = NULL;
    tokd_server_params sp;
    tokd_server_params_default(&sp);
    tokd_engine_params ep;
    tokd_engine_params_default(&ep);
    const cli_option opts[] = {
        CLI_MODEL(&model_path),
        CLI_STR("--host", NULL, &sp.host, "ADDR", "address to listen on (default 127.0.0.1)"),
        CLI_INT("--port", NULL, &sp.port, 0, 65535, "PORT", "port to listen on (default 8080; 0: any free port)"),
        CLI_STR("--api-key", NULL, &sp.api_key, "KEY", "require Authorization: Bearer KEY"),
        CLI_STR("--alias", NULL, &alias, "NAME", "the model's id in /v1/models (default: the file name)"),
        CLI_INT("--max-seqs", NULL, &ep.max_seqs, 1, 4096, "N", "sequences decoded together at most (default 16)"),
        CLI_INT("--kv-mem", NULL, &ep.kv_mem_mib, 1, 1 << 20, "MIB", "KV cache size (default: room for --max-seqs full contexts)"),
        CLI_INT("--kv-blocks", NULL, &ep.n_blocks, 1, 1 << 24, "N", "KV cache size in blocks of 16 positions (instead of --kv-mem)"),
        CLI_INT("--ctx", "-c", &ep.n_ctx, 16, 1 << 20, "N", "context size of each sequence (default: the model's, at most 4096)"),
        CLI_INT("-t", "--threads", &ep.n_threads, 0, 1024, "N", "threads (default, or 0: the physical cores)"),
        CLI_INT("--step-tokens", NULL, &ep.step_tokens, 1, 65536, "N", "tokens one batched step carries at most (default 256)"),
        CLI_INT("--max-queue", NULL, &ep.max_waiting, 1, 1 << 20, "N", "requests waiting at most; past it 429 (default 512)"),
        CLI_NUM("--timeout", NULL, &sp.timeout_s, 1, 86400, "SECONDS", "close idle or slow-sending connections (default 30)"),
        CLI_NUM("--shutdown-grace", NULL, &sp.shutdown_grace_s, 0, 86400, "SECONDS", "on SIGTERM, time for running requests to finish (default 30)"),
        CLI_INT("--max-body", NULL, &sp.max_body, 1024, 1L << 30, "BYTES", "largest request body; past it 413 (default 8 MiB)"),
        CLI_STR("--chat-template-file", NULL, &template_path, "FILE", "a Jinja chat template instead of the model's"),
        CLI_STR("--tool-format", NULL, &sp.tool_format, "NAME", "tool-call format (default: from the template; hermes, llama3, mistral, ...)"),
        CLI_STR("--reasoning-format", NULL, &sp.reasoning_format, "NAME", "reasoning format (default: from the template; think, none, ...)"),
        CLI_FLAG("--no-prefix-cache", NULL, &ep.no_prefix_cache, "compute every prompt in full, sharing no KV blocks"),
        CLI_END,
    };
    int parsed = cli_parse("serve", argc, argv, opts);
    if (parsed) return cli_exit_code(parsed);
    if (!model_path) {
        cli_die_msg("serve", "-m MODEL is required");
        return 2;
    }
    tokd_err err;
    char *template_src = NULL;
    if (template_path) {
        FILE *f = fopen(template_path, "rb");
        tokd_buf b = {0};
        char chunk[65536];
        size_t n;
        if (!f) {
            fprintf(stderr, "tokd serve: cannot open --chat-template-file '%s'\n", template_path);
            return 1;
        }
        while ((n = fread(chunk, 1, sizeof chunk, f)) > 0 && b.len < (64u << 20)) tokd_buf_append(&b, chunk, n);
        fclose(f);
        tokd_buf_append(&b, "", 0);
        template_src = b.data;
        sp.chat_template = template_src;
    }
    /* the HTTP library before the model, so that a machine without it is told at once */
    if (!tokd_http_lib_load(&err)) {
        fprintf(stderr, "tokd serve: %s\n", err.msg);
        free(template_src);
        return 1;
    }
    tokd_model *m = tokd_model_load(model_path, &err);
    if (!m) {
        fprintf(stderr, "tokd serve: %s\n", err.msg);
        free(template_src);
        return 1;
    }
    char name[256];
    sp.model_id = alias ? alias : basename_noext(model_path, name, sizeof name);
    tokd_engine *e = tokd_engine_new(m, &ep, &err);
    if (!e) {
        fprintf(stderr, "tokd serve: %s\n", err.msg);
        tokd_model_free(m);
        free(template_src);
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    int rc = tokd_server_run(e, &sp, &g_stop, &err);
    if (rc) fprintf(stderr, "tokd serve: %s\n", err.msg);
    tokd_engine_free(e);
    tokd_model_free(m);
    free(template_src);
    if (!rc) fprintf(stderr, "tokd serve: stopped\n");
    return rc ? 1 : 0;
}
