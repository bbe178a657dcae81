/* cmd_run.c — `tokd run`: generate from a prompt. stdout carries only the generated text,
 * flushed per token; stderr carries the stage timings. Ctrl-C ends the generation at the
 * next token (finish "interrupted", the timings still printed, exit status 130, as a
 * shell reports a SIGINT); a second Ctrl-C ends the process at once. */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "generate.h"
#include "grammar.h"

#define MAX_STOP 16

/* The text as it streams. Once stdout fails (a full disk, a closed pipe's reader), the
 * generation stops at the next token and run fails, as nothing more can be delivered. */
static int stdout_errno;

static void write_text(void *ud, const char *text, size_t len) {
    (void)ud;
    errno = 0;
    if ((fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0) && !stdout_errno) stdout_errno = errno ? errno : EIO;
}

static bool stop_asked(void *ud) { return stdout_errno || cli_interrupted(ud); }

/* --grammar-file / --json-schema: the grammar, or NULL with a message. */
static tokd_grammar *load_grammar(const char *grammar_file, const char *schema_file) {
    size_t len = 0;
    const char *path = grammar_file ? grammar_file : schema_file;
    char *text = tokd_read_file(path, &len);
    if (!text) {
        fprintf(stderr, "tokd run: cannot read '%s': %s\n", path, strerror(errno));
        return NULL;
    }
    tokd_err err;
    tokd_grammar *g = NULL;
    if (grammar_file) {
        g = tokd_grammar_parse(text, len, &err);
    } else {
        cJSON *js = cJSON_ParseWithLength(text, len);
        if (!js) snprintf(err.msg, sizeof err.msg, "json schema: '%s' is not valid JSON", schema_file);
        else g = tokd_grammar_from_json_schema(js, false, &err);
        cJSON_Delete(js);
    }
    free(text);
    if (!g) fprintf(stderr, "tokd run: %s\n", err.msg);
    return g;
}

/* --seed: any unsigned 64-bit decimal, digits only; a larger one is refused. */
static int parse_seed(const char *cmd, const char *opt, const char *v, void *dst) {
    char *end;
    errno = 0;
    unsigned long long s = strtoull(v, &end, 10);
    if (v[0] < '0' || v[0] > '9' || *end || errno == ERANGE) {
        fprintf(stderr, "tokd %s: bad value for %s: '%s' (expected an integer in [0, %llu])\n", cmd, opt, v, ULLONG_MAX);
        return -1;
    }
    *(uint64_t *)dst = s;
    return 0;
}

int cmd_run(int argc, char **argv) {
    const char *model_path = "../shared/models/stories260K.gguf", *prompt = NULL, *prompt_file = NULL;
    const char *stops[MAX_STOP];
    int n_stop = 0;
    tokd_gen_params gp;
    tokd_gen_params_default(&gp);
    long n_threads = 0, ctx_size = 0;
    bool no_bos = false;
    const char *grammar_file = NULL, *schema_file = NULL;
    const cli_option opts[] = {
        CLI_STR("-m", "--model", &model_path, "FILE", "the GGUF model file (default ../shared/models/stories260K.gguf)"),
        CLI_STR("-p", "--prompt", &prompt, "TEXT", "the prompt (with the model's default BOS handling)"),
        CLI_STR("-f", "--file", &prompt_file, "FILE", "the prompt read from FILE ('-': stdin), byte for byte"),
        CLI_N_PREDICT(&gp.n_predict, -1, 1 << 24, "tokens to generate at most (default 128; -1: until the context is full)"),
        CLI_SAMPLING(&gp.sampling),
        CLI_CALL("--seed", "-s", parse_seed, &gp.sampling.seed, "S", "the sampler's random seed (default 0)"),
        CLI_LIST("--stop", NULL, stops, MAX_STOP, &n_stop, "stop strings", "TEXT", "stop at this text, which is never printed"),
        CLI_THREADS(&n_threads),
        CLI_CTX_SIZE(&ctx_size, 1),
        CLI_NUM("--time-limit", NULL, &gp.time_limit_s, 0, 1e9, "SECONDS", "stop generating after this long (0: no limit)"),
        CLI_STR("--grammar-file", NULL, &grammar_file, "FILE", "constrain the output to a GBNF-style grammar (root ::= ...)"),
        CLI_STR("--json-schema", NULL, &schema_file, "FILE", "constrain the output to JSON matching this JSON Schema"),
        CLI_FLAG("--no-bos", NULL, &no_bos, "add no BOS token before the prompt"),
        CLI_END,
    };
    int parsed = cli_parse("run", argc, argv, opts);
    if (parsed) return cli_exit_code(parsed);
    for (int i = 0; i < n_stop; i++)
        if (!stops[i][0]) {
            fprintf(stderr, "tokd run: --stop takes a non-empty text\n");
            return 2;
        }
    size_t prompt_len = 0;
    char *prompt_owned = NULL;
    int bad_prompt = cli_prompt("run", prompt, prompt_file, &prompt, &prompt_len, &prompt_owned);
    if (bad_prompt) return bad_prompt;
    gp.stop = stops;
    gp.n_stop = n_stop;
    gp.on_text = write_text;
    gp.interrupted = stop_asked;

    if (grammar_file && schema_file) {
        fprintf(stderr, "tokd run: --grammar-file and --json-schema exclude each other\n");
        free(prompt_owned);
        return 2;
    }
    tokd_grammar *grammar = NULL;
    if ((grammar_file || schema_file) && !(grammar = load_grammar(grammar_file, schema_file))) {
        free(prompt_owned);
        return 1;
    }

    tokd_err err;
    tokd_model *m = tokd_model_load(model_path, &err);
    if (!m) {
        fprintf(stderr, "tokd run: %s\n", err.msg);
        tokd_grammar_free(grammar);
        free(prompt_owned);
        return 1;
    }
    tokd_grammar_vocab *gvocab = grammar ? tokd_grammar_vocab_new(m->tok) : NULL;
    gp.grammar = grammar ? tokd_grammar_state_new(grammar, gvocab) : NULL;
    int32_t *toks = NULL;
    size_t n_toks = 0;
    const int bad_tokens = tokd_tokenize(m->tok, prompt, prompt_len, !no_bos, false, &toks, &n_toks, &err);
    free(prompt_owned);
    if (bad_tokens) {
        fprintf(stderr, "tokd run: %s\n", err.msg);
        tokd_grammar_state_free(gp.grammar);
        tokd_grammar_vocab_free(gvocab);
        tokd_grammar_free(grammar);
        tokd_model_free(m);
        return 1;
    }
    tokd_ctx_params cp;
    tokd_ctx_params_default(&cp);
    cp.n_threads = (int32_t)n_threads;
    cp.n_ctx = (int32_t)ctx_size;
    tokd_ctx *c = tokd_ctx_new(m, &cp, &err);
    int rc = 0;
    tokd_gen_stats st;
    cli_interrupt_install();
    cli_interrupt_arm(true);
    const int failed = !c || tokd_generate(c, m, toks, (int32_t)n_toks, &gp, &st, &err);
    cli_interrupt_arm(false);
    if (failed) {
        fprintf(stderr, "tokd run: %s\n", err.msg);
        rc = 1;
    } else if (stdout_errno) {
        fprintf(stderr, "tokd run: writing stdout failed: %s\n", strerror(stdout_errno));
        rc = 1;
    } else {
        fprintf(stderr,
                "\n[tokd] prompt %d tokens, generated %d, finish %s\n"
                "[tokd] time to first token %.2f ms | prompt %.1f tok/s | generation %.1f tok/s | "
                "inter-token latency p50 %.2f ms p99 %.2f ms\n",
                st.n_prompt, st.n_gen, tokd_finish_name(st.finish), st.t_first_token_s * 1e3, st.prompt_tps,
                st.gen_tps, st.itl_p50_ms, st.itl_p99_ms);
        if (st.finish == TOKD_FINISH_INTERRUPT) rc = 130;
    }
    free(toks);
    tokd_ctx_free(c);
    tokd_grammar_state_free(gp.grammar);
    tokd_grammar_vocab_free(gvocab);
    tokd_grammar_free(grammar);
    tokd_model_free(m);
    return rc;
}
