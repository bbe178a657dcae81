/* toolcall.c — the tool-call output parser (formats and streaming rules in toolcall.h).
 *
 * Every format is one row of a table: the markers that open a call block, markers dropped
 * silently, how the block ends (an end marker, or the end of one JSON value), whether a name
 * precedes the body (Mistral's name[ARGS], functionary's <function=name>), and how the body
 * reads. The machine that runs a row has three states over a buffer of unconsumed bytes:
 *   TEXT  content, scanned for start markers (held back while a marker may be starting);
 *   HEAD  the function name written before the body;
 *   BODY  the call's text, until its end is known; then it is parsed whole with cJSON.
 * Each step either consumes a prefix of the buffer or waits for bytes that decide it, so the
 * result never depends on how the text was cut into pieces. Blocks start at offset 0 of the
 * buffer (content before them is released first), so a failed block is the buffer's prefix. */
#include "chat/toolcall.h"

#include <stdlib.h>
#include <string.h>

#include "chat/toolcall_scan.h"

typedef enum { HEAD_NONE, HEAD_MISTRAL, HEAD_FUNCTION } head_kind;
typedef enum { BODY_CALLS, BODY_DEEPSEEK, BODY_GLM } body_kind;

typedef struct fmt_spec {
    const char *name;
    const char *starts[2]; /* markers that open a block (NULL-terminated) */
    const char *drops[3];  /* markers removed from the content (NULL-terminated) */
    const char *end;       /* marker that closes a block; NULL: the body is one JSON value */
    head_kind head;
    body_kind body;
    bool bare_json;        /* a '{' opens a block at the message start and after a call */
    bool short_ids;        /* 9-character ids */
} fmt_spec;

#define DS_CALL_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALL_END "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_CALLS_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALLS_END "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_SEP "<\xef\xbd\x9ctool\xe2\x96\x81sep\xef\xbd\x9c>"

static const fmt_spec SPECS[TOKD_TOOLCALL_N_FORMATS] = {
    [TOKD_TOOLCALL_NONE] = {.name = "none"},
    [TOKD_TOOLCALL_HERMES] = {.name = "hermes", .starts = {"<tool_call>"}, .end = "</tool_call>"},
    [TOKD_TOOLCALL_PHI4] = {.name = "phi4", .starts = {"<|tool_call|>"}, .end = "<|/tool_call|>"},
    [TOKD_TOOLCALL_NEMOTRON] = {.name = "nemotron", .starts = {"<TOOLCALL>"}, .end = "</TOOLCALL>"},
    [TOKD_TOOLCALL_LLAMA3] = {.name = "llama3", .starts = {"<|python_tag|>"}, .bare_json = true},
    [TOKD_TOOLCALL_MISTRAL] = {.name = "mistral", .starts = {"[TOOL_CALLS]"}, .head = HEAD_MISTRAL,
                               .short_ids = true},
    [TOKD_TOOLCALL_FUNCTIONARY] = {.name = "functionary", .starts = {"<function="}, .end = "</function>",
                                   .head = HEAD_FUNCTION},
    [TOKD_TOOLCALL_DEEPSEEK] = {.name = "deepseek", .starts = {DS_CALL_BEGIN}, .drops = {DS_CALLS_BEGIN, DS_CALLS_END},
                                .end = DS_CALL_END, .body = BODY_DEEPSEEK},
    [TOKD_TOOLCALL_COMMAND_R7B] = {.name = "command-r7b", .starts = {"<|START_ACTION|>"},
                                   .drops = {"<|START_RESPONSE|>", "<|END_RESPONSE|>"}, .end = "<|END_ACTION|>"},
    [TOKD_TOOLCALL_GLM45] = {.name = "glm45", .starts = {"<tool_call>"}, .end = "</tool_call>", .body = BODY_GLM},
};

typedef enum { ST_TEXT, ST_HEAD, ST_BODY } state;

struct tokd_toolcall_parser {
    const fmt_spec *spec;
    uint64_t seed;
    const char *markers[5]; /* starts then drops, NULL-terminated */
    int n_starts;
    tokd_buf pend;          /* bytes not yet released or consumed */
    state st;
    bool at_start;          /* nothing but whitespace so far */
    bool after_call;        /* only whitespace since the last call (bare JSON: and ';', dropped) */
    bool finished;
    bool marked;            /* the open block began with a start marker (not a bare '{') */
    size_t body_off;        /* where the body starts in pend */
    size_t name_off, name_len, scan; /* head: the name; head/body: where to resume scanning */
    bool in_call_id;        /* Mistral [CALL_ID]: reading the id, the name is known */
    tokd_json_scan js;
    tokd_toolcall_call *calls;
    size_t n_calls, cap_calls;
};

/* ---------- formats by name and detection ---------- */

tokd_toolcall_format tokd_toolcall_detect(const char *t) {
    if (!t) return TOKD_TOOLCALL_NONE;
    if (strstr(t, "[TOOL_CALLS]")) return TOKD_TOOLCALL_MISTRAL;
    if (strstr(t, DS_CALL_BEGIN)) return TOKD_TOOLCALL_DEEPSEEK;
    if (strstr(t, "<|START_ACTION|>")) return TOKD_TOOLCALL_COMMAND_R7B;
    if (strstr(t, "<|tool_call|>")) return TOKD_TOOLCALL_PHI4;
    if (strstr(t, "<TOOLCALL>")) return TOKD_TOOLCALL_NEMOTRON;
    if (strstr(t, "<function=")) return TOKD_TOOLCALL_FUNCTIONARY;
    if (strstr(t, "<tool_call>")) return strstr(t, "<arg_key>") ? TOKD_TOOLCALL_GLM45 : TOKD_TOOLCALL_HERMES;
    if (strstr(t, "<|python_tag|>") || (strstr(t, "<|start_header_id|>") && strstr(t, "\"parameters\"")))
        return TOKD_TOOLCALL_LLAMA3;
    return TOKD_TOOLCALL_NONE;
}

const char *tokd_toolcall_format_name(tokd_toolcall_format fmt) {
    return (unsigned)fmt < TOKD_TOOLCALL_N_FORMATS ? SPECS[fmt].name : "none";
}

int tokd_toolcall_format_from_name(const char *name) {
    for (int i = 0; name && i < TOKD_TOOLCALL_N_FORMATS; i++)
        if (strcmp(name, SPECS[i].name) == 0) return i;
    return -1;
}

/* ---------- calls ---------- */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void make_id(const tokd_toolcall_parser *p, size_t index, char out[32]) {
    static const char ALNUM[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    uint64_t st = p->seed ^ (0xD1B54A32D192ED03ull * (uint64_t)(index + 1));
    size_t at = 0, n = p->spec->short_ids ? 9 : 24;
    if (!p->spec->short_ids) {
        memcpy(out, "call_", 5);
        at = 5;
    }
    for (size_t i = 0; i < n; i++) out[at++] = ALNUM[splitmix64(&st) % 62];
    out[at] = 0;
}

static void call_free(tokd_toolcall_call *c) {
    free(c->name);
    free(c->arguments);
}

/* Takes ownership of name and args. */
static void add_call(tokd_toolcall_parser *p, char *name, char *args) {
    if (p->n_calls == p->cap_calls) {
        p->cap_calls = p->cap_calls ? 2 * p->cap_calls : 4;
        p->calls = tokd_xrealloc(p->calls, p->cap_calls * sizeof *p->calls);
    }
    tokd_toolcall_call *c = &p->calls[p->n_calls];
    make_id(p, p->n_calls, c->id);
    c->name = name;
    c->arguments = args;
    p->n_calls++;
}

static void drop_calls_from(tokd_toolcall_parser *p, size_t n) {
    while (p->n_calls > n) call_free(&p->calls[--p->n_calls]);
}

/* ---------- bodies ---------- */

static char *dup_n(const char *s, size_t n) {
    char *r = tokd_xmalloc(n + 1);
    memcpy(r, s, n);
    r[n] = 0;
    return r;
}

static void trim(const char **s, size_t *n) {
    while (*n && tokd_scan_is_space(**s)) (*s)++, (*n)--;
    while (*n && tokd_scan_is_space((*s)[*n - 1])) (*n)--;
}

/* The JSON value that is all of s (surrounding whitespace allowed), or NULL. */
static cJSON *parse_exact(const char *s, size_t n) {
    trim(&s, &n);
    if (n == 0) return NULL;
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(s, n, &end, 0);
    if (v && end != s + n) {
        cJSON_Delete(v);
        return NULL;
    }
    return v;
}

/* Arguments as OpenAI's string: objects and arrays printed compactly, strings verbatim,
 * missing or null as {}; anything else is not a call. */
static char *args_text(const cJSON *a) {
    if (!a || cJSON_IsNull(a)) return tokd_xstrdup("{}");
    if (cJSON_IsString(a)) return tokd_xstrdup(a->valuestring);
    if (cJSON_IsObject(a) || cJSON_IsArray(a)) {
        char *s = cJSON_PrintUnformatted(a);
        if (!s) return NULL;
        char *r = tokd_xstrdup(s);
        cJSON_free(s);
        return r;
    }
    return NULL;
}

static int call_from_object(tokd_toolcall_parser *p, const cJSON *o) {
    if (!cJSON_IsObject(o)) return -1;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
    if (!name) name = cJSON_GetObjectItemCaseSensitive(o, "tool_name");
    if (!cJSON_IsString(name) || !name->valuestring[0]) return -1;
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(o, "arguments");
    if (!args) args = cJSON_GetObjectItemCaseSensitive(o, "parameters");
    char *a = args_text(args);
    if (!a) return -1;
    add_call(p, tokd_xstrdup(name->valuestring), a);
    return 0;
}

/* One call object, or a non-empty array of them. */
static int body_calls(tokd_toolcall_parser *p, const char *s, size_t n) {
    cJSON *v = parse_exact(s, n);
    int rc = -1;
    if (cJSON_IsObject(v)) rc = call_from_object(p, v);
    else if (cJSON_IsArray(v) && cJSON_GetArraySize(v) > 0) {
        rc = 0;
        for (const cJSON *e = v->child; e && rc == 0; e = e->next) rc = call_from_object(p, e);
    }
    cJSON_Delete(v);
    return rc;
}

/* A call whose name is already known: the body is its arguments. */
static int body_args(tokd_toolcall_parser *p, const char *name, size_t name_len, const char *s, size_t n) {
    cJSON *v = parse_exact(s, n);
    char *a = cJSON_IsObject(v) ? args_text(v) : NULL;
    cJSON_Delete(v);
    if (!a || name_len == 0) {
        free(a);
        return -1;
    }
    add_call(p, dup_n(name, name_len), a);
    return 0;
}

static const char *find_in(const char *s, size_t n, const char *needle) {
    size_t resume;
    size_t at = tokd_scan_find(s, n, 0, needle, &resume);
    return at == (size_t)-1 ? NULL : s + at;
}

/* DeepSeek: "function<sep>name\n```json\n{...}\n```" (R1) or "name<sep>{...}" (V3.1). */
static int body_deepseek(tokd_toolcall_parser *p, const char *s, size_t n) {
    const char *sep = find_in(s, n, DS_SEP);
    if (!sep) return -1;
    const char *left = s, *right = sep + strlen(DS_SEP);
    size_t left_n = (size_t)(sep - s), right_n = (size_t)(s + n - right);
    trim(&left, &left_n);
    if (left_n == 8 && memcmp(left, "function", 8) == 0) {
        const char *nl = memchr(right, '\n', right_n);
        if (!nl) return -1;
        left = right;
        left_n = (size_t)(nl - right);
        right_n -= left_n + 1;
        right = nl + 1;
        trim(&left, &left_n);
        trim(&right, &right_n);
        if (right_n >= 7 && memcmp(right, "```json", 7) == 0) right += 7, right_n -= 7;
        else if (right_n >= 3 && memcmp(right, "```", 3) == 0) right += 3, right_n -= 3;
        if (right_n >= 3 && memcmp(right + right_n - 3, "```", 3) == 0) right_n -= 3;
    }
    return body_args(p, left, left_n, right, right_n);
}

/* One GLM argument value: JSON when it parses as JSON, else the text as a string. */
static void glm_add_arg(cJSON *obj, const char *k, size_t kn, const char *v, size_t vn) {
    char *key = dup_n(k, kn);
    cJSON *val = parse_exact(v, vn);
    if (!val) {
        char *str = dup_n(v, vn);
        val = cJSON_CreateString(str);
        free(str);
    }
    cJSON_AddItemToObject(obj, key, val);
    free(key);
}

/* GLM 4.5/4.6: "name\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>..." */
static int body_glm(tokd_toolcall_parser *p, const char *s, size_t n) {
    const char *first = find_in(s, n, "<arg_key>");
    const char *name = s;
    size_t name_n = first ? (size_t)(first - s) : n;
    trim(&name, &name_n);
    cJSON *obj = cJSON_CreateObject();
    const char *q = first;
    int rc = 0;
    while (q && rc == 0) {
        const char *end = s + n;
        const char *k = q + 9, *ke = find_in(k, (size_t)(end - k), "</arg_key>");
        const char *v = ke ? find_in(ke, (size_t)(end - ke), "<arg_value>") : NULL;
        const char *ve = v ? find_in(v, (size_t)(end - v), "</arg_value>") : NULL;
        if (!ve) {
            rc = -1;
            break;
        }
        size_t gap = (size_t)(v - ke) - 10;
        const char *g = ke + 10;
        trim(&g, &gap);
        if (gap) rc = -1;
        glm_add_arg(obj, k, (size_t)(ke - k), v + 11, (size_t)(ve - v - 11));
        const char *rest = ve + 12;
        size_t rest_n = (size_t)(end - rest);
        trim(&rest, &rest_n);
        q = rest_n ? (rest_n >= 9 && memcmp(rest, "<arg_key>", 9) == 0 ? rest : NULL) : NULL;
        if (rest_n && !q) rc = -1;
    }
    char *a = rc == 0 ? args_text(obj) : NULL;
    cJSON_Delete(obj);
    if (!a || name_n == 0 || memchr(name, '<', name_n)) {
        free(a);
        return -1;
    }
    add_call(p, dup_n(name, name_n), a);
    return 0;
}

static int parse_body(tokd_toolcall_parser *p, const char *s, size_t n) {
    if (p->name_len) return body_args(p, p->pend.data + p->name_off, p->name_len, s, n);
    switch (p->spec->body) {
    case BODY_DEEPSEEK: return body_deepseek(p, s, n);
    case BODY_GLM: return body_glm(p, s, n);
    default: return body_calls(p, s, n);
    }
}

/* ---------- the machine ---------- */

static void consume(tokd_toolcall_parser *p, size_t n) {
    memmove(p->pend.data, p->pend.data + n, p->pend.len - n);
    p->pend.len -= n;
    p->pend.data[p->pend.len] = 0;
}

static void release(tokd_toolcall_parser *p, tokd_toolcall_events *ev, size_t n) {
    if (n == 0) return;
    tokd_buf_append(&ev->content, p->pend.data, n);
    consume(p, n);
    p->at_start = false;
    p->after_call = false;
}

/* A block starts at offset 0 (perhaps with whitespace before its marker); its body at body_off.
 * marked: it opened with a start marker (else with a bare '{'). */
static void begin_block(tokd_toolcall_parser *p, size_t body_off, bool marked) {
    p->marked = marked;
    p->body_off = p->scan = body_off;
    p->name_off = p->name_len = 0;
    p->in_call_id = false;
    memset(&p->js, 0, sizeof p->js);
    p->st = p->spec->head != HEAD_NONE ? ST_HEAD : ST_BODY;
}

/* The first n bytes were not a call after all: they are content. */
static void fail_block(tokd_toolcall_parser *p, tokd_toolcall_events *ev, size_t n) {
    release(p, ev, n);
    p->st = ST_TEXT;
}

static void close_block(tokd_toolcall_parser *p, tokd_toolcall_events *ev, size_t body_end, size_t block_end) {
    size_t before = p->n_calls;
    if (parse_body(p, p->pend.data + p->body_off, body_end - p->body_off) != 0) {
        drop_calls_from(p, before);
        fail_block(p, ev, block_end);
        return;
    }
    consume(p, block_end);
    p->st = ST_TEXT;
    p->at_start = false;
    p->after_call = true;
}

/* Bare JSON calls: drop whitespace and ';' after a call. true if anything went. */
static bool skip_after_call(tokd_toolcall_parser *p) {
    const char *s = p->pend.data;
    size_t i = 0;
    while (i < p->pend.len && (tokd_scan_is_space(s[i]) || (p->spec->bare_json && s[i] == ';'))) i++;
    consume(p, i);
    /* Only a '{' that may open the next bare call keeps the state. */
    if (p->pend.len > 0 && !(p->spec->bare_json && p->pend.data[0] == '{')) p->after_call = false;
    return i > 0;
}

static bool step_text(tokd_toolcall_parser *p, tokd_toolcall_events *ev, bool eof) {
    if (p->after_call && p->spec->bare_json && skip_after_call(p)) return true;
    const char *s = p->pend.data;
    size_t n = p->pend.len, ws_from = 0;
    for (size_t i = 0; i < n; i++) {
        if (p->spec->bare_json && s[i] == '{' && (p->at_start || p->after_call) && ws_from == 0) {
            begin_block(p, 0, false); /* the JSON scan skips the whitespace */
            return true;
        }
        int which, r = tokd_scan_markers(s + i, n - i, p->markers, &which);
        if (r == TOKD_SCAN_PARTIAL && !eof) {
            release(p, ev, ws_from);
            return ws_from > 0;
        }
        if (which >= 0) {
            size_t ml = strlen(p->markers[which]);
            release(p, ev, ws_from);
            /* The whitespace before goes with the block: dropped if it is a call, kept if not. */
            if (which < p->n_starts) begin_block(p, i - ws_from + ml, true);
            else consume(p, i - ws_from + ml);
            return true;
        }
        if (!tokd_scan_is_space(s[i])) ws_from = i + 1;
    }
    if (eof && p->after_call && ws_from == 0) consume(p, n); /* whitespace after the last call */
    else release(p, ev, eof ? n : ws_from);
    return false;
}

static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
}

/* Mistral after [TOOL_CALLS]: '[' opens a JSON array of calls; a name runs to [ARGS] (perhaps
 * with [CALL_ID]id between). Returns true on progress. */
static bool step_head_mistral(tokd_toolcall_parser *p, tokd_toolcall_events *ev, bool eof) {
    static const char *const TAGS[] = {"[ARGS]", "[CALL_ID]", NULL};
    const char *s = p->pend.data;
    size_t n = p->pend.len, q = p->scan;
    for (; q < n; q++) {
        char c = s[q];
        bool started = p->name_off != 0;
        if (!started && tokd_scan_is_space(c)) continue;
        if (!started && c == '[') {
            p->body_off = q;
            p->st = ST_BODY;
            return true;
        }
        if (is_name_char(c)) {
            if (!started) p->name_off = q;
            continue;
        }
        int which, r = c == '[' && started ? tokd_scan_markers(s + q, n - q, TAGS, &which) : TOKD_SCAN_NONE;
        if (r == TOKD_SCAN_PARTIAL && !eof) break;
        if (r != TOKD_SCAN_MATCH || (which == 1 && p->in_call_id)) {
            fail_block(p, ev, q);
            return true;
        }
        if (!p->in_call_id) p->name_len = q - p->name_off;
        if (which == 1) {
            p->in_call_id = true;
            q += strlen(TAGS[1]) - 1;
            continue;
        }
        p->body_off = p->scan = q + strlen(TAGS[0]);
        p->st = ST_BODY;
        return true;
    }
    p->scan = q;
    if (eof) fail_block(p, ev, n);
    return eof;
}

/* functionary: the name runs to '>'. */
static bool step_head_function(tokd_toolcall_parser *p, tokd_toolcall_events *ev, bool eof) {
    const char *s = p->pend.data;
    size_t n = p->pend.len, q = p->scan;
    for (; q < n && is_name_char(s[q]); q++) {}
    p->scan = q;
    if (q == n) {
        if (eof) fail_block(p, ev, n);
        return eof;
    }
    if (s[q] != '>' || q == p->body_off) {
        fail_block(p, ev, q);
        return true;
    }
    p->name_off = p->body_off;
    p->name_len = q - p->body_off;
    p->body_off = p->scan = q + 1;
    p->st = ST_BODY;
    return true;
}

static bool step_body(tokd_toolcall_parser *p, tokd_toolcall_events *ev, bool eof) {
    const char *s = p->pend.data;
    size_t n = p->pend.len;
    if (p->spec->end) {
        size_t at = tokd_scan_find(s, n, p->scan, p->spec->end, &p->scan);
        if (at != (size_t)-1) close_block(p, ev, at, at + strlen(p->spec->end));
        else if (eof) close_block(p, ev, n, n); /* unterminated: counts if it parses */
        return at != (size_t)-1 || eof;
    }
    size_t end = 0;
    int r = tokd_json_scan_run(&p->js, s + p->body_off, n - p->body_off, &end);
    if (r == TOKD_JSON_DONE) close_block(p, ev, p->body_off + end, p->body_off + end);
    else if (r == TOKD_JSON_FAIL) fail_block(p, ev, p->body_off + end);
    else if (eof) fail_block(p, ev, n);
    return r != TOKD_JSON_MORE || eof;
}

static void run(tokd_toolcall_parser *p, tokd_toolcall_events *ev, bool eof) {
    for (;;) {
        bool progress;
        if (p->st == ST_TEXT) progress = step_text(p, ev, eof);
        else if (p->st == ST_HEAD)
            progress = p->spec->head == HEAD_MISTRAL ? step_head_mistral(p, ev, eof) : step_head_function(p, ev, eof);
        else progress = step_body(p, ev, eof);
        if (!progress) return;
    }
}

/* ---------- public ---------- */

tokd_toolcall_parser *tokd_toolcall_parser_new(tokd_toolcall_format fmt, uint64_t id_seed) {
    tokd_toolcall_parser *p = tokd_xcalloc(1, sizeof *p);
    p->spec = &SPECS[(unsigned)fmt < TOKD_TOOLCALL_N_FORMATS ? fmt : TOKD_TOOLCALL_NONE];
    p->seed = id_seed;
    p->at_start = true;
    int k = 0;
    for (int i = 0; i < 2 && p->spec->starts[i]; i++) p->markers[k++] = p->spec->starts[i];
    p->n_starts = k;
    for (int i = 0; i < 3 && p->spec->drops[i]; i++) p->markers[k++] = p->spec->drops[i];
    p->markers[k] = NULL;
    tokd_buf_append(&p->pend, "", 0);
    return p;
}

void tokd_toolcall_parser_free(tokd_toolcall_parser *p) {
    if (!p) return;
    drop_calls_from(p, 0);
    free(p->calls);
    tokd_buf_free(&p->pend);
    free(p);
}

static void events_begin(tokd_toolcall_events *ev) {
    tokd_buf_clear(&ev->content);
    ev->calls = NULL;
    ev->n_calls = ev->first_index = 0;
}

static void events_end(const tokd_toolcall_parser *p, tokd_toolcall_events *ev, size_t first) {
    ev->first_index = first;
    ev->n_calls = p->n_calls - first;
    ev->calls = ev->n_calls ? p->calls + first : NULL;
}

void tokd_toolcall_push(tokd_toolcall_parser *p, const char *text, size_t len, tokd_toolcall_events *ev) {
    events_begin(ev);
    if (p->finished) return;
    size_t first = p->n_calls;
    if (p->spec == &SPECS[TOKD_TOOLCALL_NONE]) {
        tokd_buf_append(&ev->content, text, len);
    } else {
        tokd_buf_append(&p->pend, text, len);
        run(p, ev, false);
    }
    events_end(p, ev, first);
}

/* The end of the output. cut: it was cut short, so a block still open after a start marker
 * is dropped (it may hold only part of its arguments) instead of parsed. */
static bool finish(tokd_toolcall_parser *p, tokd_toolcall_events *ev, bool cut) {
    events_begin(ev);
    size_t first = p->n_calls;
    if (!p->finished) {
        if (cut) {
            run(p, ev, false);
            if (p->st != ST_TEXT && p->marked) { /* the open block is all of pend */
                p->pend.len = 0;
                p->pend.data[0] = 0;
                p->st = ST_TEXT;
            }
        }
        run(p, ev, true);
    }
    p->finished = true;
    events_end(p, ev, first);
    return p->n_calls > 0;
}

bool tokd_toolcall_finish(tokd_toolcall_parser *p, tokd_toolcall_events *ev) { return finish(p, ev, false); }

bool tokd_toolcall_finish_cut(tokd_toolcall_parser *p, tokd_toolcall_events *ev) { return finish(p, ev, true); }

const tokd_toolcall_call *tokd_toolcall_calls(const tokd_toolcall_parser *p, size_t *n) {
    *n = p->n_calls;
    return p->calls;
}

void tokd_toolcall_events_free(tokd_toolcall_events *ev) {
    tokd_buf_free(&ev->content);
    memset(ev, 0, sizeof *ev);
}

void tokd_toolcall_parse(tokd_toolcall_format fmt, uint64_t id_seed, const char *text, size_t len,
                         tokd_toolcall_result *out) {
    memset(out, 0, sizeof *out);
    tokd_toolcall_parser *p = tokd_toolcall_parser_new(fmt, id_seed);
    tokd_toolcall_events ev = {0};
    tokd_toolcall_push(p, text, len, &ev);
    tokd_buf_append(&out->content, ev.content.data ? ev.content.data : "", ev.content.len);
    tokd_toolcall_finish(p, &ev);
    tokd_buf_append(&out->content, ev.content.data ? ev.content.data : "", ev.content.len);
    tokd_toolcall_events_free(&ev);
    out->calls = p->calls;
    out->n_calls = p->n_calls;
    p->calls = NULL;
    p->n_calls = p->cap_calls = 0;
    tokd_toolcall_parser_free(p);
}

void tokd_toolcall_result_free(tokd_toolcall_result *r) {
    for (size_t i = 0; i < r->n_calls; i++) call_free(&r->calls[i]);
    free(r->calls);
    tokd_buf_free(&r->content);
    memset(r, 0, sizeof *r);
}

/* index < 0: the message form, without "index". */
static cJSON *call_json(const tokd_toolcall_call *c, long index) {
    cJSON *o = cJSON_CreateObject();
    if (index >= 0) cJSON_AddNumberToObject(o, "index", (double)index);
    cJSON_AddStringToObject(o, "id", c->id);
    cJSON_AddStringToObject(o, "type", "function");
    cJSON *f = cJSON_AddObjectToObject(o, "function");
    cJSON_AddStringToObject(f, "name", c->name);
    cJSON_AddStringToObject(f, "arguments", c->arguments);
    return o;
}

cJSON *tokd_toolcall_calls_json(const tokd_toolcall_call *calls, size_t n) {
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, call_json(&calls[i], -1));
    return a;
}

cJSON *tokd_toolcall_delta_json(const tokd_toolcall_call *call, size_t index) {
    return call_json(call, (long)index);
}
