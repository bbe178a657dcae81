/* cmd_bench_serve.c — `tokd bench-serve`: a load generator for `tokd serve` (or any
 * OpenAI-compatible server). N concurrent clients each send streaming /v1/completions
 * requests with fixed prompts, a fixed output length (ignore_eos) and fixed sampling,
 * optionally sharing a prefix; it reports requests/s, output tokens/s, and time to first
 * token and inter-token latency percentiles. Keep model, prompts, output length,
 * sampling and concurrency fixed when comparing runs. --seed S picks another set of
 * prompts (same lengths), so that repeated runs do not hit the prefix cache. */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli.h"
#include "util.h"

typedef struct {
    const char *host, *api_key;
    int port, conc, n_req, max_tokens, prompt_words, shared_words;
    uint64_t seed; /* varies the prompts between runs (a cold prefix cache each time) */
    double temp;
    atomic_int next;
    pthread_mutex_t mu;
    double *ttft, *itl, *e2e;
    int n_ttft, n_itl, cap_itl, n_e2e, n_fail;
    long out_tokens;
} bench;

static const char *words[] = {"Lily", "Tom", "park", "dog", "ball", "tree", "happy", "big", "red", "sun", "cat", "play",
                              "mom", "cake", "bird", "went", "saw", "little", "friend", "home"};

static void make_prompt(bench *b, int i, tokd_buf *out) {
    tokd_buf_append(out, "", 0);
    for (int w = 0; w < b->shared_words; w++) tokd_buf_appendf(out, "%s ", words[(w * 7) % 20]);
    uint64_t x = ((uint64_t)i + b->seed * 0x100000001b3ULL) * 0x9e3779b97f4a7c15ULL + 1;
    for (int w = 0; w < b->prompt_words; w++) {
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccdULL;
        tokd_buf_appendf(out, "%s ", words[x % 20]);
    }
}

static int one_request(bench *b, int i) {
    tokd_buf prompt = {0}, req = {0}, body = {0};
    make_prompt(b, i, &prompt);
    tokd_buf_appendf(&body,
                     "{\"prompt\":\"%s\",\"max_tokens\":%d,\"temperature\":%g,\"seed\":%d,\"ignore_eos\":true,\"stream\":true,"
                     "\"stream_options\":{\"include_usage\":true}}",
                     prompt.data, b->max_tokens, b->temp, i);
    tokd_buf_appendf(&req, "POST /v1/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nConnection: close\r\n",
                     b->host);
    if (b->api_key) tokd_buf_appendf(&req, "Authorization: Bearer %s\r\n", b->api_key);
    tokd_buf_appendf(&req, "Content-Length: %zu\r\n\r\n%s", body.len, body.data);
    int fd = socket(AF_INET, SOCK_STREAM, 0), rc = -1;
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)b->port);
    inet_pton(AF_INET, b->host, &a.sin_addr);
    double t0 = tokd_now(), t_prev = 0, first = -1;
    double itl_local[4096];
    int n_itl = 0, tokens = 0;
    if (fd >= 0 && !connect(fd, (struct sockaddr *)&a, sizeof a) && write(fd, req.data, req.len) == (ssize_t)req.len) {
        char buf[16384];
        tokd_buf acc = {0};
        ssize_t n;
        size_t scan = 0;
        while ((n = read(fd, buf, sizeof buf)) > 0) {
            double now = tokd_now();
            tokd_buf_append(&acc, buf, (size_t)n);
            char *p;
            while ((p = strstr(acc.data + scan, "\n\n"))) {
                char *ev = strstr(acc.data + scan, "data: ");
                if (ev && ev < p) {
                    if (strstr(ev, "\"text\":\"") && !strstr(ev, "\"text\":\"\"")) {
                        if (first < 0) first = now - t0;
                        else if (n_itl < 4096) itl_local[n_itl++] = now - t_prev;
                        t_prev = now;
                    }
                    char *u = strstr(ev, "\"completion_tokens\":");
                    if (u && u < p) tokens = atoi(u + 20);
                    if (!strncmp(ev, "data: [DONE]", 12)) rc = 0;
                }
                scan = (size_t)(p + 2 - acc.data);
            }
        }
        tokd_buf_free(&acc);
    }
    if (fd >= 0) close(fd);
    double e2e = tokd_now() - t0;
    pthread_mutex_lock(&b->mu);
    if (rc == 0 && first >= 0) {
        b->ttft[b->n_ttft++] = first;
        b->e2e[b->n_e2e++] = e2e;
        b->out_tokens += tokens;
        for (int k = 0; k < n_itl; k++) {
            if (b->n_itl == b->cap_itl) b->itl = tokd_xrealloc(b->itl, (size_t)(b->cap_itl = b->cap_itl * 2 + 1024) * sizeof(double));
            b->itl[b->n_itl++] = itl_local[k];
        }
    } else {
        b->n_fail++;
    }
    pthread_mutex_unlock(&b->mu);
    tokd_buf_free(&prompt);
    tokd_buf_free(&req);
    tokd_buf_free(&body);
    return rc;
}

static void *client(void *arg) {
    bench *b = arg;
    for (int i; (i = atomic_fetch_add(&b->next, 1)) < b->n_req;) one_request(b, i);
    return NULL;
}

static int cmpd(const void *x, const void *y) {
    double a = *(const double *)x, c = *(const double *)y;
    return a < c ? -1 : a > c;
}
static double pct(double *v, int n, double q) {
    if (n <= 0) return 0;
    int i = (int)ceil(q * n) - 1;
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

int cmd_bench_serve(int argc, char **argv) {
    bench b;
    memset(&b, 0, sizeof b);
    b.host = "127.0.0.1";
    b.port = 8080;
    b.conc = 16;
    b.n_req = 64;
    b.max_tokens = 64;
    b.prompt_words = 32;
    const cli_option opts[] = {
        CLI_STR("--host", NULL, &b.host, "ADDR", "the server's address (default 127.0.0.1)"),
        CLI_INT("--port", NULL, &b.port, 1, 65535, "PORT", "the server's port (default 8080)"),
        CLI_INT("-c", "--concurrency", &b.conc, 1, 4096, "N", "clients streaming at once (default 16)"),
        CLI_INT("-n", "--requests", &b.n_req, 1, 1 << 20, "N", "requests in all (default 64)"),
        CLI_INT("--max-tokens", NULL, &b.max_tokens, 1, 1 << 20, "N", "output tokens of each request (default 64)"),
        CLI_INT("--prompt-words", NULL, &b.prompt_words, 1, 1 << 20, "N", "words of each prompt after the shared prefix (default 32)"),
        CLI_INT("--shared-prefix-words", NULL, &b.shared_words, 0, 1 << 20, "N", "words every prompt starts with (default 0)"),
        CLI_INT("--seed", NULL, &b.seed, 0, 1 << 30, "S", "the prompts' seed: a new one gives prompts the server has not cached"),
        CLI_NUM("--temp", NULL, &b.temp, 0, 2, "T", "sampling temperature of the requests (default 0)"),
        CLI_STR("--api-key", NULL, &b.api_key, "KEY", "the server's API key"),
        CLI_END,
    };
    int parsed = cli_parse("bench-serve", argc, argv, opts);
    if (parsed) return cli_exit_code(parsed);
    pthread_mutex_init(&b.mu, NULL);
    b.ttft = tokd_xcalloc((size_t)b.n_req, sizeof(double));
    b.e2e = tokd_xcalloc((size_t)b.n_req, sizeof(double));
    atomic_init(&b.next, 0);
    pthread_t *th = tokd_xcalloc((size_t)b.conc, sizeof *th);
    double t0 = tokd_now();
    for (int i = 0; i < b.conc; i++) pthread_create(&th[i], NULL, client, &b);
    for (int i = 0; i < b.conc; i++) pthread_join(th[i], NULL);
    double wall = tokd_now() - t0;
    qsort(b.ttft, (size_t)b.n_ttft, sizeof(double), cmpd);
    if (b.itl) qsort(b.itl, (size_t)b.n_itl, sizeof(double), cmpd); /* NULL when no request streamed two tokens */
    qsort(b.e2e, (size_t)b.n_e2e, sizeof(double), cmpd);
    printf("bench-serve: %d clients, %d requests (%d failed), prompt %d+%d words, %d output tokens, temp %g\n", b.conc, b.n_req,
           b.n_fail, b.shared_words, b.prompt_words, b.max_tokens, b.temp);
    printf("wall %.2f s: %.2f requests/s, %.1f output tokens/s\n", wall, b.n_e2e / wall, b.out_tokens / wall);
    printf("TTFT ms: p50 %.1f p90 %.1f p99 %.1f\n", pct(b.ttft, b.n_ttft, .5) * 1e3, pct(b.ttft, b.n_ttft, .9) * 1e3,
           pct(b.ttft, b.n_ttft, .99) * 1e3);
    printf("ITL  ms: p50 %.2f p90 %.2f p99 %.2f\n", pct(b.itl, b.n_itl, .5) * 1e3, pct(b.itl, b.n_itl, .9) * 1e3,
           pct(b.itl, b.n_itl, .99) * 1e3);
    printf("E2E  ms: p50 %.1f p90 %.1f p99 %.1f\n", pct(b.e2e, b.n_e2e, .5) * 1e3, pct(b.e2e, b.n_e2e, .9) * 1e3,
           pct(b.e2e, b.n_e2e, .99) * 1e3);
    free(th);
    free(b.ttft);
    free(b.itl);
    free(b.e2e);
    pthread_mutex_destroy(&b.mu);
    return b.n_fail ? 1 : 0;
}
