/* server.c — see server.h.
 *
 * A request becomes a `job`: one engine request per choice (prompts x n). Engine events
 * arrive on the scheduler thread and are only copied into the job's event list under its
 * lock; all JSON is built on the connection's own thread, which pops the events and
 * either writes SSE chunks (streaming) or accumulates the final response. A job is
 * reference counted: one reference for the connection, one per engine request still
 * running, so neither side can free it under the other. */
#include "server/server.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "chat/chat_render.h"
#include "chat/reasoning.h"
#include "chat/toolcall.h"
#include "grammar.h"
#include "server/http_lib.h"
#include "server/request.h"
#include "unicode_utf8.h"

void tokd_server_params_default(tokd_server_params *p) {
    memset(p, 0, sizeof *p);
    p->host = "127.0.0.1";
    p->port = 8080;
    p->model_id = "tokd";
    p->timeout_s = 30;
    p->max_body = 8u << 20;
    p->shutdown_grace_s = 30;
    p->max_connections = 512;
    p->max_choices = 16;
}

/* libmicrohttpd's functions: set by tokd_server_run before the daemon starts, so before
 * any connection thread reads it (http_lib.h says why it is not linked). */
static const tokd_http_lib *mhd;

enum { C_200, C_400, C_401, C_404, C_405, C_408, C_413, C_429, C_500, C_503, C_OTHER, N_CODES };
static const int code_of[N_CODES] = {200, 400, 401, 404, 405, 408, 413, 429, 500, 503, 0};

typedef struct {
    tokd_engine *e;
    const tokd_model *m;
    tokd_server_params p;
    struct MHD_Daemon *d;
    atomic_int draining;
    atomic_int n_jobs;
    atomic_ullong codes[N_CODES];
    atomic_ullong n_disconnects;
    atomic_ullong next_job;
    atomic_ullong next_calls; /* tool-call id seeds: a counter mixed with call_salt */
    uint64_t call_salt;       /* random per process */
    atomic_int stopping;      /* the daemon is closing the connections itself */
    /* chat: the model's template (or ChatML) and the output formats it implies */
    tokd_chat_template *tpl;
    tokd_toolcall_format tool_fmt;
    tokd_reasoning_format reason_fmt;
} server;

/* ---- per-connection state -------------------------------------------------------------- */

typedef struct {
    tokd_buf body;
    double t_start;
    bool too_big, responded;
} conn_state;

/* ---- jobs ------------------------------------------------------------------------------ */

typedef struct ev_rec {
    struct ev_rec *next;
    int choice;
    tokd_event_kind kind;
    char *text;
    size_t len;
    int32_t token;
    size_t text_pos; /* where the token's text starts in the choice's output */
    bool has_lp;
    float logprob;
    int n_top;
    tokd_token_logprob top[TOKD_SAMPLER_MAX_LOGPROBS];
    tokd_req_status status;
    tokd_finish finish;
    tokd_usage usage;
    char *error;
    bool bad_request; /* the error is the request's own: a 400 */
} ev_rec;

typedef struct job job;
typedef struct {
    job *j;
    int choice;
} choice_ud;

struct job {
    server *s;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    int n_choices, n_done, n, n_prompts;
    uint64_t *ids;
    bool *submitted;
    choice_ud *uds;
    ev_rec *head, *tail;
    bool chat, stream, include_usage;
    bool single_call; /* parallel_tool_calls false */
    int n_lp;        /* alternatives per token; -1: no logprobs */
    char id[48];
    long created;
    struct MHD_Connection *conn;
    /* connection side */
    double next_check;       /* when to look again whether the client hung up (tokd_now) */
    bool disconnected;       /* it did: counted once in tokd_client_disconnects_total */
    bool ended;              /* streaming: the end of the stream was handed to the server */
    tokd_buf out;
    size_t out_off;
    bool finished, role_sent_all;
    bool *role_sent;
    tokd_buf *texts;
    const char **finish;
    tokd_usage *usage;
    cJSON **lps; /* per choice: chat content array / completions logprobs object */
    char error[512];
    bool any_error, error_is_request; /* error_is_request: the request's own fault (400) */
    /* chat output parsing, per choice (NULL when off) and the request's grammar */
    tokd_grammar *grammar;
    tokd_reasoning_parser **rp;
    tokd_toolcall_parser **tp;
    tokd_buf *reasoning;
};

static void job_release(job *j) {
    pthread_mutex_lock(&j->mu);
    int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left) return;
    for (ev_rec *r = j->head, *n; r; r = n) {
        n = r->next;
        free(r->text);
        free(r->error);
        free(r);
    }
    for (int i = 0; i < j->n_choices; i++) {
        tokd_buf_free(&j->texts[i]);
        tokd_buf_free(&j->reasoning[i]);
        cJSON_Delete(j->lps[i]);
        tokd_reasoning_parser_free(j->rp[i]);
        tokd_toolcall_parser_free(j->tp[i]);
    }
    free(j->rp);
    free(j->tp);
    free(j->reasoning);
    tokd_grammar_free(j->grammar);
    atomic_fetch_sub(&j->s->n_jobs, 1);
    tokd_buf_free(&j->out);
    free(j->ids);
    free(j->submitted);
    free(j->uds);
    free(j->role_sent);
    free(j->texts);
    free(j->finish);
    free(j->usage);
    free(j->lps);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

static job *job_new(server *s, int n_choices, bool chat) {
    job *j = tokd_xcalloc(1, sizeof *j);
    j->s = s;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->refs = 1;
    j->n_choices = n_choices;
    j->chat = chat;
    j->n_lp = -1;
    j->ids = tokd_xcalloc((size_t)n_choices, sizeof *j->ids);
    j->submitted = tokd_xcalloc((size_t)n_choices, sizeof *j->submitted);
    j->uds = tokd_xcalloc((size_t)n_choices, sizeof *j->uds);
    j->role_sent = tokd_xcalloc((size_t)n_choices, sizeof *j->role_sent);
    j->texts = tokd_xcalloc((size_t)n_choices, sizeof *j->texts);
    j->finish = tokd_xcalloc((size_t)n_choices, sizeof *j->finish);
    j->usage = tokd_xcalloc((size_t)n_choices, sizeof *j->usage);
    j->lps = tokd_xcalloc((size_t)n_choices, sizeof *j->lps);
    j->rp = tokd_xcalloc((size_t)n_choices, sizeof *j->rp);
    j->tp = tokd_xcalloc((size_t)n_choices, sizeof *j->tp);
    j->reasoning = tokd_xcalloc((size_t)n_choices, sizeof *j->reasoning);
    j->created = (long)time(NULL);
    unsigned long long n = atomic_fetch_add(&s->next_job, 1);
    snprintf(j->id, sizeof j->id, "%s-%llx%08llx", chat ? "chatcmpl" : "cmpl", (unsigned long long)j->created, n);
    atomic_fetch_add(&s->n_jobs, 1);
    return j;
}

/* Engine callback (scheduler thread): copy the event, wake the connection. */
static void on_event(void *ud, const tokd_event *ev) {
    choice_ud *cu = ud;
    job *j = cu->j;
    ev_rec *r = tokd_xcalloc(1, sizeof *r);
    r->choice = cu->choice;
    r->kind = ev->kind;
    if (ev->len) {
        r->text = tokd_xmalloc(ev->len);
        memcpy(r->text, ev->text, ev->len);
        r->len = ev->len;
    }
    r->token = ev->token;
    r->text_pos = ev->text_pos;
    if (ev->kind == TOKD_EV_TOKEN && ev->sample) {
        r->has_lp = true;
        r->logprob = ev->sample->logprob;
        r->n_top = ev->sample->n_top;
        memcpy(r->top, ev->sample->top, sizeof r->top);
    }
    if (ev->kind == TOKD_EV_DONE) {
        r->status = ev->status;
        r->finish = ev->finish;
        r->usage = *ev->usage;
        if (ev->error) r->error = tokd_xstrdup(ev->error);
        r->bad_request = ev->bad_request;
    }
    pthread_mutex_lock(&j->mu);
    if (j->tail) j->tail->next = r;
    else j->head = r;
    j->tail = r;
    if (ev->kind == TOKD_EV_DONE) j->n_done++;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (ev->kind == TOKD_EV_DONE) job_release(j);
}

static void job_cancel(job *j) {
    for (int i = 0; i < j->n_choices; i++)
        if (j->submitted[i]) tokd_engine_cancel(j->s->e, j->ids[i]);
}

/* The client hung up: cancel its engine requests, and count it (once). */
static void job_disconnected(job *j) {
    job_cancel(j);
    if (!j->disconnected) atomic_fetch_add(&j->s->n_disconnects, 1);
    j->disconnected = true;
}

static bool client_gone(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = mhd->get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    char b;
    ssize_t r = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r == 0) return true;
    return r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

/* ---- JSON helpers ------------------------------------------------------------------------ */

/* Valid UTF-8 for JSON: invalid bytes and NUL become U+FFFD. */
static char *utf8_safe(const char *s, size_t n) {
    tokd_buf b = {0};
    tokd_buf_append(&b, "", 0);
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int l = tokd_utf8_decode((const uint8_t *)s + i, n - i, &cp);
        if (l > 0 && cp != 0) {
            tokd_buf_append(&b, s + i, (size_t)l);
            i += (size_t)l;
        } else {
            tokd_buf_append(&b, "\xEF\xBF\xBD", 3);
            i++;
        }
    }
    if (!b.data) return tokd_xstrdup("");
    return b.data;
}

static cJSON *json_str(const char *s, size_t n) {
    char *t = utf8_safe(s, n);
    cJSON *o = cJSON_CreateString(t);
    free(t);
    return o;
}

static void add_str_n(cJSON *o, const char *k, const char *s, size_t n) { cJSON_AddItemToObject(o, k, json_str(s, n)); }

static char *token_text(const tokd_model *m, int32_t tok, size_t *n) {
    char buf[256];
    size_t len = tokd_token_piece(m->tok, tok, false, buf, sizeof buf);
    if (len > sizeof buf) len = sizeof buf;
    *n = len;
    char *r = tokd_xmalloc(len + 1);
    memcpy(r, buf, len);
    r[len] = 0;
    return r;
}

static cJSON *bytes_array(const char *s, size_t n) {
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((unsigned char)s[i]));
    return a;
}

static double finite_lp(float lp) { return isfinite(lp) ? lp : -9999.0; }

/* ---- responses --------------------------------------------------------------------------- */

static enum MHD_Result send_text(server *s, struct MHD_Connection *c, int status, const char *ctype, const char *body,
                                 size_t len, const char *retry_after) {
    struct MHD_Response *r = mhd->create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    mhd->add_response_header(r, "Content-Type", ctype);
    if (retry_after) mhd->add_response_header(r, "Retry-After", retry_after);
    enum MHD_Result rc = mhd->queue_response(c, (unsigned)status, r);
    mhd->destroy_response(r);
    int k = C_OTHER;
    for (int i = 0; i < N_CODES - 1; i++)
        if (code_of[i] == status) k = i;
    atomic_fetch_add(&s->codes[k], 1);
    return rc;
}

static enum MHD_Result send_json(server *s, struct MHD_Connection *c, int status, cJSON *o) {
    char *t = cJSON_PrintUnformatted(o);
    enum MHD_Result rc = send_text(s, c, status, "application/json", t ? t : "{}", t ? strlen(t) : 2, NULL);
    free(t);
    cJSON_Delete(o);
    return rc;
}

static cJSON *error_obj(const char *msg, const char *type, const char *param, const char *code) {
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    add_str_n(e, "message", msg, strlen(msg));
    cJSON_AddStringToObject(e, "type", type);
    if (param) cJSON_AddStringToObject(e, "param", param);
    else cJSON_AddNullToObject(e, "param");
    if (code) cJSON_AddStringToObject(e, "code", code);
    else cJSON_AddNullToObject(e, "code");
    return o;
}

static enum MHD_Result send_error(server *s, struct MHD_Connection *c, int status, const char *msg, const char *param,
                                  const char *code) {
    const char *type = status == 401   ? "authentication_error"
                       : status == 404 ? "not_found_error"
                       : status == 429 ? "rate_limit_error"
                       : status >= 500 ? "server_error"
                                       : "invalid_request_error";
    cJSON *o = error_obj(msg, type, param, code);
    char *t = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    const char *retry = (status == 429 || status == 503) ? "1" : NULL;
    enum MHD_Result rc = send_text(s, c, status, "application/json", t, strlen(t), retry);
    free(t);
    return rc;
}

/* ---- formatting events ------------------------------------------------------------------- */

static const char *finish_openai(tokd_finish f) {
    return (f == TOKD_FINISH_EOG || f == TOKD_FINISH_STOP) ? "stop" : "length";
}

/* Logprob entry for one token: chat "content" element, or appended to the completions arrays. */
static void lp_add(job *j, int choice, const ev_rec *r) {
    const tokd_model *m = j->s->m;
    size_t n;
    char *t = token_text(m, r->token, &n);
    if (j->chat) {
        if (!j->lps[choice]) j->lps[choice] = cJSON_CreateArray();
        cJSON *e = cJSON_CreateObject();
        add_str_n(e, "token", t, n);
        cJSON_AddNumberToObject(e, "logprob", finite_lp(r->logprob));
        cJSON_AddItemToObject(e, "bytes", bytes_array(t, n));
        cJSON *top = cJSON_AddArrayToObject(e, "top_logprobs");
        for (int k = 0; k < r->n_top && k < j->n_lp; k++) {
            size_t tn;
            char *tt = token_text(m, r->top[k].token, &tn);
            cJSON *x = cJSON_CreateObject();
            add_str_n(x, "token", tt, tn);
            cJSON_AddNumberToObject(x, "logprob", finite_lp(r->top[k].logprob));
            cJSON_AddItemToObject(x, "bytes", bytes_array(tt, tn));
            cJSON_AddItemToArray(top, x);
            free(tt);
        }
        cJSON_AddItemToArray(j->lps[choice], e);
    } else {
        if (!j->lps[choice]) {
            j->lps[choice] = cJSON_CreateObject();
            cJSON_AddArrayToObject(j->lps[choice], "tokens");
            cJSON_AddArrayToObject(j->lps[choice], "token_logprobs");
            cJSON_AddArrayToObject(j->lps[choice], "top_logprobs");
            cJSON_AddArrayToObject(j->lps[choice], "text_offset");
        }
        cJSON *o = j->lps[choice];
        cJSON_AddItemToArray(cJSON_GetObjectItem(o, "tokens"), json_str(t, n));
        cJSON_AddItemToArray(cJSON_GetObjectItem(o, "token_logprobs"), cJSON_CreateNumber(finite_lp(r->logprob)));
        cJSON *top = cJSON_CreateObject();
        for (int k = 0; k < r->n_top && k < j->n_lp; k++) {
            size_t tn;
            char *tt = token_text(m, r->top[k].token, &tn);
            char *safe = utf8_safe(tt, tn);
            if (!cJSON_GetObjectItemCaseSensitive(top, safe)) cJSON_AddNumberToObject(top, safe, finite_lp(r->top[k].logprob));
            free(safe);
            free(tt);
        }
        cJSON_AddItemToArray(cJSON_GetObjectItem(o, "top_logprobs"), top);
        cJSON_AddItemToArray(cJSON_GetObjectItem(o, "text_offset"), cJSON_CreateNumber((double)r->text_pos));
    }
    free(t);
}

static cJSON *usage_json(job *j) {
    cJSON *u = cJSON_CreateObject();
    long prompt = 0, gen = 0, cached = 0;
    for (int i = 0; i < j->n_choices; i++) {
        gen += j->usage[i].n_gen;
        if (i % j->n == 0) {
            prompt += j->usage[i].n_prompt;
            cached += j->usage[i].n_cached;
        }
    }
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)gen);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(prompt + gen));
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", (double)cached);
    return u;
}

static cJSON *timings_json(job *j) {
    const tokd_usage *u = &j->usage[0];
    cJSON *t = cJSON_CreateObject();
    cJSON_AddNumberToObject(t, "queue_ms", u->queue_s * 1e3);
    cJSON_AddNumberToObject(t, "ttft_ms", u->ttft_s * 1e3);
    cJSON_AddNumberToObject(t, "prefill_tokens_per_second", u->prefill_tps);
    cJSON_AddNumberToObject(t, "decode_tokens_per_second", u->decode_tps);
    cJSON_AddNumberToObject(t, "total_ms", u->total_s * 1e3);
    cJSON_AddNumberToObject(t, "preemptions", u->n_preempted);
    return t;
}

static cJSON *chunk_base(job *j) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", j->id);
    cJSON_AddStringToObject(o, "object", j->chat ? "chat.completion.chunk" : "text_completion");
    cJSON_AddNumberToObject(o, "created", (double)j->created);
    add_str_n(o, "model", j->s->p.model_id, strlen(j->s->p.model_id));
    cJSON_AddStringToObject(o, "system_fingerprint", "tokd");
    return o;
}

static void sse(job *j, cJSON *o) {
    char *t = cJSON_PrintUnformatted(o);
    tokd_buf_appendf(&j->out, "data: %s\n\n", t);
    free(t);
    cJSON_Delete(o);
}

/* One streaming chunk for one choice. */
static void stream_chunk(job *j, int choice, const char *text, size_t len, bool role, const char *finish, bool with_lp) {
    cJSON *o = chunk_base(j), *chs = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", choice);
    if (j->chat) {
        cJSON *d = cJSON_AddObjectToObject(c, "delta");
        if (role) cJSON_AddStringToObject(d, "role", "assistant");
        if (len || role) add_str_n(d, "content", text, len);
    } else {
        add_str_n(c, "text", text, len);
    }
    if (with_lp && j->lps[choice]) {
        if (j->chat) {
            cJSON *l = cJSON_AddObjectToObject(c, "logprobs");
            cJSON_AddItemToObject(l, "content", j->lps[choice]);
        } else {
            cJSON_AddItemToObject(c, "logprobs", j->lps[choice]);
        }
        j->lps[choice] = NULL;
    } else {
        cJSON_AddNullToObject(c, "logprobs");
    }
    if (finish) cJSON_AddStringToObject(c, "finish_reason", finish);
    else cJSON_AddNullToObject(c, "finish_reason");
    cJSON_AddItemToArray(chs, c);
    sse(j, o);
}

/* What one piece of chat output turned into after the reasoning and tool-call parsers. */
typedef struct {
    tokd_buf content, reasoning;
    cJSON *calls; /* streaming tool_calls deltas, or NULL */
} chat_out;

static void chat_out_free(chat_out *co) {
    tokd_buf_free(&co->content);
    tokd_buf_free(&co->reasoning);
    cJSON_Delete(co->calls);
}

/* Calls a choice answers with: all the model made, or the first (parallel_tool_calls false). */
static size_t calls_kept(const job *j, size_t n) { return j->single_call && n > 1 ? 1 : n; }

static void add_call_deltas(const job *j, chat_out *co, const tokd_toolcall_events *ev) {
    for (size_t k = 0; k < ev->n_calls; k++) {
        if (ev->first_index + k >= calls_kept(j, SIZE_MAX)) break;
        if (!co->calls) co->calls = cJSON_CreateArray();
        cJSON_AddItemToArray(co->calls, tokd_toolcall_delta_json(&ev->calls[k], ev->first_index + k));
    }
}

/* Feed generated text of one choice through its parsers (reasoning first, then tool calls);
 * end: the output is over, release what they hold; cut: it was cut short (max_tokens, context),
 * so a tool call still being written is dropped, not returned as a call or as content. */
static void chat_feed(job *j, int c, const char *text, size_t len, bool end, bool cut, chat_out *co) {
    tokd_buf mid = {0};
    if (j->rp[c]) {
        tokd_reasoning_events ev = {0};
        if (len) {
            tokd_reasoning_push(j->rp[c], text, len, &ev);
            tokd_buf_append(&co->reasoning, ev.reasoning.data, ev.reasoning.len);
            tokd_buf_append(&mid, ev.content.data, ev.content.len);
        }
        if (end) {
            tokd_reasoning_finish(j->rp[c], &ev);
            tokd_buf_append(&co->reasoning, ev.reasoning.data, ev.reasoning.len);
            tokd_buf_append(&mid, ev.content.data, ev.content.len);
        }
        tokd_reasoning_events_free(&ev);
    } else {
        tokd_buf_append(&mid, text, len);
    }
    if (j->tp[c]) {
        tokd_toolcall_events ev = {0};
        if (mid.len) {
            tokd_toolcall_push(j->tp[c], mid.data, mid.len, &ev);
            tokd_buf_append(&co->content, ev.content.data, ev.content.len);
            add_call_deltas(j, co, &ev);
        }
        if (end) {
            if (cut) tokd_toolcall_finish_cut(j->tp[c], &ev);
            else tokd_toolcall_finish(j->tp[c], &ev);
            tokd_buf_append(&co->content, ev.content.data, ev.content.len);
            add_call_deltas(j, co, &ev);
        }
        tokd_toolcall_events_free(&ev);
    } else {
        tokd_buf_append(&co->content, mid.data, mid.len);
    }
    tokd_buf_free(&mid);
}

static size_t n_calls_of(job *j, int c) {
    size_t n = 0;
    if (j->tp[c]) tokd_toolcall_calls(j->tp[c], &n);
    return calls_kept(j, n);
}

/* One streaming chat chunk: whichever of reasoning_content, content and tool_calls it has. */
static void chat_chunk(job *j, int c, chat_out *co, const char *finish) {
    cJSON *o = chunk_base(j), *chs = cJSON_AddArrayToObject(o, "choices"), *ch = cJSON_CreateObject();
    cJSON_AddNumberToObject(ch, "index", c);
    cJSON *d = cJSON_AddObjectToObject(ch, "delta");
    if (co && co->reasoning.len) add_str_n(d, "reasoning_content", co->reasoning.data, co->reasoning.len);
    if (co && co->content.len) add_str_n(d, "content", co->content.data, co->content.len);
    if (co && co->calls) {
        cJSON_AddItemToObject(d, "tool_calls", co->calls);
        co->calls = NULL;
    }
    if (j->lps[c]) {
        cJSON *l = cJSON_AddObjectToObject(ch, "logprobs");
        cJSON_AddItemToObject(l, "content", j->lps[c]);
        j->lps[c] = NULL;
    } else {
        cJSON_AddNullToObject(ch, "logprobs");
    }
    if (finish) cJSON_AddStringToObject(ch, "finish_reason", finish);
    else cJSON_AddNullToObject(ch, "finish_reason");
    cJSON_AddItemToArray(chs, ch);
    sse(j, o);
}

/* finish_reason of a choice whose DONE event is r: "length" whenever the output was cut, even
 * after complete tool calls (as OpenAI answers); "tool_calls" when it ended with calls. */
static const char *finish_of(job *j, int c, const ev_rec *r) {
    if (r->status == TOKD_REQ_CANCELLED) return "cancelled";
    if (r->status != TOKD_REQ_OK) return "error";
    const char *f = finish_openai(r->finish);
    return strcmp(f, "length") && n_calls_of(j, c) ? "tool_calls" : f;
}

/* Handle popped events (connection thread). */
static void process(job *j, ev_rec *list) {
    for (ev_rec *r = list, *n; r; r = n) {
        n = r->next;
        int c = r->choice;
        if (r->kind == TOKD_EV_TOKEN && r->has_lp && j->n_lp >= 0) lp_add(j, c, r);
        if (j->stream && j->chat && !j->role_sent[c]) {
            j->role_sent[c] = true;
            stream_chunk(j, c, "", 0, true, NULL, false);
        }
        bool ok_done = r->kind == TOKD_EV_DONE && r->status == TOKD_REQ_OK;
        bool cut = ok_done && !strcmp(finish_openai(r->finish), "length");
        chat_out co = {0};
        if (j->chat) chat_feed(j, c, r->text ? r->text : "", r->len, ok_done, cut, &co);
        if (r->kind == TOKD_EV_DONE) {
            j->usage[c] = r->usage;
            if (r->status == TOKD_REQ_ERROR) {
                j->any_error = true;
                j->error_is_request = r->bad_request;
                snprintf(j->error, sizeof j->error, "%s", r->error ? r->error : "internal error");
            }
            j->finish[c] = finish_of(j, c, r);
        }
        if (j->stream && j->chat) {
            if (co.content.len || co.reasoning.len || co.calls || (r->kind == TOKD_EV_TOKEN && j->lps[c])) chat_chunk(j, c, &co, NULL);
            if (ok_done) chat_chunk(j, c, NULL, j->finish[c]);
        } else if (j->stream) {
            if (r->len || (r->kind == TOKD_EV_TOKEN && j->lps[c]))
                stream_chunk(j, c, r->text ? r->text : "", r->len, false, NULL, true);
            if (ok_done) stream_chunk(j, c, "", 0, false, j->finish[c], true);
        } else if (j->chat) {
            tokd_buf_append(&j->texts[c], co.content.data, co.content.len);
            tokd_buf_append(&j->reasoning[c], co.reasoning.data, co.reasoning.len);
        } else if (r->len) {
            tokd_buf_append(&j->texts[c], r->text, r->len);
        }
        if (j->stream && r->kind == TOKD_EV_DONE && r->status == TOKD_REQ_ERROR) {
            cJSON *e = error_obj(j->error, r->bad_request ? "invalid_request_error" : "server_error", NULL, NULL);
            sse(j, e);
        }
        chat_out_free(&co);
        free(r->text);
        free(r->error);
        free(r);
    }
}

static ev_rec *pop_all(job *j) {
    ev_rec *l = j->head;
    j->head = j->tail = NULL;
    return l;
}

#define CHECK_S 0.05 /* how often a waiting request looks whether its client hung up */

/* Under j->mu: wait for a signal, at most until `until` (tokd_now's clock). */
static void wait_until(job *j, double until) {
    double left = until - tokd_now();
    if (left <= 0) return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long ns = (long long)ts.tv_nsec + (long long)(left * 1e9);
    ts.tv_sec += (time_t)(ns / 1000000000LL);
    ts.tv_nsec = (long)(ns % 1000000000LL);
    pthread_cond_timedwait(&j->cv, &j->mu, &ts);
}

/* Wait for events or completion; false when the client went away. Whether it did is checked
 * every CHECK_S whatever happens, also while tokens keep arriving. */
static bool wait_events(job *j, ev_rec **list, bool *all_done) {
    for (;;) {
        double now = tokd_now();
        if (now >= j->next_check) {
            j->next_check = now + CHECK_S;
            if (client_gone(j->conn)) return false;
        }
        pthread_mutex_lock(&j->mu);
        if (!j->head && j->n_done < j->n_choices) wait_until(j, j->next_check);
        bool ready = j->head || j->n_done == j->n_choices;
        if (ready) {
            *list = pop_all(j);
            *all_done = j->n_done == j->n_choices;
        }
        pthread_mutex_unlock(&j->mu);
        if (ready) return true;
    }
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    job *j = cls;
    for (;;) {
        if (j->out_off < j->out.len) {
            size_t n = j->out.len - j->out_off;
            if (n > max) n = max;
            memcpy(buf, j->out.data + j->out_off, n);
            j->out_off += n;
            return (ssize_t)n;
        }
        tokd_buf_clear(&j->out);
        j->out_off = 0;
        if (j->finished) {
            j->ended = true;
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        ev_rec *list = NULL;
        bool done = false;
        if (!wait_events(j, &list, &done)) {
            job_disconnected(j);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        process(j, list);
        if (done) {
            if (j->include_usage) {
                cJSON *o = chunk_base(j);
                cJSON_AddArrayToObject(o, "choices");
                cJSON_AddItemToObject(o, "usage", usage_json(j));
                cJSON_AddItemToObject(o, "timings", timings_json(j));
                sse(j, o);
            }
            tokd_buf_appendf(&j->out, "data: [DONE]\n\n");
            j->finished = true;
        }
    }
}

/* The stream is over. Before its end it is over because the client hung up (MHD saw a write
 * fail, or wait_events saw the socket closed), unless the server is closing connections itself. */
static void stream_free(void *cls) {
    job *j = cls;
    if (!j->ended && !atomic_load(&j->s->stopping)) job_disconnected(j);
    job_cancel(j); /* no effect on finished requests; frees the sequences of a client that left */
    job_release(j);
}

static cJSON *final_response(job *j) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", j->id);
    cJSON_AddStringToObject(o, "object", j->chat ? "chat.completion" : "text_completion");
    cJSON_AddNumberToObject(o, "created", (double)j->created);
    add_str_n(o, "model", j->s->p.model_id, strlen(j->s->p.model_id));
    cJSON_AddStringToObject(o, "system_fingerprint", "tokd");
    cJSON *chs = cJSON_AddArrayToObject(o, "choices");
    for (int i = 0; i < j->n_choices; i++) {
        cJSON *c = cJSON_CreateObject();
        cJSON_AddNumberToObject(c, "index", i);
        const char *t = j->texts[i].data ? j->texts[i].data : "";
        if (j->chat) {
            cJSON *m = cJSON_AddObjectToObject(c, "message");
            cJSON_AddStringToObject(m, "role", "assistant");
            size_t n_calls = 0;
            const tokd_toolcall_call *calls = j->tp[i] ? tokd_toolcall_calls(j->tp[i], &n_calls) : NULL;
            n_calls = calls_kept(j, n_calls);
            if (n_calls && !j->texts[i].len) cJSON_AddNullToObject(m, "content"); /* as OpenAI answers a bare call */
            else add_str_n(m, "content", t, j->texts[i].len);
            if (j->reasoning[i].len) add_str_n(m, "reasoning_content", j->reasoning[i].data, j->reasoning[i].len);
            if (n_calls) cJSON_AddItemToObject(m, "tool_calls", tokd_toolcall_calls_json(calls, n_calls));
            cJSON_AddNullToObject(m, "refusal");
            if (j->n_lp >= 0) {
                cJSON *l = cJSON_AddObjectToObject(c, "logprobs");
                cJSON_AddItemToObject(l, "content", j->lps[i] ? j->lps[i] : cJSON_CreateArray());
                j->lps[i] = NULL;
            } else {
                cJSON_AddNullToObject(c, "logprobs");
            }
        } else {
            add_str_n(c, "text", t, j->texts[i].len);
            if (j->n_lp >= 0 && j->lps[i]) {
                cJSON_AddItemToObject(c, "logprobs", j->lps[i]);
                j->lps[i] = NULL;
            } else {
                cJSON_AddNullToObject(c, "logprobs");
            }
        }
        cJSON_AddStringToObject(c, "finish_reason", j->finish[i] ? j->finish[i] : "stop");
        cJSON_AddItemToArray(chs, c);
    }
    cJSON_AddItemToObject(o, "usage", usage_json(j));
    cJSON_AddItemToObject(o, "timings", timings_json(j));
    return o;
}

/* ---- endpoints --------------------------------------------------------------------------- */

/* A random value for this process (the clock and pid when the kernel gives none). */
static uint64_t process_salt(void) {
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v)
        v = (uint64_t)(tokd_now() * 1e9) ^ ((uint64_t)getpid() << 40);
    return v;
}

/* The id seed of one choice's tool-call parser: distinct for every choice the process serves
 * (a counter), and unpredictable across processes (the salt), so that ids never repeat even
 * when two requests give the same sampling seed. The parser hashes it into the ids. */
static uint64_t call_id_seed(server *s) {
    uint64_t z = s->call_salt + atomic_fetch_add(&s->next_calls, 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull; /* a bijection: distinct counters, distinct seeds */
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static enum MHD_Result handle_generate(server *s, struct MHD_Connection *c, cJSON *root, bool chat) {
    const tokd_req_ctx ctx = {s->m, s->tpl, s->tool_fmt, s->p.model_id, s->p.max_choices,
                              (uint64_t)time(NULL) ^ ((uint64_t)atomic_load(&s->next_job) << 32)};
    tokd_gen_opts o;
    tokd_req_err pe = {0};
    if (tokd_gen_opts_parse(&ctx, root, chat, &o, &pe)) {
        tokd_gen_opts_free(&o);
        return send_error(s, c, pe.status, pe.msg, pe.param, pe.code);
    }
    if (atomic_load(&s->draining)) {
        tokd_gen_opts_free(&o);
        return send_error(s, c, 503, "the server is shutting down", NULL, NULL);
    }
    int n_choices = (int)(o.n_prompts * o.n);
    if (n_choices > tokd_engine_capacity(s->e)) {
        tokd_gen_opts_free(&o);
        char msg[160];
        snprintf(msg, sizeof msg, "%d choices (prompts x n) can never be served: this server holds at most %d requests at once",
                 n_choices, (int)tokd_engine_capacity(s->e));
        return send_error(s, c, 400, msg, "n", NULL);
    }
    job *j = job_new(s, n_choices, chat);
    j->n = (int)o.n;
    j->n_prompts = o.n_prompts;
    j->stream = o.stream;
    j->include_usage = o.include_usage;
    j->single_call = o.single_call;
    j->grammar = o.grammar; /* the job frees it once every engine request is done */
    o.grammar = NULL;
    if (chat) {
        bool opens = s->reason_fmt != TOKD_REASONING_NONE && o.prompt_text &&
                     tokd_reasoning_prompt_opens(s->reason_fmt, o.prompt_text, strlen(o.prompt_text));
        for (int i = 0; i < n_choices; i++) {
            if (s->reason_fmt != TOKD_REASONING_NONE) j->rp[i] = tokd_reasoning_parser_new(s->reason_fmt, opens);
            if (o.parse_tools) j->tp[i] = tokd_toolcall_parser_new(s->tool_fmt, call_id_seed(s));
        }
    }
    j->n_lp = o.n_lp;
    j->conn = c;
    for (int i = 0; i < n_choices; i++) {
        tokd_request_params rp;
        tokd_request_params_default(&rp);
        rp.prompt = o.prompts[i / o.n];
        rp.n_prompt = o.n_prompt[i / o.n];
        rp.sampling = o.sp;
        rp.sampling.seed = o.sp.seed + (uint64_t)(i % o.n);
        rp.max_tokens = (int32_t)o.max_tokens;
        rp.stop = o.stop;
        rp.n_stop = o.n_stop;
        rp.ignore_eos = o.ignore_eos;
        rp.grammar = j->grammar;
        rp.render_special = o.parse_tools; /* tool-call markers may be special tokens */
        rp.on_event = on_event;
        j->uds[i] = (choice_ud){j, i};
        rp.ud = &j->uds[i];
        pthread_mutex_lock(&j->mu);
        j->refs++;
        pthread_mutex_unlock(&j->mu);
        tokd_err err;
        int rc = tokd_engine_submit(s->e, &rp, &j->ids[i], &err);
        if (rc) {
            pthread_mutex_lock(&j->mu);
            j->refs--;
            pthread_mutex_unlock(&j->mu);
            job_cancel(j);
            /* wait for the ones already queued to report cancelled, then answer */
            pthread_mutex_lock(&j->mu);
            j->n_choices = i; /* only the submitted ones count */
            while (j->n_done < i) pthread_cond_wait(&j->cv, &j->mu);
            j->n_choices = n_choices;
            pthread_mutex_unlock(&j->mu);
            job_release(j);
            tokd_gen_opts_free(&o);
            int status = rc == TOKD_ENGINE_EBUSY ? 429 : rc == TOKD_ENGINE_ESTOPPED ? 503 : 400;
            return send_error(s, c, status, err.msg, rc == TOKD_ENGINE_ETOOBIG ? (chat ? "messages" : "prompt") : NULL,
                              rc == TOKD_ENGINE_ETOOBIG ? "context_length_exceeded" : NULL);
        }
        j->submitted[i] = true;
    }
    tokd_gen_opts_free(&o);
    if (j->stream) {
        struct MHD_Response *r = mhd->create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_reader, j, stream_free);
        if (!r) {
            j->ended = true; /* never started: not a disconnect */
            stream_free(j);
            return MHD_NO;
        }
        mhd->add_response_header(r, "Content-Type", "text/event-stream");
        mhd->add_response_header(r, "Cache-Control", "no-cache");
        enum MHD_Result rc = mhd->queue_response(c, 200, r);
        mhd->destroy_response(r);
        atomic_fetch_add(&s->codes[C_200], 1);
        return rc;
    }
    for (;;) {
        ev_rec *list = NULL;
        bool done = false;
        if (!wait_events(j, &list, &done)) {
            job_disconnected(j);
            job_release(j);
            return MHD_NO;
        }
        process(j, list);
        if (done) break;
    }
    enum MHD_Result rc;
    if (j->any_error) rc = send_error(s, c, j->error_is_request ? 400 : 500, j->error, NULL, NULL);
    else rc = send_json(s, c, 200, final_response(j));
    job_release(j);
    return rc;
}

static enum MHD_Result handle_tokenize(server *s, struct MHD_Connection *c, cJSON *root) {
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(root, "content");
    if (!cJSON_IsObject(root) || !cJSON_IsString(content)) return send_error(s, c, 400, "'content' must be a string", "content", NULL);
    if (!tokd_utf8_valid(content->valuestring, strlen(content->valuestring)))
        return send_error(s, c, 400, "'content' is not valid UTF-8", "content", NULL);
    bool add_special = false, parse_special = false;
    tokd_req_err pe = {0};
    if (tokd_req_get_bool(root, "add_special", &add_special, &pe) < 0 || tokd_req_get_bool(root, "parse_special", &parse_special, &pe) < 0)
        return send_error(s, c, 400, pe.msg, pe.param, NULL);
    int32_t *toks = NULL;
    size_t n = 0;
    tokd_err err;
    if (tokd_tokenize(s->m->tok, content->valuestring, strlen(content->valuestring), add_special, parse_special, &toks, &n, &err))
        return send_error(s, c, 400, err.msg, "content", NULL);
    cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "tokens");
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(toks[i]));
    free(toks);
    return send_json(s, c, 200, o);
}

static enum MHD_Result handle_detokenize(server *s, struct MHD_Connection *c, cJSON *root) {
    const cJSON *toks = cJSON_GetObjectItemCaseSensitive(root, "tokens");
    if (!cJSON_IsObject(root) || !cJSON_IsArray(toks)) return send_error(s, c, 400, "'tokens' must be an array of token ids", "tokens", NULL);
    int n = cJSON_GetArraySize(toks), i = 0;
    int32_t *ids = tokd_xmalloc((size_t)(n ? n : 1) * sizeof *ids);
    for (const cJSON *v = toks->child; v; v = v->next, i++) {
        if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0 || v->valuedouble >= s->m->hp.n_vocab) {
            free(ids);
            char msg[128];
            snprintf(msg, sizeof msg, "tokens[%d] is not a token id (0..%d)", i, s->m->hp.n_vocab - 1);
            return send_error(s, c, 400, msg, "tokens", NULL);
        }
        ids[i] = (int32_t)v->valuedouble;
    }
    tokd_buf out = {0};
    tokd_detokenize(s->m->tok, ids, (size_t)n, 0, &out);
    free(ids);
    cJSON *o = cJSON_CreateObject();
    add_str_n(o, "content", out.data ? out.data : "", out.len);
    tokd_buf_free(&out);
    return send_json(s, c, 200, o);
}

static cJSON *model_obj(server *s) {
    cJSON *m = cJSON_CreateObject();
    add_str_n(m, "id", s->p.model_id, strlen(s->p.model_id));
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", 0);
    cJSON_AddStringToObject(m, "owned_by", "tokd");
    tokd_engine_stats st;
    tokd_engine_get_stats(s->e, &st);
    cJSON_AddNumberToObject(m, "context_length", st.n_ctx);
    return m;
}

static enum MHD_Result handle_metrics(server *s, struct MHD_Connection *c) {
    tokd_buf b = {0};
    tokd_engine_metrics(s->e, &b);
    tokd_buf_appendf(&b, "# HELP tokd_http_responses_total HTTP responses by status.\n# TYPE tokd_http_responses_total counter\n");
    for (int i = 0; i < N_CODES; i++) {
        if (code_of[i]) tokd_buf_appendf(&b, "tokd_http_responses_total{code=\"%d\"} %llu\n", code_of[i], (unsigned long long)atomic_load(&s->codes[i]));
        else tokd_buf_appendf(&b, "tokd_http_responses_total{code=\"other\"} %llu\n", (unsigned long long)atomic_load(&s->codes[i]));
    }
    tokd_buf_appendf(&b,
                     "# HELP tokd_client_disconnects_total Requests whose client hung up before the end.\n# TYPE "
                     "tokd_client_disconnects_total counter\ntokd_client_disconnects_total %llu\n"
                     "# HELP tokd_http_jobs_active Generation requests being served.\n# TYPE tokd_http_jobs_active gauge\n"
                     "tokd_http_jobs_active %d\n",
                     (unsigned long long)atomic_load(&s->n_disconnects), atomic_load(&s->n_jobs));
    enum MHD_Result rc = send_text(s, c, 200, "text/plain; version=0.0.4; charset=utf-8", b.data, b.len, NULL);
    tokd_buf_free(&b);
    return rc;
}

static bool key_ok(server *s, struct MHD_Connection *c) {
    if (!s->p.api_key || !*s->p.api_key) return true;
    const char *h = mhd->lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7)) return false;
    const char *got = h + 7, *want = s->p.api_key;
    size_t gl = strlen(got), wl = strlen(want);
    unsigned char diff = (unsigned char)(gl != wl);
    for (size_t i = 0; i < wl; i++) diff |= (unsigned char)(want[i] ^ got[i < gl ? i : 0]);
    return diff == 0;
}

static enum MHD_Result route(server *s, struct MHD_Connection *c, const char *url, const char *method, conn_state *cs) {
    bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (!strcmp(url, "/health")) {
        if (!get) return send_error(s, c, 405, "use GET", NULL, NULL);
        if (atomic_load(&s->draining)) return send_error(s, c, 503, "the server is shutting down", NULL, NULL);
        const char *ok = "{\"status\":\"ok\"}";
        return send_text(s, c, 200, "application/json", ok, strlen(ok), NULL);
    }
    if (!strcmp(url, "/metrics")) {
        if (!get) return send_error(s, c, 405, "use GET", NULL, NULL);
        return handle_metrics(s, c);
    }
    bool models = !strcmp(url, "/v1/models") || !strncmp(url, "/v1/models/", 11);
    bool gen = !strcmp(url, "/v1/completions") || !strcmp(url, "/v1/chat/completions");
    bool tok = !strcmp(url, "/tokenize") || !strcmp(url, "/detokenize");
    if (!models && !gen && !tok) return send_error(s, c, 404, "unknown route", NULL, "unknown_url");
    if (!key_ok(s, c)) return send_error(s, c, 401, "missing or invalid API key (Authorization: Bearer KEY)", NULL, "invalid_api_key");
    if (models) {
        if (!get) return send_error(s, c, 405, "use GET", NULL, NULL);
        if (url[10] == '/') {
            if (strcmp(url + 11, s->p.model_id)) return send_error(s, c, 404, "no such model", "model", "model_not_found");
            return send_json(s, c, 200, model_obj(s));
        }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "object", "list");
        cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "data"), model_obj(s));
        return send_json(s, c, 200, o);
    }
    if (!post) return send_error(s, c, 405, "use POST", NULL, NULL);
    if (cs->too_big) {
        char msg[128];
        snprintf(msg, sizeof msg, "the request body is larger than %zu bytes", s->p.max_body);
        return send_error(s, c, 413, msg, NULL, NULL);
    }
    if (!tokd_utf8_valid(cs->body.data ? cs->body.data : "", cs->body.len))
        return send_error(s, c, 400, "the request body is not valid UTF-8", NULL, NULL);
    const char *end = NULL;
    cJSON *root = cs->body.len ? cJSON_ParseWithLengthOpts(cs->body.data, cs->body.len, &end, false) : NULL;
    if (root && end) { /* nothing but whitespace may follow the value */
        const char *lim = cs->body.data + cs->body.len;
        while (end < lim && (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')) end++;
        if (end < lim) {
            cJSON_Delete(root);
            root = NULL;
        }
    }
    if (!root) return send_error(s, c, 400, "the request body is not valid JSON", NULL, NULL);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return send_error(s, c, 400, "the request body must be a JSON object", NULL, NULL);
    }
    char field[64];
    if (tokd_req_find_nul(cs->body.data, cs->body.len, field, sizeof field)) {
        cJSON_Delete(root);
        char msg[160];
        snprintf(msg, sizeof msg, "'%s' contains a NUL character (\\u0000), which is not supported", field);
        return send_error(s, c, 400, msg, field, NULL);
    }
    enum MHD_Result rc;
    if (!strcmp(url, "/tokenize")) rc = handle_tokenize(s, c, root);
    else if (!strcmp(url, "/detokenize")) rc = handle_detokenize(s, c, root);
    else rc = handle_generate(s, c, root, !strcmp(url, "/v1/chat/completions"));
    cJSON_Delete(root);
    return rc;
}

static enum MHD_Result access_handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                      const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls) {
    server *s = cls;
    conn_state *cs = *con_cls;
    if (!cs) {
        cs = tokd_xcalloc(1, sizeof *cs);
        cs->t_start = tokd_now();
        *con_cls = cs;
        /* streamed chunks are small: send each at once (no Nagle wait for the client's delayed ACK) */
        const union MHD_ConnectionInfo *ci = mhd->get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        int one = 1;
        if (ci) setsockopt(ci->connect_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        const char *cl = mhd->lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl) {
            char *end;
            errno = 0;
            unsigned long long n = strtoull(cl, &end, 10);
            if (errno || *end || n > s->p.max_body) {
                cs->too_big = cs->responded = true;
                char msg[128];
                snprintf(msg, sizeof msg, "the request body is larger than %zu bytes", s->p.max_body);
                return send_error(s, c, 413, msg, NULL, NULL);
            }
        }
        return MHD_YES;
    }
    if (cs->responded) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (tokd_now() - cs->t_start > s->p.timeout_s) return MHD_NO; /* too slow: close */
        if (cs->body.len + *upload_data_size > s->p.max_body) {
            cs->too_big = true;
            if (cs->body.len + *upload_data_size > 4 * s->p.max_body) return MHD_NO;
        } else {
            tokd_buf_append(&cs->body, upload_data, *upload_data_size);
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (tokd_now() - cs->t_start > s->p.timeout_s && cs->body.len) return MHD_NO;
    cs->responded = true;
    return route(s, c, url, method, cs);
}

static void request_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    conn_state *cs = *con_cls;
    if (!cs) return;
    tokd_buf_free(&cs->body);
    free(cs);
    *con_cls = NULL;
}

/* The chat template (the model's, a given source, or ChatML) and the tool-call and reasoning
 * formats: given by name, else detected from the template text; a template that shows no
 * tool-call format gets Hermes (<tool_call>...</tool_call>), one that shows no reasoning
 * format gets <think>...</think> (recognised only at the start of the output). */
static int setup_chat(server *s, tokd_err *err) {
    const char *src = s->p.chat_template;
    char *owned = NULL;
    if (src) {
        s->tpl = tokd_chat_template_from_source(s->m, src, strlen(src), err);
    } else {
        s->tpl = tokd_chat_template_new(s->m, err);
        gguf_str gs;
        tokd_err ignore;
        if (s->tpl && !tokd_chat_template_is_fallback(s->tpl) &&
            gguf_get_str(s->m->gguf, "tokenizer.chat_template", &gs, &ignore) == 0) {
            owned = tokd_xmalloc((size_t)gs.len + 1);
            memcpy(owned, gs.ptr, (size_t)gs.len);
            owned[gs.len] = 0;
            src = owned;
        }
    }
    if (!s->tpl) {
        free(owned);
        return -1;
    }
    int f;
    if (s->p.tool_format) {
        if ((f = tokd_toolcall_format_from_name(s->p.tool_format)) < 0) {
            free(owned);
            tokd_chat_template_free(s->tpl);
            return tokd_seterr(err, "unknown tool-call format '%s'", s->p.tool_format);
        }
        s->tool_fmt = (tokd_toolcall_format)f;
    } else {
        s->tool_fmt = tokd_toolcall_detect(src);
        if (s->tool_fmt == TOKD_TOOLCALL_NONE) s->tool_fmt = TOKD_TOOLCALL_HERMES;
    }
    if (s->p.reasoning_format) {
        if ((f = tokd_reasoning_format_from_name(s->p.reasoning_format)) < 0) {
            free(owned);
            tokd_chat_template_free(s->tpl);
            return tokd_seterr(err, "unknown reasoning format '%s'", s->p.reasoning_format);
        }
        s->reason_fmt = (tokd_reasoning_format)f;
    } else {
        s->reason_fmt = tokd_reasoning_detect(src);
        if (s->reason_fmt == TOKD_REASONING_NONE) s->reason_fmt = TOKD_REASONING_THINK;
    }
    fprintf(stderr, "tokd serve: chat template: %s; tool calls: %s; reasoning: %s\n",
            s->p.chat_template ? "given" : tokd_chat_template_is_fallback(s->tpl) ? "ChatML (none in the file)" : "the model's",
            tokd_toolcall_format_name(s->tool_fmt), tokd_reasoning_format_name(s->reason_fmt));
    free(owned);
    return 0;
}

int tokd_server_run(tokd_engine *e, const tokd_server_params *p, volatile sig_atomic_t *stop, tokd_err *err) {
    if (!(mhd = tokd_http_lib_load(err))) return -1;
    server *s = tokd_xcalloc(1, sizeof *s);
    s->e = e;
    s->m = tokd_engine_model(e);
    s->p = *p;
    atomic_init(&s->next_job, 1);
    s->call_salt = process_salt();
    if (setup_chat(s, err)) {
        free(s);
        return -1;
    }
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)p->port);
    const char *host = (!p->host || !strcmp(p->host, "localhost")) ? "127.0.0.1" : p->host;
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        tokd_chat_template_free(s->tpl);
        free(s);
        return tokd_seterr(err, "--host '%s' is not an IPv4 address", p->host);
    }
    unsigned timeout = p->timeout_s < 1 ? 1 : (unsigned)ceil(p->timeout_s);
    s->d = mhd->start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC, (uint16_t)p->port,
                            NULL, NULL, access_handler, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                            MHD_OPTION_CONNECTION_TIMEOUT, timeout, MHD_OPTION_CONNECTION_LIMIT, (unsigned)p->max_connections,
                            MHD_OPTION_NOTIFY_COMPLETED, request_completed, s, MHD_OPTION_END);
    if (!s->d) {
        tokd_chat_template_free(s->tpl);
        free(s);
        return tokd_seterr(err, "cannot listen on %s:%d (port in use?)", host, p->port);
    }
    const union MHD_DaemonInfo *di = mhd->get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    fprintf(stderr, "tokd serve: listening on http://%s:%u (model %s)\n", host, di ? di->port : (unsigned)p->port, p->model_id);
    while (!*stop) {
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    /* graceful shutdown: stop accepting, drain, then cancel what is left */
    fprintf(stderr, "tokd serve: shutting down (%d requests in flight)\n", atomic_load(&s->n_jobs));
    atomic_store(&s->draining, 1);
    MHD_socket lfd = mhd->quiesce_daemon(s->d);
    if (lfd != MHD_INVALID_SOCKET) close(lfd);
    tokd_engine_close(e);
    double deadline = tokd_now() + p->shutdown_grace_s;
    while (atomic_load(&s->n_jobs) > 0 && tokd_now() < deadline) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    atomic_store(&s->stopping, 1);
    mhd->stop_daemon(s->d); /* ends connections; their jobs cancel their requests */
    tokd_chat_template_free(s->tpl);
    free(s);
    return 0;
}
