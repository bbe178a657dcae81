/* cmd_serve.c — `tokd serve`: the OpenAI-compatible server (src/server/) over the engine. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "engine.h"
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
    const char *model_path = NULL, *v, *alias = NULL, *template_path = NULL;
    tokd_server_params sp;
    tokd_server_params_default(&sp);
    tokd_engine_params ep;
    tokd_engine_params_default(&ep);
    for (int i = 1; i < argc; i++) {
        int r;
        long lv;
        double dv;
        if ((r = cli_opt(argc, argv, &i, "-m", "--model", &v))) {
            if (r < 0) return 2;
            model_path = v;
        } else if ((r = cli_opt(argc, argv, &i, "--host", NULL, &v))) {
            if (r < 0) return 2;
            sp.host = v;
        } else if ((r = cli_opt(argc, argv, &i, "--port", NULL, &v))) {
            if (r < 0 || cli_int("serve", "--port", v, 0, 65535, &lv)) return 2;
            sp.port = (int)lv;
        } else if ((r = cli_opt(argc, argv, &i, "--api-key", NULL, &v))) {
            if (r < 0) return 2;
            sp.api_key = v;
        } else if ((r = cli_opt(argc, argv, &i, "--alias", NULL, &v))) {
            if (r < 0) return 2;
            alias = v;
        } else if ((r = cli_opt(argc, argv, &i, "--max-seqs", NULL, &v))) {
            if (r < 0 || cli_int("serve", "--max-seqs", v, 1, 4096, &lv)) return 2;
            ep.max_seqs = (int32_t)lv;
        } else if ((r = cli_opt(argc, argv, &i, "--kv-mem", NULL, &v))) {
            if (r < 0 || cli_int("serve", "--kv-mem", v, 1, 1 << 20, &lv)) return 2;
            ep.kv_mem_mib = lv;
        } else if ((r = cli_opt(argc, argv, &i, "--kv-blocks", NULL, &v))) {
            if (r < 0 || cli_int("serve", "--kv-blocks", v, 1, 1 << 24, &lv)) return 2;
            ep.n_blocks = lv;
        } else if ((r = cli_opt(argc, argv, &i, "--ctx", "-c", &v))) {
            if (r < 0 || cli_int("serve", "--ctx", v, 16, 1 << 20, &lv)) return 2;
            ep.n_ctx = (int32_t)lv;
        } else if ((r = cli_opt(argc, argv, &i, "-t", "--threads", &v))) {
            if (r < 0 || cli_int("serve", "-t", v, 0, 1024, &lv)) return 2;
            ep.n_threads = (int32_t)lv;
        } else if ((r = cli_opt(argc, argv, &i, "--step-tokens", NULL, &v))) {
            if (r < 0 || cli_int("serve", "--step-tokens", v, 1, 65536, &lv)) return 2;
            ep.step_tokens = (int32_t)lv;
        } else if ((r = cli_opt(argc, argv, &i, "--max-queue", NULL, &v))) {
            if (r < 0 || cli_int("serve", "--max-queue", v, 1, 1 << 20, &lv)) return 2;
            ep.max_waiting = (int32_t)lv;
        } else if ((r = cli_opt(argc, argv, &i, "--timeout", NULL, &v))) {
            if (r < 0 || cli_float("serve", "--timeout", v, 1, 86400, &dv)) return 2;
            sp.timeout_s = dv;
        } else if ((r = cli_opt(argc, argv, &i, "--shutdown-grace", NULL, &v))) {
            if (r < 0 || cli_float("serve", "--shutdown-grace", v, 0, 86400, &dv)) return 2;
            sp.shutdown_grace_s = dv;
        } else if ((r = cli_opt(argc, argv, &i, "--max-body", NULL, &v))) {
            if (r < 0 || cli_int("serve", "--max-body", v, 1024, 1L << 30, &lv)) return 2;
            sp.max_body = (size_t)lv;
        } else if ((r = cli_opt(argc, argv, &i, "--chat-template-file", NULL, &v))) {
            if (r < 0) return 2;
            template_path = v;
        } else if ((r = cli_opt(argc, argv, &i, "--tool-format", NULL, &v))) {
            if (r < 0) return 2;
            sp.tool_format = v;
        } else if ((r = cli_opt(argc, argv, &i, "--reasoning-format", NULL, &v))) {
            if (r < 0) return 2;
            sp.reasoning_format = v;
        } else if (!strcmp(argv[i], "--no-prefix-cache")) {
            ep.no_prefix_cache = true;
        } else {
            fprintf(stderr, "tokd serve: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
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
