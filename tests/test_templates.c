/* test_templates.c — every chat template in ../shared/templates rendered with every fixture
 * must match Python jinja2's output byte for byte (or fail where jinja2 failed).
 * The context is the fixture (minus its name) plus bos_token/eos_token, as the golden
 * files were made; strftime_now's clock is pinned with TOKD_NOW. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"
#include "t.h"

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* print where two outputs first differ, with some context */
static void show_diff(const char *got, size_t glen, const char *exp, size_t elen) {
    size_t i = 0;
    while (i < glen && i < elen && got[i] == exp[i]) i++;
    size_t from = i > 40 ? i - 40 : 0;
    fprintf(stderr, "    first difference at byte %zu\n    got: ", i);
    for (size_t k = from; k < glen && k < i + 40; k++) fputc(got[k] == '\n' ? '|' : got[k], stderr);
    fprintf(stderr, "\n    exp: ");
    for (size_t k = from; k < elen && k < i + 40; k++) fputc(exp[k] == '\n' ? '|' : exp[k], stderr);
    fprintf(stderr, "\n    (newlines shown as |)\n");
}

int main(void) {
    setenv("TOKD_NOW", "2026-01-15T09:30:00", 1);
    char dir[1024], path[2048];
    snprintf(dir, sizeof dir, "%s/templates", t_shared());
    snprintf(path, sizeof path, "%s/fixtures.json", dir);
    char *fx_text = tokd_read_file(path, NULL);
    CHECK(fx_text != NULL, "cannot read %s", path);
    if (!fx_text) T_DONE();
    cJSON *fixtures = cJSON_Parse(fx_text);
    CHECK(cJSON_IsArray(fixtures), "fixtures.json is not an array");

    DIR *d = opendir(dir);
    CHECK(d != NULL, "cannot open %s", dir);
    if (!d) T_DONE();
    char *names[256];
    size_t nn = 0;
    struct dirent *de;
    while ((de = readdir(d)) && nn < 256) {
        size_t l = strlen(de->d_name);
        if (l > 6 && !strcmp(de->d_name + l - 6, ".jinja")) names[nn++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, nn, sizeof *names, cmp_names);
    CHECK(nn >= 20, "expected at least 20 templates in %s, found %zu", dir, nn);

    int cases = 0, matched = 0;
    for (size_t ti = 0; ti < nn; ti++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[ti]);
        size_t tlen;
        char *src = tokd_read_file(path, &tlen);
        snprintf(path, sizeof path, "%s/expected/%s.expected.json", dir, names[ti]);
        char *exp_text = tokd_read_file(path, NULL);
        CHECK(src && exp_text, "cannot read template or expected file for %s", names[ti]);
        if (!src || !exp_text) {
            free(src);
            free(exp_text);
            continue;
        }
        cJSON *expected = cJSON_Parse(exp_text);
        cJSON *results = cJSON_GetObjectItemCaseSensitive(expected, "results");
        tokd_err err = {{0}};
        jinja_template *t = jinja_parse(src, tlen, &err);
        CHECK(t != NULL, "%s: parse failed: %s", names[ti], err.msg);

        cJSON *fx;
        cJSON_ArrayForEach(fx, fixtures) {
            const char *fname = cJSON_GetObjectItemCaseSensitive(fx, "name")->valuestring;
            cJSON *want = NULL, *r;
            cJSON_ArrayForEach(r, results) {
                cJSON *fn = cJSON_GetObjectItemCaseSensitive(r, "fixture");
                if (cJSON_IsString(fn) && !strcmp(fn->valuestring, fname)) want = r;
            }
            CHECK(want != NULL, "%s: no expected result for fixture %s", names[ti], fname);
            if (!want || !t) continue;
            cases++;
            cJSON *ctx = cJSON_Duplicate(fx, 1);
            cJSON_DeleteItemFromObjectCaseSensitive(ctx, "name");
            cJSON_AddStringToObject(ctx, "bos_token", "<|BOS|>");
            cJSON_AddStringToObject(ctx, "eos_token", "<|EOS|>");
            char *ctx_json = cJSON_PrintUnformatted(ctx);
            char *out = NULL;
            size_t olen = 0;
            int rc = jinja_render_json(t, ctx_json, strlen(ctx_json), NULL, &out, &olen, &err);
            cJSON *wout = cJSON_GetObjectItemCaseSensitive(want, "output");
            cJSON *werr = cJSON_GetObjectItemCaseSensitive(want, "error");
            if (werr) {
                CHECK(rc != 0, "%s / %s: expected an error (%s), got success", names[ti], fname, werr->valuestring);
                if (rc != 0) matched++;
            } else {
                const char *e = wout->valuestring;
                size_t elen = strlen(e);
                bool ok = rc == 0 && olen == elen && memcmp(out, e, elen) == 0;
                CHECK(ok, "%s / %s: %s", names[ti], fname, rc ? err.msg : "output differs");
                if (ok)
                    matched++;
                else if (rc == 0)
                    show_diff(out, olen, e, elen);
            }
            free(out);
            free(ctx_json);
            cJSON_Delete(ctx);
        }
        jinja_free(t);
        cJSON_Delete(expected);
        free(src);
        free(exp_text);
        free(names[ti]);
    }
    printf("templates: %d of %d template x fixture cases match\n", matched, cases);
    CHECK(cases >= 100, "expected at least 100 cases, ran %d", cases);
    cJSON_Delete(fixtures);
    free(fx_text);
    T_DONE();
}
