/* test_cli.c — the `tokd` command line as a user runs it (the binary named by $TOKD):
 * the golden generation of `tokd run`, `tokd logits` against the golden logits,
 * `tokd info`, `tokd imatrix`'s files and formats, every command's `--help` against its
 * parser and README.md, Ctrl-C in `tokd run`, where output goes (stdout that fails, a
 * FIFO, Ctrl-C while a model is written), `tokd perplexity` against llama-imatrix's
 * figure, and hostile input — truncated and corrupted model files, bad options,
 * invalid UTF-8 — where every failure must be one line on stderr and a non-zero exit,
 * never a crash or a hang. */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "imatrix.h"
#include "model.h"
#include "t.h"
#include "t_golden.h"
#include "tiny_model.h"

typedef struct {
    int exited, code, signaled;
    tokd_buf out, err;
} proc_result;

static void drain(int fd, tokd_buf *b) {
    char tmp[4096];
    ssize_t n;
    while ((n = read(fd, tmp, sizeof tmp)) > 0) tokd_buf_append(b, tmp, (size_t)n);
}

/* Run argv with a 60 s limit; stderr captured, and stdout too unless it goes to
 * stdout_path (opened for writing, as a shell's > does without truncating). */
static void run_to(char *const argv[], const char *stdout_path, proc_result *r) {
    memset(r, 0, sizeof *r);
    char outp[] = "/tmp/tokd-cli-outXXXXXX", errp[] = "/tmp/tokd-cli-errXXXXXX";
    int of = mkstemp(outp), ef = mkstemp(errp);
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDONLY);
        dup2(devnull, 0);
        dup2(stdout_path ? open(stdout_path, O_WRONLY) : of, 1);
        dup2(ef, 2);
        alarm(60);
        execv(argv[0], argv);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    r->exited = WIFEXITED(st);
    r->code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r->signaled = WIFSIGNALED(st);
    lseek(of, 0, SEEK_SET);
    lseek(ef, 0, SEEK_SET);
    drain(of, &r->out);
    drain(ef, &r->err);
    close(of);
    close(ef);
    unlink(outp);
    unlink(errp);
    tokd_buf_append(&r->out, "", 0);
    tokd_buf_append(&r->err, "", 0);
}

static void run(char *const argv[], proc_result *r) { run_to(argv, NULL, r); }

static void proc_free(proc_result *r) {
    tokd_buf_free(&r->out);
    tokd_buf_free(&r->err);
}

static int count_lines(const tokd_buf *b) {
    int n = 0;
    for (size_t i = 0; i < b->len; i++) n += b->data[i] == '\n';
    if (b->len && b->data[b->len - 1] != '\n') n++;
    return n;
}

/* A failure as the contract says: exit 1 or 2, not a signal, one non-empty stderr line. */
static int clean_failure(const proc_result *r) {
    return r->exited && (r->code == 1 || r->code == 2) && count_lines(&r->err) == 1 && r->err.len > 10;
}

static const char *tokd;
static char model[512];

static void test_run_golden(void) {
    char gpath[512];
    snprintf(gpath, sizeof gpath, "%s/golden/stories260K.p1.json", t_shared());
    size_t n;
    char *js = t_slurp(gpath, &n);
    cJSON *j = cJSON_Parse(js);
    cJSON *gt = cJSON_GetObjectItem(j, "greedy_tokens");
    const char *hex = cJSON_GetObjectItem(j, "greedy_text_hex")->valuestring;
    /* expected: the text of the first 40 golden tokens, through our detokenizer */
    tokd_err err;
    tokd_model *m = tokd_model_load(model, &err);
    tokd_detok *d = tokd_detok_new(m->tok);
    tokd_buf want = {0};
    for (int i = 0; i < 40; i++) tokd_detok_push(d, cJSON_GetArrayItem(gt, i)->valueint, &want);
    tokd_detok_flush(d, &want);
    tokd_buf_append(&want, "", 0);
    size_t hl = strlen(hex);
    char *full = malloc(hl / 2 + 1);
    for (size_t i = 0; i < hl / 2; i++) sscanf(hex + 2 * i, "%2hhx", (unsigned char *)&full[i]);
    full[hl / 2] = 0;
    CHECK(want.len > 20 && strncmp(full, want.data, want.len) == 0, "golden text starts with the text of its first 40 tokens");

    char *argv[] = {(char *)tokd, "run", "-m", model, "-p", "Once upon a time", "-n", "40", "--temp", "0", NULL};
    proc_result r;
    run(argv, &r);
    CHECK(r.exited && r.code == 0, "tokd run exits 0 (%d): %s", r.code, r.err.data);
    CHECK(r.out.len == want.len && memcmp(r.out.data, want.data, want.len) == 0,
          "tokd run prints exactly the golden text:\n got  '%s'\n want '%s'", r.out.data, want.data);
    CHECK(strstr(r.err.data, "time to first token") && strstr(r.err.data, "prompt") && strstr(r.err.data, "p99"),
          "timings on stderr: %s", r.err.data);
    proc_free(&r);

    /* a stop string: never emitted, generation ends there */
    char *argv2[] = {(char *)tokd, "run", "-m", model, "-p", "Once upon a time", "-n", "40", "--temp", "0", "--stop", "Lily", NULL};
    run(argv2, &r);
    CHECK(r.code == 0 && strcmp(r.out.data, ", there was a little girl named ") == 0, "stop string: '%s'", r.out.data);
    proc_free(&r);

    free(full);
    tokd_buf_free(&want);
    tokd_detok_free(d);
    tokd_model_free(m);
    cJSON_Delete(j);
    free(js);
}

static void test_logits(void) {
    char out[] = "/tmp/tokd-logitsXXXXXX";
    int fd = mkstemp(out);
    close(fd);
    char *argv[] = {(char *)tokd, "logits", "-m", model, "-p", "Once upon a time", "-o", out, NULL};
    proc_result r;
    run(argv, &r);
    CHECK(r.code == 0, "tokd logits exits 0: %s", r.err.data);
    size_t n, gn;
    float *ours = (float *)t_slurp(out, &n);
    char gpath[512];
    snprintf(gpath, sizeof gpath, "%s/golden/stories260K.p1.logits.f32", t_shared());
    float *gold = (float *)t_slurp(gpath, &gn);
    CHECK(ours && n == gn && n == 5 * 512 * sizeof(float), "logits file is 5 x 512 floats (%zu bytes)", n);
    if (ours && n == gn) {
        double maxdiff = 0;
        for (size_t i = 0; i < n / 4; i++) maxdiff = fmax(maxdiff, fabs((double)ours[i] - gold[i]));
        /* llama.cpp keeps K/V in F16: ~1e-2 absolute on logits of magnitude ~20 */
        CHECK(maxdiff < 0.05, "logits within 0.05 of the golden (max diff %g)", maxdiff);
    }
    free(ours);
    free(gold);
    unlink(out);
    proc_free(&r);
}

static void test_info(void) {
    proc_result r;
    char *argv[] = {(char *)tokd, "info", "-m", model, NULL};
    run(argv, &r);
    CHECK(r.code == 0 && strstr(r.out.data, "architecture llama") && strstr(r.out.data, "KV cache per token") &&
              strstr(r.out.data, "5 layers, dim 64, 8 heads (4 KV heads"),
          "tokd info: %s", r.out.data);
    proc_free(&r);
    char vocab[512];
    snprintf(vocab, sizeof vocab, "%s/vocab/ggml-vocab-gpt-2.gguf", t_shared());
    char *argv2[] = {(char *)tokd, "info", "-m", vocab, NULL};
    run(argv2, &r);
    CHECK(r.code == 0 && strstr(r.out.data, "vocabulary only") && strstr(r.out.data, "gpt2"), "info on a vocab file: %s", r.out.data);
    proc_free(&r);
}

/* Only `tokd serve` loads libmicrohttpd (and the GnuTLS it brings, ~4 ms of dynamic
 * loading a start): a command that does not serve starts without it. The dynamic
 * loader's own trace (LD_DEBUG=libs) names each library it opens; libpcre2 is there
 * to show the trace works. */
static void test_no_http_lib_outside_serve(void) {
    setenv("LD_DEBUG", "libs", 1);
    proc_result r;
    char *argv[] = {(char *)tokd, "info", "-m", model, NULL};
    run(argv, &r);
    unsetenv("LD_DEBUG");
    CHECK(r.code == 0 && strstr(r.err.data, "libpcre2-8.so") && !strstr(r.err.data, "libmicrohttpd") &&
              !strstr(r.err.data, "libgnutls"),
          "tokd info loads no HTTP library: exit %d, loader trace %.300s", r.code, r.err.data);
    proc_free(&r);
}

static void test_bad_options(void) {
    struct { char *argv[12]; const char *what; } cases[] = {
        {{(char *)tokd, "run", "-m", "/nonexistent.gguf", "-p", "x", NULL}, "missing model"},
        {{(char *)tokd, "run", "-m", model, NULL}, "missing prompt"},
        {{(char *)tokd, "run", "-m", model, "-p", "x", "-n", "abc", NULL}, "bad -n"},
        {{(char *)tokd, "run", "-m", model, "-p", "x", "--temp", "-1", NULL}, "negative temp"},
        {{(char *)tokd, "run", "-m", model, "-p", "x", "--top-p", "2", NULL}, "top-p > 1"},
        {{(char *)tokd, "run", "-m", model, "-p", "x", "--bogus", NULL}, "unknown option"},
        {{(char *)tokd, "run", "-m", model, "-p", "x", "-t", NULL}, "missing value"},
        {{(char *)tokd, "info", NULL}, "info without model"},
        {{(char *)tokd, "logits", "-m", model, "-p", "x", NULL}, "logits without -o"},
        {{(char *)tokd, "logits", "-m", model, "-p", "x", "-o", "/dev/full", NULL}, "logits onto a full device"},
        {{(char *)tokd, "frobnicate", NULL}, "unknown command"},
        {{(char *)tokd, "info", "-m", "/tmp", NULL}, "a directory"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        proc_result r;
        run(cases[i].argv, &r);
        CHECK(clean_failure(&r), "%s: exit %d, stderr '%s'", cases[i].what, r.code, r.err.data);
        proc_free(&r);
    }
    /* invalid UTF-8 and an empty prompt never crash */
    char *bad[] = {(char *)tokd, "run", "-m", model, "-p", "\xff\xfe\xc3(\xe2\x82", "-n", "5", NULL};
    proc_result r;
    run(bad, &r);
    CHECK(r.exited && r.code == 0, "invalid UTF-8 prompt runs (%d): %s", r.code, r.err.data);
    proc_free(&r);
    char *empty[] = {(char *)tokd, "run", "-m", model, "-p", "", "-n", "5", NULL};
    run(empty, &r);
    CHECK(r.exited && (r.code == 0 || clean_failure(&r)), "empty prompt: %d %s", r.code, r.err.data);
    proc_free(&r);
}

/* argv exits with code, stdout starting with out, and stderr exactly err (any if err is NULL). */
static void expect_run(char **argv, int code, const char *out, const char *err) {
    proc_result r;
    run(argv, &r);
    bool ok = r.exited && r.code == code && strncmp(r.out.data, out, strlen(out)) == 0 && (*out || !r.out.data[0]) &&
              (!err || strcmp(r.err.data, err) == 0);
    CHECK(ok, "tokd %s %s: exit %d, stdout '%s', stderr '%s'", argv[1], argv[2], r.code, r.out.data, r.err.data);
    proc_free(&r);
}

/* The option tables (src/cli/cli_opts.h): exact error lines and exit codes for bad values,
 * missing values, unknown options, the --stop limit and positional arguments; and the
 * values reaching the command (bench-serve prints its settings even when every request
 * fails, here against a closed port). */
static void test_option_parsing(void) {
    struct { char *argv[16]; int code; const char *out, *err; } cases[] = {
        {{(char *)tokd, "run", "-p", "x", "-n", "abc", NULL}, 2, "",
         "tokd run: bad value for -n: 'abc' (expected an integer in [-1, 16777216])\n"},
        {{(char *)tokd, "run", "-p", "x", "--n-predict", "-2", NULL}, 2, "",
         "tokd run: bad value for -n: '-2' (expected an integer in [-1, 16777216])\n"},
        {{(char *)tokd, "run", "-p", "x", "--top-p", "1.5", NULL}, 2, "",
         "tokd run: bad value for --top-p: '1.5' (expected a number in [0, 1])\n"},
        {{(char *)tokd, "run", "-p", "x", "-s", "-5", NULL}, 2, "",
         "tokd run: bad value for --seed: '-5' (expected an integer in [0, 18446744073709551615])\n"},
        {{(char *)tokd, "run", "-p", "x", "-s", "18446744073709551616", NULL}, 2, "",
         "tokd run: bad value for --seed: '18446744073709551616' (expected an integer in [0, 18446744073709551615])\n"},
        {{(char *)tokd, "run", "-p", "x", "--stop", "", NULL}, 2, "", "tokd run: --stop takes a non-empty text\n"},
        {{(char *)tokd, "run", "-p", "x", "--seed", NULL}, 2, "", "tokd run: option --seed needs a value\n"},
        {{(char *)tokd, "run", "-p", "x", "--threads", NULL}, 2, "", "tokd run: option --threads needs a value\n"},
        {{(char *)tokd, "run", "-p", "x", "--no-bos", "--bogus", NULL}, 2, "", "tokd run: unknown option '--bogus'\n"},
        {{(char *)tokd, "chat", "--temp", "101", NULL}, 2, "", "tokd chat: bad value for --temp: '101' (expected a number in [0, 100])\n"},
        {{(char *)tokd, "chat", "-s", "2147483648", NULL}, 2, "",
         "tokd chat: bad value for --seed: '2147483648' (expected an integer in [0, 2147483647])\n"},
        {{(char *)tokd, "serve", "-m", "/nonexistent.gguf", "-c", "5", NULL}, 2, "",
         "tokd serve: bad value for --ctx: '5' (expected an integer in [16, 1048576])\n"},
        {{(char *)tokd, "serve", "-t", "-1", NULL}, 2, "", "tokd serve: bad value for -t: '-1' (expected an integer in [0, 1024])\n"},
        {{(char *)tokd, "bench-serve", "--concurrency", "0", NULL}, 2, "",
         "tokd bench-serve: bad value for -c: '0' (expected an integer in [1, 4096])\n"},
        {{(char *)tokd, "bench", "--json", "--no-machine", NULL}, 2, "", "tokd bench: need -m MODEL\n"},
        {{(char *)tokd, "synth", "--seed", "-1", NULL}, 2, "",
         "tokd synth: bad value for --seed: '-1' (expected an integer in [0, 9223372036854775807])\n"},
        {{(char *)tokd, "quantize", "-q", "a", "b", "c", "d", NULL}, 2, "", "tokd quantize: too many arguments ('d')\n"},
        {{(char *)tokd, "imatrix", "--in-file", "x", "-o", "y", "--output-format", "bin", NULL}, 2, "",
         "tokd imatrix: --output-format takes gguf or dat, not 'bin'\n"},
        {{(char *)tokd, "imatrix", "-m", "x.gguf", "-o", "y", NULL}, 2, "",
         "tokd imatrix: need -m MODEL -f TEXT (or --in-file FILE) and -o OUT\n"},
        {{(char *)tokd, "imatrix", "--in-file", "x", NULL}, 2, "",
         "tokd imatrix: need -m MODEL -f TEXT (or --in-file FILE) and -o OUT\n"},
        {{(char *)tokd, "quantize", "a", "--bogus", NULL}, 2, "", "tokd quantize: unknown option '--bogus'\n"},
        {{(char *)tokd, "render", "x", NULL}, 2, "",
         "tokd render: unknown argument 'x' (usage: tokd render --template FILE.jinja < context.json)\n"},
        {{(char *)tokd, "tokenize", "--help", "--bogus", NULL}, 0, "usage: tokd tokenize -m MODEL [options]  < text\n", ""},
        {{(char *)tokd, "tokenize", "--bogus", "--help", NULL}, 2, "", "tokd tokenize: unknown option '--bogus'\n"},
        {{(char *)tokd, "run", "-n", "--help", NULL}, 2, "", "tokd run: bad value for -n: '--help' (expected an integer in [-1, 16777216])\n"},
        {{(char *)tokd, "bench-serve", "--port", "1", "-c", "1", "-n", "1", "--max-tokens", "3", "--prompt-words", "4", NULL}, 1,
         "bench-serve: 1 clients, 1 requests (1 failed), prompt 0+4 words, 3 output tokens, temp 0\n", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) expect_run(cases[i].argv, cases[i].code, cases[i].out, cases[i].err);
    char *stops[40] = {(char *)tokd, "run", "-p", "x"};
    for (int k = 0; k < 17; k++) {
        stops[4 + 2 * k] = "--stop";
        stops[5 + 2 * k] = "s";
    }
    expect_run(stops, 2, "", "tokd run: at most 16 stop strings\n");
}

/* Ctrl-C in `tokd run`: a generation that would go on for a long time (a grammar that
 * never completes, so no end-of-generation token is allowed, and a large context) gets
 * SIGINT once its first text has arrived; it ends at the next token, prints its timings
 * with finish "interrupted" and exits 130. */
static void test_interrupt(void) {
    char gpath[256];
    snprintf(gpath, sizeof gpath, "/tmp/tokd-cli-forever-%d.gbnf", (int)getpid());
    const char *grammar = "root ::= \"a\" root\n";
    tiny_write_file(gpath, (const uint8_t *)grammar, strlen(grammar));
    char errp[] = "/tmp/tokd-cli-intXXXXXX";
    int ef = mkstemp(errp), out[2];
    CHECK(ef >= 0 && pipe(out) == 0, "temporary file and pipe");
    char *argv[] = {(char *)tokd, "run", "-m", model, "-p", "Once", "--grammar-file", gpath, "-n", "-1", "-c", "200000",
                    "--temp", "0", NULL};
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        dup2(ef, 2);
        close(out[0]);
        alarm(60);
        execv(argv[0], argv);
        _exit(127);
    }
    close(out[1]);
    tokd_buf text = {0};
    char buf[4096];
    struct pollfd pfd = {.fd = out[0], .events = POLLIN};
    bool sent = false;
    for (;;) {
        if (poll(&pfd, 1, 30000) <= 0) break; /* nothing for 30 s: the checks below fail */
        ssize_t n = read(out[0], buf, sizeof buf);
        if (n <= 0) break;
        tokd_buf_append(&text, buf, (size_t)n);
        if (!sent) kill(pid, SIGINT), sent = true;
    }
    close(out[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    lseek(ef, 0, SEEK_SET);
    tokd_buf err = {0};
    drain(ef, &err);
    tokd_buf_append(&err, "", 0);
    close(ef);
    unlink(errp);
    unlink(gpath);
    size_t as = 0;
    while (as < text.len && text.data[as] == 'a') as++;
    CHECK(sent && WIFEXITED(status) && WEXITSTATUS(status) == 130, "SIGINT: exit %d (signal %d)",
          WIFEXITED(status) ? WEXITSTATUS(status) : -1, WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    CHECK(text.len > 0 && as == text.len && text.len < 150000, "the text before the interruption: %zu bytes, %zu of them 'a'",
          text.len, as);
    CHECK(strstr(err.data, "finish interrupted\n") != NULL, "stderr reports the interruption: '%s'", err.data);
    tokd_buf_free(&text);
    tokd_buf_free(&err);
}

/* What a command writes, and where: -n 0 samples nothing; a time limit holds during the
 * prompt; output that cannot reach stdout fails the command with one line; a folder
 * given as a file names the reason; `logits -o -` writes stdout; an output path that is
 * a FIFO is written through, not replaced by a regular file; and a SIGINT in the middle
 * of writing a model leaves neither the model nor its PATH.tmp behind. */
static void test_outputs(void) {
    proc_result r;
    char *none[] = {(char *)tokd, "run", "-m", model, "-p", "Once upon a time", "-n", "0", NULL};
    run(none, &r);
    CHECK(r.exited && r.code == 0 && r.out.len == 0 && strstr(r.err.data, "generated 0, finish length"),
          "-n 0 samples nothing: exit %d, stdout '%s', stderr '%s'", r.code, r.out.data, r.err.data);
    proc_free(&r);
    /* checked before the prompt's first chunk: the old check, after each token, let one through */
    char *timed[] = {(char *)tokd, "run", "-m", model, "-p", "Once upon a time", "--time-limit", "0.000000001", NULL};
    run(timed, &r);
    CHECK(r.exited && r.code == 0 && r.out.len == 0 && strstr(r.err.data, "generated 0, finish time"),
          "a time limit shorter than the prompt: exit %d, stdout '%s', stderr '%s'", r.code, r.out.data, r.err.data);
    proc_free(&r);

    char *info[] = {(char *)tokd, "info", "-m", model, NULL};
    run_to(info, "/dev/full", &r);
    CHECK(r.exited && r.code == 1 && !strcmp(r.err.data, "tokd info: writing stdout failed: No space left on device\n"),
          "info > /dev/full: exit %d, stderr '%s'", r.code, r.err.data);
    proc_free(&r);
    char *gen[] = {(char *)tokd, "run", "-m", model, "-p", "Once upon a time", "-n", "100", NULL};
    run_to(gen, "/dev/full", &r);
    CHECK(r.exited && r.code == 1 && !strcmp(r.err.data, "tokd run: writing stdout failed: No space left on device\n"),
          "run > /dev/full: exit %d, stderr '%s'", r.code, r.err.data);
    proc_free(&r);

    char dir[] = "/tmp/tokd-cli-dirXXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char *from_dir[] = {(char *)tokd, "run", "-m", model, "-f", dir, NULL};
    run(from_dir, &r);
    char want[128];
    snprintf(want, sizeof want, "tokd run: cannot read '%s': Is a directory\n", dir);
    CHECK(r.exited && r.code == 1 && !strcmp(r.err.data, want), "-f FOLDER: exit %d, stderr '%s'", r.code, r.err.data);
    proc_free(&r);

    char lpath[256];
    snprintf(lpath, sizeof lpath, "%s/logits.bin", dir);
    char *to_file[] = {(char *)tokd, "logits", "-m", model, "-p", "Once upon a time", "-o", lpath, NULL};
    char *to_out[] = {(char *)tokd, "logits", "-m", model, "-p", "Once upon a time", "-o", "-", NULL};
    proc_result a;
    run(to_file, &a);
    run(to_out, &r);
    size_t flen = 0;
    char *fdata = tokd_read_file(lpath, &flen);
    CHECK(a.code == 0 && r.code == 0 && fdata && flen > 0 && r.out.len == flen && !memcmp(r.out.data, fdata, flen) &&
              strstr(r.err.data, "written to stdout"),
          "logits -o - writes the bytes of -o FILE to stdout: %zu against %zu bytes, stderr '%s'", r.out.len, flen, r.err.data);
    free(fdata);
    unlink(lpath);
    proc_free(&a);
    proc_free(&r);

    /* quantize into a FIFO: a reader gets the file's bytes, and the FIFO stays a FIFO */
    char fifo[256], qfile[256], got[256];
    snprintf(fifo, sizeof fifo, "%s/model.fifo", dir);
    snprintf(qfile, sizeof qfile, "%s/q8.gguf", dir);
    snprintf(got, sizeof got, "%s/from-fifo.gguf", dir);
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
    pid_t reader = fork();
    if (reader == 0) {
        alarm(60);
        int in = open(fifo, O_RDONLY), out = open(got, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        char buf[65536];
        ssize_t n;
        while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
            if (write(out, buf, (size_t)n) != n) _exit(1);
        _exit(in >= 0 && out >= 0 ? 0 : 1);
    }
    char *q_fifo[] = {(char *)tokd, "quantize", model, fifo, "Q8_0", "-q", NULL};
    char *q_file[] = {(char *)tokd, "quantize", model, qfile, "Q8_0", "-q", NULL};
    run(q_fifo, &r);
    struct stat st;
    const bool still_fifo = stat(fifo, &st) == 0 && S_ISFIFO(st.st_mode);
    if (!still_fifo) kill(reader, SIGKILL); /* it waits for a writer that never came */
    int status = 0;
    waitpid(reader, &status, 0);
    run(q_file, &a);
    size_t glen = 0, qlen = 0;
    char *gdata = tokd_read_file(got, &glen), *qdata = tokd_read_file(qfile, &qlen);
    CHECK(r.code == 0 && a.code == 0 && still_fifo && gdata && qdata && glen == qlen && qlen > 0 && !memcmp(gdata, qdata, qlen),
          "quantize into a FIFO: exit %d, still a FIFO %d, %zu bytes read against %zu in a file; stderr '%s'", r.code,
          still_fifo, glen, qlen, r.err.data);
    free(gdata);
    free(qdata);
    proc_free(&r);
    proc_free(&a);

    /* SIGINT while synth writes: the default action (exit by SIGINT) and no file left */
    char big[256], big_tmp[300];
    snprintf(big, sizeof big, "%s/big.gguf", dir);
    snprintf(big_tmp, sizeof big_tmp, "%s.tmp", big);
    char *synth[] = {(char *)tokd, "synth", "-o", big, "--shape", "tinyllama-1.1b", "--type", "Q4_K", "-q", NULL};
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGINT, SIG_DFL); /* a test run in the background inherits it ignored */
        alarm(120);
        execv(synth[0], synth);
        _exit(127);
    }
    bool seen = false;
    for (int i = 0; i < 6000 && !seen; i++) { /* up to 60 s for the file to appear */
        seen = access(big_tmp, F_OK) == 0;
        if (!seen) usleep(10000);
    }
    kill(pid, SIGINT);
    waitpid(pid, &status, 0);
    const bool left = access(big_tmp, F_OK) == 0 || access(big, F_OK) == 0;
    CHECK(seen && WIFSIGNALED(status) && WTERMSIG(status) == SIGINT && !left,
          "SIGINT while writing a model: PATH.tmp seen %d, signaled %d (signal %d), file left %d", seen, WIFSIGNALED(status),
          WIFSIGNALED(status) ? WTERMSIG(status) : 0, left);
    unlink(big);
    unlink(big_tmp);
    unlink(got);
    unlink(qfile);
    unlink(fifo);
    rmdir(dir);
}

/* One `tokd perplexity --kl-model` line: mean KL and the same-top-token share; false
 * when the output has none. */
static bool kl_line(const char *out, double *mean, double *same_top) {
    const char *l = strstr(out, "KL divergence from --kl-model: mean ");
    double se, mx;
    return l && sscanf(l, "KL divergence from --kl-model: mean %lf +/- %lf, max %lf; same top token %lf", mean, &se, &mx,
                       same_top) == 4;
}

/* --kl-model, over the text's first 8 chunks (the sanitizer stage runs this too): a model
 * against itself is 0 and agrees everywhere; Q8_0 and Q4_0 files made from it by `tokd
 * quantize` diverge, Q4_0 more; batches of 32 within the chunks give the figures whole
 * chunks give; a vocabulary that differs is refused. */
static void test_perplexity_kl(const char *guide) {
    char q8[256], q4[256], other[256], vocab[512];
    snprintf(q8, sizeof q8, "/tmp/tokd-cli-kl-q8-%d.gguf", (int)getpid());
    snprintf(q4, sizeof q4, "/tmp/tokd-cli-kl-q4-%d.gguf", (int)getpid());
    snprintf(other, sizeof other, "/tmp/tokd-cli-kl-other-%d.gguf", (int)getpid());
    snprintf(vocab, sizeof vocab, "%s/vocab/ggml-vocab-falcon.gguf", t_shared());
    char *mk8[] = {(char *)tokd, "quantize", model, q8, "Q8_0", "-q", NULL};
    char *mk4[] = {(char *)tokd, "quantize", model, q4, "Q4_0", "-q", NULL};
    char *mko[] = {(char *)tokd, "synth", "-o", other, "--shape", "tiny", "--type", "Q8_0", "--vocab", vocab, "-q", NULL};
    proc_result r;
    char **makers[] = {mk8, mk4, mko};
    for (int i = 0; i < 3; i++) {
        run(makers[i], &r);
        CHECK(r.code == 0, "%s %s: exit %d, '%s'", makers[i][1], makers[i][3], r.code, r.err.data);
        proc_free(&r);
    }
    const char *subjects[] = {model, q8, q4, q8};
    double mean[4] = {0}, top[4] = {0};
    for (int i = 0; i < 4; i++) {
        char *argv[] = {(char *)tokd, "perplexity", "-m", (char *)subjects[i], "-f", (char *)guide, "-c", "128", "--chunks", "8",
                        "--kl-model", model, i == 3 ? "-b" : NULL, "32", NULL};
        run(argv, &r);
        CHECK(r.code == 0 && kl_line(r.out.data, &mean[i], &top[i]), "perplexity --kl-model (%s): exit %d, '%s'", subjects[i],
              r.code, r.out.data);
        proc_free(&r);
    }
    CHECK(mean[0] == 0 && top[0] == 100, "the model against itself: KL %g, same top %g %%", mean[0], top[0]);
    CHECK(mean[1] > 0 && mean[2] > mean[1] && top[1] < 100 && top[2] < top[1],
          "Q8_0 KL %g (same top %g %%), Q4_0 KL %g (%g %%): both diverge, Q4_0 more", mean[1], top[1], mean[2], top[2]);
    CHECK(mean[3] == mean[1] && top[3] == top[1], "batches of 32: KL %g and %g %% as with whole chunks", mean[3], top[3]);
    char *refused[] = {(char *)tokd, "perplexity", "-m", model, "-f", (char *)guide, "-c", "128", "--kl-model", other, NULL};
    run(refused, &r);
    CHECK(clean_failure(&r) && strstr(r.err.data, "vocabulary is not the model's"), "another vocabulary refused: '%s'",
          r.err.data);
    proc_free(&r);
    unlink(q8);
    unlink(q4);
    unlink(other);
}

/* `tokd perplexity` on stories260K over ../shared/GUIDE.md in chunks of 128 tokens gives
 * what llama-imatrix (llama.cpp c392e5094) printed for the same model, text and chunks:
 * PPL 324.9009 +/- 31.81048 (README.md); and its errors. */
static void test_perplexity(void) {
    char guide[512];
    snprintf(guide, sizeof guide, "%s/GUIDE.md", t_shared());
    char *argv[] = {(char *)tokd, "perplexity", "-m", model, "-f", guide, "-c", "128", NULL};
    proc_result r;
    run(argv, &r);
    double ppl = 0, se = 0;
    long positions = 0;
    int got = sscanf(r.out.data, "PPL %lf +/- %lf over %ld positions", &ppl, &se, &positions);
    CHECK(r.code == 0 && got == 3 && fabs(ppl - 324.9009) < 0.01 && fabs(se - 31.81048) < 0.01 && positions == 2142,
          "perplexity: exit %d, '%s' (llama-imatrix: 324.9009 +/- 31.81048 over 2142)", r.code, r.out.data);
    CHECK(strstr(r.err.data, "tokd perplexity: chunk 34 of 34, PPL ") != NULL, "progress by chunk on stderr");
    proc_free(&r);
    char *no_text[] = {(char *)tokd, "perplexity", "-m", model, NULL};
    char *huge_chunks[] = {(char *)tokd, "perplexity", "-m", model, "-f", guide, "-c", "1000000", NULL};
    expect_run(no_text, 2, "", "tokd perplexity: need -m MODEL -f TEXT\n");
    run(huge_chunks, &r);
    CHECK(clean_failure(&r) && strstr(r.err.data, "fewer than one chunk of 1000000"), "a text shorter than a chunk: '%s'",
          r.err.data);
    proc_free(&r);
    test_perplexity_kl(guide);
}

/* -f FILE (and -f - for stdin) gives `tokd run` and `tokd logits` the file's bytes as
 * the prompt: the same text and logits as -p with those bytes; -p with -f, or a file that
 * cannot be read, is a one-line error. */
static void test_prompt_file(void) {
    const char *text = "Once upon a time, Lily saw a \"big\" dog.\n";
    char path[256], lp[256], lf[256];
    snprintf(path, sizeof path, "/tmp/tokd-cli-prompt-%d.txt", (int)getpid());
    snprintf(lp, sizeof lp, "/tmp/tokd-cli-logits-p-%d.bin", (int)getpid());
    snprintf(lf, sizeof lf, "/tmp/tokd-cli-logits-f-%d.bin", (int)getpid());
    tiny_write_file(path, (const uint8_t *)text, strlen(text));
    char *with_p[] = {(char *)tokd, "run", "-m", model, "-p", (char *)text, "--temp", "0", "-n", "16", NULL};
    char *with_f[] = {(char *)tokd, "run", "-m", model, "-f", path, "--temp", "0", "-n", "16", NULL};
    char *empty_p[] = {(char *)tokd, "run", "-m", model, "-p", "", "--temp", "0", "-n", "8", NULL};
    char *stdin_f[] = {(char *)tokd, "run", "-m", model, "-f", "-", "--temp", "0", "-n", "8", NULL}; /* stdin: /dev/null */
    proc_result a, b, c, d;
    run(with_p, &a);
    run(with_f, &b);
    run(empty_p, &c);
    run(stdin_f, &d);
    CHECK(a.code == 0 && b.code == 0 && a.out.len > 10 && !strcmp(a.out.data, b.out.data),
          "run -f FILE writes what -p with its text does: '%s' / '%s' (exit %d, %d)", a.out.data, b.out.data, a.code, b.code);
    CHECK(c.code == 0 && d.code == 0 && !strcmp(c.out.data, d.out.data), "run -f - reads stdin: '%s' / '%s'", c.out.data, d.out.data);
    proc_free(&a);
    proc_free(&b);
    proc_free(&c);
    proc_free(&d);
    char *logits_p[] = {(char *)tokd, "logits", "-m", model, "-p", (char *)text, "-o", lp, NULL};
    char *logits_f[] = {(char *)tokd, "logits", "-m", model, "--file", path, "-o", lf, NULL};
    run(logits_p, &a);
    run(logits_f, &b);
    size_t np = 0, nf = 0;
    char *bp = tokd_read_file(lp, &np), *bf = tokd_read_file(lf, &nf);
    CHECK(a.code == 0 && b.code == 0 && bp && bf && np > 0 && np == nf && !memcmp(bp, bf, np),
          "logits -f FILE writes the bytes -p does (%zu and %zu bytes)", np, nf);
    free(bp);
    free(bf);
    proc_free(&a);
    proc_free(&b);
    char missing[300];
    snprintf(missing, sizeof missing, "%s.missing", path);
    char err_missing[400];
    snprintf(err_missing, sizeof err_missing, "tokd run: cannot read '%s': No such file or directory\n", missing);
    char *both[] = {(char *)tokd, "run", "-m", model, "-p", "x", "-f", path, NULL};
    char *none[] = {(char *)tokd, "run", "-m", model, NULL};
    char *unreadable[] = {(char *)tokd, "run", "-m", model, "-f", missing, NULL};
    char *logits_both[] = {(char *)tokd, "logits", "-m", model, "-p", "x", "-f", path, "-o", lp, NULL};
    expect_run(both, 2, "", "tokd run: -p and -f exclude each other\n");
    expect_run(none, 2, "", "tokd run: missing -p PROMPT (or -f FILE)\n");
    expect_run(unreadable, 1, "", err_missing);
    expect_run(logits_both, 2, "", "tokd logits: -p and -f exclude each other\n");
    unlink(path);
    unlink(lp);
    unlink(lf);
}

/* The long options (--name) in text[0..len), each once, into names (a list of cap). */
static int long_options(const char *text, size_t len, char names[][40], int n, int cap) {
    for (size_t i = 0; i + 2 < len; i++) {
        if (text[i] != '-' || text[i + 1] != '-' || (i > 0 && !strchr(" [(|", text[i - 1])))
            continue;
        size_t j = i + 2;
        while (j < len && ((text[j] >= 'a' && text[j] <= 'z') || (text[j] >= '0' && text[j] <= '9') || text[j] == '-')) j++;
        if (j - i < 3 || j - i >= 40) continue;
        int k = 0;
        while (k < n && (strlen(names[k]) != j - i || strncmp(names[k], text + i, j - i) != 0)) k++;
        if (k == n && n < cap) {
            memcpy(names[n], text + i, j - i);
            names[n++][j - i] = 0;
        }
    }
    return n;
}

static bool in_list(char names[][40], int n, const char *name) {
    for (int k = 0; k < n; k++)
        if (!strcmp(names[k], name)) return true;
    return false;
}

/* Whether text[0..len) has name as a word of a synopsis: after a space, '[', '(' or '|',
 * and before a space, ']', ')', '|' or the end of a line. */
static bool has_option_word(const char *text, size_t len, const char *name) {
    size_t n = strlen(name);
    for (size_t i = 1; i + n <= len; i++)
        if (!strncmp(text + i, name, n) && strchr(" [(|", text[i - 1]) && (i + n == len || strchr(" ])|\n", text[i + n])))
            return true;
    return false;
}

/* `tokd CMD --help` (and -h) for every command: exit 0, the usage line, nothing on
 * stderr. Every option line it prints names options the command parses: one with a value
 * asks for it when given none, a flag lets parsing go on to the next argument. And the
 * command's synopsis in README.md names every option of the help (by one of its names),
 * and no long option the help lacks: the README cannot fall behind the option tables,
 * nor the help list options that do not exist (the help and the parser read the same
 * table: cli_opts.h). */
static void test_help(void) {
    static const char *cmds[] = {"run",      "chat",  "serve",  "bench-serve", "bench", "quantize", "imatrix",
                                 "perplexity", "synth", "logits", "tokenize",    "info",  "render"};
    size_t readme_len = 0;
    char *readme = tokd_read_file("README.md", &readme_len);
    CHECK(readme != NULL, "README.md is readable from the test's directory (the repository root)");
    for (size_t c = 0; c < sizeof cmds / sizeof cmds[0]; c++) {
        char *argv[] = {(char *)tokd, (char *)cmds[c], "--help", NULL}, *argv_h[] = {(char *)tokd, (char *)cmds[c], "-h", NULL};
        proc_result r, rh;
        run(argv, &r);
        run(argv_h, &rh);
        char usage[64];
        snprintf(usage, sizeof usage, "usage: tokd %s ", cmds[c]);
        CHECK(r.exited && r.code == 0 && !r.err.len && !strncmp(r.out.data, usage, strlen(usage)) && strstr(r.out.data, "\noptions:\n"),
              "tokd %s --help: exit %d, stdout '%.80s', stderr '%s'", cmds[c], r.code, r.out.data, r.err.data);
        CHECK(rh.code == 0 && !strcmp(rh.out.data, r.out.data), "tokd %s -h prints what --help does", cmds[c]);
        /* README.md: the code block under "### `tokd CMD`" */
        char heading[64];
        snprintf(heading, sizeof heading, "### `tokd %s`\n```\n", cmds[c]);
        const char *block = readme ? strstr(readme, heading) : NULL;
        const char *block_end = block ? strstr(block + strlen(heading), "```") : NULL;
        CHECK(block && block_end, "README.md has a synopsis block for tokd %s", cmds[c]);
        if (!block || !block_end) block = block_end = "";
        else block += strlen(heading);
        const size_t block_len = (size_t)(block_end - block);
        /* each option line: "  -t, --threads N   text" or "      --host ADDR   text" */
        char help_names[64][40];
        int n_help = 0, n_lines = 0, bad = 0;
        const char *line = strstr(r.out.data, "\noptions:\n");
        for (line = line ? line + 10 : ""; line[0] == ' ' && line[1] == ' '; line = strchr(line, '\n') + 1) {
            const char *p = line + 2;
            while (*p == ' ') p++;
            const char *end = strstr(p, "  "), *eol = strchr(p, '\n');
            if (!end || end > eol) end = eol;
            char names[128] = {0};
            memcpy(names, p, (size_t)(end - p) < sizeof names - 1 ? (size_t)(end - p) : sizeof names - 1);
            bool has_value = false, in_readme = false, is_help = false;
            char *opts[3];
            int n_opts = 0;
            for (char *tok = strtok(names, ", "); tok; tok = strtok(NULL, ", "))
                if (tok[0] == '-' && n_opts < 3) opts[n_opts++] = tok;
                else has_value = true;
            n_lines++;
            for (int k = 0; k < n_opts; k++) {
                in_readme |= has_option_word(block, block_len, opts[k]);
                if (!strcmp(opts[k], "-h") || !strcmp(opts[k], "--help")) {
                    is_help = true;
                    continue;
                }
                if (opts[k][1] == '-' && n_help < 64) snprintf(help_names[n_help++], 40, "%s", opts[k]);
                char *probe[] = {(char *)tokd, (char *)cmds[c], opts[k], has_value ? NULL : "--no-such-option", NULL};
                proc_result o;
                run(probe, &o);
                char want[96];
                if (has_value) snprintf(want, sizeof want, "tokd %s: option %s needs a value\n", cmds[c], opts[k]);
                else snprintf(want, sizeof want, "'--no-such-option'");
                bool ok = o.exited && o.code == 2 && (has_value ? !strcmp(o.err.data, want) : strstr(o.err.data, want) != NULL);
                if (!ok) bad++;
                CHECK(ok, "tokd %s %s%s: exit %d, stderr '%s'", cmds[c], opts[k], has_value ? "" : " --no-such-option", o.code, o.err.data);
                proc_free(&o);
            }
            CHECK(is_help || in_readme, "README's synopsis of tokd %s names the option %s", cmds[c], n_opts ? opts[0] : "?");
        }
        CHECK(n_lines >= 2 && bad == 0, "tokd %s --help: %d option lines, each an option the command parses (%d not)", cmds[c], n_lines, bad);
        char readme_names[64][40];
        int n_readme = long_options(block, block_len, readme_names, 0, 64);
        for (int k = 0; k < n_readme; k++)
            CHECK(in_list(help_names, n_help, readme_names[k]), "README's tokd %s %s is in its --help", cmds[c], readme_names[k]);
        proc_free(&r);
        proc_free(&rh);
    }
    free(readme);
}

/* Every truncation length and 1,000 seeded corruptions of the header, metadata and
 * tensor table of a ~1.6 KB model through `tokd info` and `tokd run`: a clean one-line
 * failure (or, for a corruption that leaves a valid file, a normal run) — never a crash,
 * a hang or a silent failure. test_model_badinput.c covers the same in-process for a
 * larger model. */
/* Under AddressSanitizer each process costs ~10x more (~100 ms, a third of it the leak
 * check at exit); there the CLI test samples every 16th length (every 64th through `run`)
 * and 150 corruptions (~45 s; twice as many took 80 s of CI), while
 * test_model_badinput.c still runs every length and 1,000 corruptions through the same
 * loader in-process, under the sanitizers. The plain build runs every length through
 * `info` and every 4th through `run` (no truncation loads, so `run` meets the same
 * checks as `info` there: ~1,200 fewer processes, ~20 s of ~70), and every corruption
 * through both. */
#if defined(__SANITIZE_ADDRESS__)
#define TRUNC_STRIDE 16
#define TRUNC_RUN_STRIDE 4 /* of the lengths tried, every 4th through `run` too */
#define CORRUPT_RUN_STRIDE 4
#define N_CORRUPT 150
#else
#define TRUNC_STRIDE 1
#define TRUNC_RUN_STRIDE 4
#define CORRUPT_RUN_STRIDE 1
#define N_CORRUPT 1000
#endif

static void test_bad_files(void) {
    uint64_t size;
    uint8_t *buf = tiny_model_build_minivocab(&size);
    char path[256];
    snprintf(path, sizeof path, "%s/tokd-cli-bad-%d.gguf", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (int)getpid());
    tiny_write_file(path, buf, size);
    char *info[] = {(char *)tokd, "info", "-m", path, NULL};
    char *runv[] = {(char *)tokd, "run", "-m", path, "-p", "hi", "-n", "2", NULL};
    proc_result a, b;
    run(info, &a);
    run(runv, &b);
    CHECK(a.code == 0 && b.code == 0, "the intact mini model works: info %d '%s', run %d '%s'", a.code, a.err.data, b.code, b.err.data);
    proc_free(&a);
    proc_free(&b);
    gguf_file *f = gguf_open_buffer(buf, size, NULL);
    uint64_t meta_end = f->data_offset, data_end = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        uint64_t end = f->data_offset + f->tensors[i].offset + f->tensors[i].nbytes;
        if (end > data_end) data_end = end;
    }
    gguf_close(f);
    int ok = 0, total = 0;
    for (uint64_t L = 0; L < data_end; L += TRUNC_STRIDE) {
        tiny_write_file(path, buf, L);
        run(info, &a);
        bool also_run = L % (TRUNC_RUN_STRIDE * TRUNC_STRIDE) == 0;
        if (also_run) run(runv, &b);
        int good = clean_failure(&a) && (!also_run || clean_failure(&b));
        if (!good && total - ok < 5)
            fprintf(stderr, "truncated to %llu: info %d '%s' run %d '%s'\n", (unsigned long long)L, a.code, a.err.data,
                    also_run ? b.code : 0, also_run ? b.err.data : "");
        ok += good;
        total++;
        proc_free(&a);
        if (also_run) proc_free(&b);
    }
    CHECK(ok == total && total * TRUNC_STRIDE > 1000, "truncations (%d lengths, stride %d): %d fail cleanly", total, TRUNC_STRIDE, ok);
    uint8_t *mut = malloc(size);
    uint64_t seed = 99;
    int clean = 0, ran = 0;
    ok = total = 0;
    for (int k = 0; k < N_CORRUPT; k++) {
        memcpy(mut, buf, size);
        int flips = 1 + k % 3;
        for (int j = 0; j < flips; j++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            mut[(seed >> 33) % meta_end] = (k % 5 == 0) ? 0xff : (uint8_t)(seed >> 56);
        }
        tiny_write_file(path, mut, size);
        run(info, &a);
        bool also_run = k % CORRUPT_RUN_STRIDE == 0;
        if (also_run) run(runv, &b);
        int ca = clean_failure(&a), cb = also_run ? clean_failure(&b) : ca;
        int good = (ca || (a.exited && a.code == 0)) && (!also_run || cb || (b.exited && b.code == 0));
        if (!good && total - ok < 5)
            fprintf(stderr, "corruption %d: info %d '%s' run %d '%s'\n", k, a.code, a.err.data, also_run ? b.code : 0,
                    also_run ? b.err.data : "");
        ok += good;
        clean += ca;
        ran += a.code == 0;
        total++;
        proc_free(&a);
        if (also_run) proc_free(&b);
    }
    printf("%d corruptions through the CLI: %d rejected cleanly, %d still valid and ran\n", N_CORRUPT, clean, ran);
    CHECK(ok == total, "corrupted files: %d of %d fail cleanly or run", ok, total);
    CHECK(clean > N_CORRUPT / 2, "most corruptions are detected (%d)", clean);
    /* wrong magic, wrong version, absurd dimensions */
    memcpy(mut, buf, size);
    memcpy(mut, "GGML", 4);
    tiny_write_file(path, mut, size);
    proc_result r;
    run(info, &r);
    CHECK(clean_failure(&r) && strstr(r.err.data, "magic"), "wrong magic: %s", r.err.data);
    proc_free(&r);
    memcpy(mut, buf, size);
    mut[4] = 7;
    tiny_write_file(path, mut, size);
    run(runv, &r);
    CHECK(clean_failure(&r) && strstr(r.err.data, "version"), "wrong version: %s", r.err.data);
    proc_free(&r);
    free(mut);
    free(buf);
    unlink(path);
}

/* `tokd imatrix`: a matrix of stories260K over a short text written as GGUF (its
 * chunks, tokens and dataset read back), converted to the legacy file and back, two
 * files combined, and the messages of the cases a user gets wrong. */
static void test_imatrix(void) {
    char dir[] = "/tmp/tokd-cli-imatrixXXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char text[600], a[600], b[600], c[600], d[600], e[600], g[600];
    snprintf(text, sizeof text, "%s/calib.txt", dir);
    snprintf(a, sizeof a, "%s/a.gguf", dir);
    snprintf(b, sizeof b, "%s/b.imatrix", dir);
    snprintf(c, sizeof c, "%s/c.dat", dir);
    snprintf(d, sizeof d, "%s/d.gguf", dir);
    snprintf(e, sizeof e, "%s/e.gguf", dir);
    snprintf(g, sizeof g, "%s/g.gguf", dir);
    FILE *f = fopen(text, "w");
    for (int i = 0; f && i < 20; i++)
        fputs("Once upon a time there was a little girl named Lily. She loved to play outside with her dog. ", f);
    if (f) fclose(f);
    proc_result r;
    tokd_err err;
    char *compute[] = {(char *)tokd, "imatrix", "-m", model, "-f", text, "-o", a, "-c", "64", "--chunks", "3", NULL};
    run(compute, &r);
    CHECK(r.code == 0 && strstr(r.err.data, "192 tokens in 3 chunks") && strstr(r.err.data, "(GGUF, 35 entries, 3 chunks)") &&
              !strstr(r.err.data, "without .gguf") && strstr(r.err.data, "chunk 3 of 3, PPL ") &&
              strstr(r.err.data, "tokd imatrix: PPL ") && strstr(r.err.data, " over 93 positions"),
          "imatrix computed, with its perplexity: %d %s", r.code, r.err.data);
    proc_free(&r);
    char *no_ppl[] = {(char *)tokd, "imatrix", "-m", model, "-f", text, "-o", g, "-c", "64", "--chunks", "3", "--no-ppl",
                      "--save-frequency", "2", NULL};
    run(no_ppl, &r);
    size_t la = 0, lg = 0;
    char *ba = tokd_read_file(a, &la), *bg = tokd_read_file(g, &lg), at2[640];
    CHECK(r.code == 0 && !strstr(r.err.data, "PPL") && ba && bg && la == lg && !memcmp(ba, bg, la),
          "--no-ppl: no perplexity, the same file: %s", r.err.data);
    free(ba);
    free(bg);
    snprintf(at2, sizeof at2, "%s.at_2", g);
    tokd_imatrix *m2 = tokd_imatrix_load(at2, &err);
    CHECK(strstr(r.err.data, "saved ") && m2 && m2->chunks == 2 && m2->entries[0].counts[0] == 128,
          "--save-frequency 2: the matrix after 2 chunks in %s", at2);
    tokd_imatrix_free(m2);
    unlink(at2);
    proc_free(&r);
    /* --chunk 1 --chunks 2: the text's chunks 2 and 3, so their sums are all three's less
       the first's (a 1-chunk run), to the float rounding of the files */
    char one[600], skip[600];
    snprintf(one, sizeof one, "%s/one.gguf", dir);
    snprintf(skip, sizeof skip, "%s/skip.gguf", dir);
    char *first[] = {(char *)tokd, "imatrix", "-m", model, "-f", text, "-o", one, "-c", "64", "--chunks", "1", "--no-ppl", NULL};
    char *later[] = {(char *)tokd, "imatrix", "-m", model, "-f", text, "-o", skip, "-c", "64", "--chunk", "1", "--chunks", "2",
                     "--no-ppl", NULL};
    proc_result r1;
    run(first, &r1);
    run(later, &r);
    tokd_imatrix *m1 = tokd_imatrix_load(one, &err), *ms = tokd_imatrix_load(skip, &err), *m3 = tokd_imatrix_load(a, &err);
    bool adds = m1 && ms && m3 && ms->chunks == 2 && ms->entries[0].counts[0] == 128;
    double worst = 0;
    for (size_t i = 0; adds && i < m3->n_entries; i++)
        for (int64_t j = 0; j < m3->entries[i].n; j++) {
            const double all3 = m3->entries[i].sums[j], sum = m1->entries[i].sums[j] + ms->entries[i].sums[j];
            worst = fmax(worst, fabs(all3 - sum) / fmax(all3, 1e-30));
        }
    CHECK(r.code == 0 && r1.code == 0 && adds && worst < 1e-6, "--chunk 1: chunks 2-3 (sums within %.2g): %s", worst, r.err.data);
    char *too_far[] = {(char *)tokd, "imatrix", "-m", model, "-f", text, "-o", e, "-c", "64", "--chunk", "99", NULL};
    proc_free(&r);
    run(too_far, &r);
    CHECK(clean_failure(&r) && strstr(r.err.data, "99 chunks of 64 skipped") && access(e, F_OK) != 0, "--chunk past the text: %s",
          r.err.data);
    tokd_imatrix_free(m1);
    tokd_imatrix_free(ms);
    tokd_imatrix_free(m3);
    proc_free(&r);
    proc_free(&r1);
    unlink(one);
    unlink(skip);
    /* --parse-special: "<s>" written in the text is one token, not three pieces */
    char specials[600];
    snprintf(specials, sizeof specials, "%s/specials.txt", dir);
    f = fopen(specials, "w");
    for (int i = 0; f && i < 300; i++) fputs("<s>", f);
    if (f) fclose(f);
    char *plain_sp[] = {(char *)tokd, "imatrix", "-m", model, "-f", specials, "-o", e, "-c", "64", "--no-ppl", NULL};
    char *parse_sp[] = {(char *)tokd, "imatrix", "-m", model, "-f", specials, "-o", e, "-c", "64", "--no-ppl", "--parse-special", NULL};
    proc_result rp;
    run(plain_sp, &r);
    run(parse_sp, &rp);
    CHECK(r.code == 0 && rp.code == 0 && strstr(rp.err.data, "256 tokens in 4 chunks") && !strstr(r.err.data, "in 4 chunks"),
          "--parse-special: '%s' against '%s'", rp.err.data, r.err.data);
    proc_free(&r);
    proc_free(&rp);
    unlink(e);
    unlink(specials);
    tokd_imatrix *ma = tokd_imatrix_load(a, &err);
    CHECK(ma && !ma->counts_are_calls && ma->n_entries == 35 && ma->chunks == 3 && ma->chunk_size == 64 && !strcmp(ma->dataset, text) &&
              ma->entries[0].counts[0] == 192,
          "the GGUF file: %s", ma ? ma->dataset : err.msg);
    char *to_dat[] = {(char *)tokd, "imatrix", "--in-file", a, "-o", b, "--output-format", "dat", "-c", "64", NULL};
    run(to_dat, &r);
    CHECK(r.code == 0 && !strstr(r.err.data, "without .gguf") && strstr(r.err.data, "legacy format"), "to dat: %s", r.err.data);
    proc_free(&r);
    tokd_imatrix *mb = tokd_imatrix_load(b, &err);
    double dev = 0;
    bool same = ma && mb && mb->counts_are_calls && mb->n_entries == ma->n_entries && mb->chunks == 3;
    for (size_t i = 0; same && i < ma->n_entries; i++) {
        same = !strcmp(ma->entries[i].name, mb->entries[i].name) && mb->entries[i].counts[0] == 3; /* ncall: 192 / 64 */
        for (int64_t j = 0; same && j < ma->entries[i].n; j++)
            dev = fmax(dev, fabs((double)ma->entries[i].values[j] - mb->entries[i].values[j]) / fabs((double)ma->entries[i].values[j]));
    }
    CHECK(same && dev < 3e-7, "the legacy file: same entries, ncall 3, values within %.2g", dev);
    char *named[] = {(char *)tokd, "imatrix", "--in-file", b, "-o", c, NULL};
    run(named, &r);
    size_t len = 0;
    char *bytes = tokd_read_file(c, &len);
    tokd_imatrix *mc = tokd_imatrix_load(c, &err);
    CHECK(r.code == 0 && strstr(r.err.data, "writing GGUF to a name without .gguf") && bytes && len > 4 &&
              !memcmp(bytes, "GGUF", 4) && mc && mc->chunk_size == 512 && mc->entries[0].counts[0] == 3 * 512,
          "GGUF by default, with a warning for the name; a legacy file's 3 calls taken as chunks of 512: %s", r.err.data);
    free(bytes);
    tokd_imatrix_free(mc);
    proc_free(&r);
    char *keep[] = {(char *)tokd, "imatrix", "--in-file", a, "-o", g, NULL};
    run(keep, &r);
    tokd_imatrix *mg = tokd_imatrix_load(g, &err);
    CHECK(r.code == 0 && mg && mg->chunk_size == 64 && mg->chunks == 3 && mg->entries[0].counts[0] == 192,
          "a GGUF file converted keeps its chunk size: %s", r.err.data);
    tokd_imatrix_free(mg);
    proc_free(&r);
    char *stats[] = {(char *)tokd, "imatrix", "--show-statistics", "--in-file", a, NULL};
    run(stats, &r);
    int rows = 0;
    for (const char *l = r.out.data; l && (l = strstr(l, "\tattn_q ")); l++) rows++;
    CHECK(r.code == 0 && strstr(r.out.data, "(35 tensors)") && strstr(r.out.data, "Computing layer statistics (5 layers)") && rows == 5,
          "--show-statistics: %d attn_q rows in\n%s%s", rows, r.out.data, r.err.data);
    proc_free(&r);
    char *stats_what[] = {(char *)tokd, "imatrix", "--show-statistics", "-m", model, "--in-file", a, NULL};
    run(stats_what, &r);
    CHECK(r.code == 2 && strstr(r.err.data, "--show-statistics takes one --in-file"), "--show-statistics with a model: %s", r.err.data);
    proc_free(&r);
    char *stats_none[] = {(char *)tokd, "imatrix", "--show-statistics", "--in-file", text, NULL};
    run(stats_none, &r);
    CHECK(clean_failure(&r), "--show-statistics of a text file: %s", r.err.data);
    proc_free(&r);
    char *both[] = {(char *)tokd, "imatrix", "--in-file", a, "--in-file", b, "-c", "64", "-o", d, NULL};
    run(both, &r);
    tokd_imatrix *md = tokd_imatrix_load(d, &err);
    CHECK(r.code == 0 && md && md->chunks == 6 && md->n_entries == 35 && md->entries[0].counts[0] == 384 && md->n_datasets == 2,
          "two files combined: %s", r.err.data);
    proc_free(&r);
    /* an input entry of another size than the model's matrix of its name is refused before
       the run; an entry the model has no matrix for is carried over */
    tokd_imatrix *other = tokd_imatrix_new(), *extra = tokd_imatrix_new();
    const double sums7[7] = {1, 2, 3, 4, 5, 6, 7}, count1 = 64;
    tokd_imatrix_add(other, "blk.0.attn_q.weight", sums7, 7, &count1, 1);
    tokd_imatrix_add(extra, "blk.99.ffn_up.weight", sums7, 7, &count1, 1);
    CHECK(tokd_imatrix_write(other, c, TOKD_IMATRIX_GGUF, 64, &err) == 0 && tokd_imatrix_write(extra, g, TOKD_IMATRIX_GGUF, 64, &err) == 0,
          "writing the crafted inputs: %s", err.msg);
    char *misfit[] = {(char *)tokd, "imatrix", "-m", model, "-f", text, "--in-file", c, "-c", "64", "-o", e, NULL};
    run(misfit, &r);
    CHECK(clean_failure(&r) && strstr(r.err.data, "blk.0.attn_q.weight holds 7 values") && strstr(r.err.data, "takes 64") &&
              !strstr(r.err.data, "tokens in") && access(e, F_OK) != 0,
          "an input matrix of another model, refused before the run: %s", r.err.data);
    proc_free(&r);
    char *carried[] = {(char *)tokd, "imatrix", "-m", model, "-f", text, "--in-file", g, "-c", "64", "--chunks", "1", "--no-ppl", "-o", e, NULL};
    run(carried, &r);
    tokd_imatrix *me = tokd_imatrix_load(e, &err);
    CHECK(r.code == 0 && me && me->n_entries == 36 && tokd_imatrix_find(me, "blk.99.ffn_up.weight"),
          "an input entry the model has no matrix for is carried over: %s", r.err.data);
    tokd_imatrix_free(me);
    tokd_imatrix_free(other);
    tokd_imatrix_free(extra);
    proc_free(&r);
    unlink(e);
    char *missing[] = {(char *)tokd, "imatrix", "--in-file", "/nonexistent.imatrix", "-o", e, NULL};
    run(missing, &r);
    CHECK(clean_failure(&r) && strstr(r.err.data, "/nonexistent.imatrix") && access(e, F_OK) != 0, "a missing input: %s",
          r.err.data);
    proc_free(&r);
    char *text_as_matrix[] = {(char *)tokd, "imatrix", "--in-file", text, "-o", e, NULL};
    run(text_as_matrix, &r);
    CHECK(clean_failure(&r) && access(e, F_OK) != 0, "a text file as a matrix: %s", r.err.data);
    proc_free(&r);
    tokd_imatrix_free(ma);
    tokd_imatrix_free(mb);
    tokd_imatrix_free(md);
    const char *files[] = {text, a, b, c, d, g};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) unlink(files[i]);
    CHECK(rmdir(dir) == 0, "nothing else left in %s", dir);
}

int main(void) {
    tokd = getenv("TOKD");
    CHECK(tokd != NULL, "TOKD names the binary (make test sets it)");
    if (!tokd) T_DONE();
    snprintf(model, sizeof model, "%s/models/stories260K.gguf", t_shared());
    test_run_golden();
    test_logits();
    test_info();
    test_no_http_lib_outside_serve();
    test_bad_options();
    test_option_parsing();
    test_help();
    test_prompt_file();
    test_interrupt();
    test_outputs();
    test_perplexity();
    test_imatrix();
    test_bad_files();
    T_DONE();
}
