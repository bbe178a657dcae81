/* cmd_imatrix.c — `tokd imatrix [-m MODEL -f TEXT] [--in-file F]... -o OUT
 * [--output-format gguf|dat] [-c N] [-b N] [--chunks N] [--chunk N] [--process-output]
 * [--no-ppl] [--parse-special] [--save-frequency N] [-t N]`: an importance matrix of MODEL
 * over the calibration text in TEXT (src/imatrix_collect.h), added to the matrices of any
 * --in-file (either format; src/imatrix.h), written for `tokd quantize --imatrix` (and
 * llama-quantize). With --in-file and no model it combines or converts files only. As
 * llama-imatrix since July 2025 the file is GGUF unless --output-format dat asks for the
 * legacy one, with a warning when a GGUF file's name does not end in .gguf.
 *
 * -c: tokens per chunk (default 512; also the chunk size that a legacy --in-file's counts
 * are scaled by, as llama-imatrix's, and the one the file records; without -c and a
 * model, the first GGUF input's, so that a conversion keeps it). -b: tokens per forward
 * batch (default: the chunk). As llama-imatrix's options of those names: --chunks N at
 * most N chunks, --chunk N skips the first N, --process-output includes output.weight,
 * --parse-special reads special tokens written in the text as such, --save-frequency N
 * writes the matrix so far to OUT.at_<chunks> every N chunks. As llama-imatrix it also
 * reports the model's perplexity on the text (each chunk's second half), chunk by chunk
 * and at the end; --no-ppl leaves it out (and the output product with it).
 * `tokd imatrix --show-statistics --in-file F` prints F's statistics instead, per tensor
 * and per layer, as llama-imatrix's option of that name (src/imatrix_stats.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "imatrix_collect.h"
#include "imatrix_stats.h"

#define MAX_IN_FILES 64

static int parse_format(const char *cmd, const char *opt, const char *val, void *dst) {
    int *fmt = dst;
    if (!strcmp(val, "gguf")) *fmt = TOKD_IMATRIX_GGUF;
    else if (!strcmp(val, "dat")) *fmt = TOKD_IMATRIX_DAT;
    else {
        fprintf(stderr, "tokd %s: %s takes gguf or dat, not '%s'\n", cmd, opt, val);
        return -1;
    }
    return 0;
}

/* What a save along the way needs: the inputs' matrix, the output and its format. */
typedef struct {
    const tokd_imatrix *inputs;
    const char *out_path, *text_path;
    tokd_imatrix_format fmt;
    int32_t chunk_size, every;
} saver;

/* The matrix so far: the inputs' and the collected one's. */
static tokd_imatrix *so_far(const tokd_imatrix *inputs, const tokd_imatrix_collector *c, const char *text_path,
                            int chunks, int32_t chunk_size) {
    tokd_imatrix *all = tokd_imatrix_new(), *im = tokd_imatrix_collector_result(c, text_path, chunks);
    tokd_err err;
    tokd_imatrix_combine(all, inputs, chunk_size, &err); /* token counts already: cannot fail */
    if (tokd_imatrix_combine(all, im, chunk_size, &err)) {
        fprintf(stderr, "tokd imatrix: the input files and the computed matrix: %s\n", err.msg);
        tokd_imatrix_free(all);
        all = NULL;
    }
    tokd_imatrix_free(im);
    return all;
}

/* --save-frequency: OUT.at_N every `every` chunks, as llama-imatrix names them. */
static void save_along(void *user, const tokd_imatrix_collector *c, int chunks) {
    const saver *sv = user;
    if (sv->every <= 0 || chunks % sv->every) return;
    tokd_imatrix *all = so_far(sv->inputs, c, sv->text_path, chunks, sv->chunk_size);
    tokd_buf path = {0};
    tokd_buf_appendf(&path, "%s.at_%d", sv->out_path, chunks);
    tokd_err err;
    if (all && tokd_imatrix_write(all, path.data, sv->fmt, sv->chunk_size, &err))
        fprintf(stderr, "tokd imatrix: %s\n", err.msg);
    else if (all)
        fprintf(stderr, "tokd imatrix: saved %s\n", path.data);
    tokd_buf_free(&path);
    tokd_imatrix_free(all);
}

/* Whether every input entry named after one of the model's matrices has that matrix's
 * size (its columns, times its experts), so that another model's matrix is refused
 * before the run rather than where the two meet (the first save, or the end). Entries
 * the model has no matrix for are carried over as they are, as llama-imatrix does. */
static bool inputs_fit(const tokd_model *m, const tokd_imatrix *in, const char *model_path) {
    for (size_t i = 0; i < in->n_entries; i++) {
        const tokd_imatrix_entry *e = &in->entries[i];
        const gguf_tensor *t = gguf_find_tensor(m->gguf, e->name);
        if (!t) continue;
        const uint64_t want = t->ne[0] * (t->n_dims >= 3 ? t->ne[2] : 1);
        if ((uint64_t)e->n != want) {
            fprintf(stderr,
                    "tokd imatrix: the input matrices' %s holds %lld values, where %s's matrix takes %llu "
                    "(a matrix of another model?)\n",
                    e->name, (long long)e->n, model_path, (unsigned long long)want);
            return false;
        }
    }
    return true;
}

/* The matrix of MODEL over TEXT added to the inputs', or NULL after printing why. */
static tokd_imatrix *compute(const char *model_path, const char *text_path, tokd_imatrix_params *p,
                             bool process_output, bool with_ppl, saver *sv) {
    tokd_err err;
    size_t len;
    char *text = tokd_read_file(text_path, &len);
    if (!text) {
        fprintf(stderr, "tokd imatrix: cannot read '%s'\n", text_path);
        return NULL;
    }
    tokd_model *m = tokd_model_load(model_path, &err);
    if (!m) {
        fprintf(stderr, "tokd imatrix: %s\n", err.msg);
        free(text);
        return NULL;
    }
    if (!inputs_fit(m, sv->inputs, model_path)) {
        tokd_model_free(m);
        free(text);
        return NULL;
    }
    tokd_imatrix_collector *c = tokd_imatrix_collector_new(m, process_output);
    tokd_imatrix_ppl ppl;
    p->chunk_done = save_along;
    p->user = sv;
    int chunks = tokd_imatrix_compute(m, text, len, p, c, with_ppl ? &ppl : NULL, stderr, &err);
    tokd_imatrix *im = NULL;
    if (chunks < 0)
        fprintf(stderr, "tokd imatrix: %s\n", err.msg);
    else {
        im = so_far(sv->inputs, c, text_path, chunks, sv->chunk_size);
        fprintf(stderr, "tokd imatrix: %lld tokens in %d chunks\n", (long long)tokd_imatrix_collector_tokens(c), chunks);
        double pp, se;
        if (with_ppl && tokd_imatrix_ppl_estimate(&ppl, &pp, &se))
            fprintf(stderr, "tokd imatrix: PPL %.4f +/- %.5f over %lld positions\n", pp, se, (long long)ppl.n);
    }
    tokd_imatrix_collector_free(c);
    tokd_model_free(m);
    free(text);
    return im;
}

/* --show-statistics: the report of imatrix_stats.h, in llama-imatrix's layout. */
static int show_statistics(const char *path) {
    tokd_err err;
    tokd_imatrix *im = tokd_imatrix_load(path, &err);
    if (!im) {
        fprintf(stderr, "tokd imatrix: %s\n", err.msg);
        return 1;
    }
    tokd_imatrix_report r;
    tokd_imatrix_report_make(im, &r);
    if (!r.n_entries) {
        fprintf(stderr, "tokd imatrix: %s: no entry has a counted column\n", path);
        tokd_imatrix_report_free(&r);
        tokd_imatrix_free(im);
        return 1;
    }
    printf("\nComputing tensor statistics for %s (%zu tensors)\n", path, r.n_entries);
    printf("\n%6s\t%18s\t%13s\t%8s\t%8s\t%7s\t%15s\t%13s\t%11s\t%8s\t%5s\t%10s\n", "Layer", "Tensor", "Σ E[Act²]", "Min",
           "Max", "μ", "σ", "N", "H Norm", "H", "ZD", "CosSim");
    for (int i = 0; i < 171; i++) putchar('=');
    putchar('\n');
    for (size_t i = 0; i < r.n_entries; i++) {
        const tokd_imatrix_stat *s = &r.entries[i];
        char layer[16];
        if (s->layer >= 0) snprintf(layer, sizeof layer, "%d", s->layer);
        else snprintf(layer, sizeof layer, "-");
        const double h_norm = s->n > 1 ? 100.0 * s->entropy / log2((double)s->n) : 0;
        printf("%5s\t%-20.*s\t%11.4f\t%10.4f\t%10.4f\t%8.4f\t%8.4f\t%7lld\t%10.2f%%\t%10.4f\t%6.2f%%\t%10.4f\n", layer,
               s->tensor_len, s->tensor, s->sum, s->min, s->max, s->mean, s->std, (long long)s->n, h_norm, s->entropy,
               100.0 * s->zd, s->cossim);
    }
    printf("\nComputing layer statistics (%zu layers)\n", r.n_layers);
    printf("\n%6s\t%13s\t%6s\t%11s\n", "Layer", "Σ E[Act²]", "ZD", "CosSim");
    printf("============================================\n");
    for (size_t i = 0; i < r.n_layers; i++)
        printf("%5d\t%11.4f\t%6.2f%%\t%11.4f\n", r.layers[i].layer, r.layers[i].sum, 100.0 * r.layers[i].zd,
               r.layers[i].cossim);
    printf("\n");
    tokd_imatrix_report_free(&r);
    tokd_imatrix_free(im);
    return 0;
}

int cmd_imatrix(int argc, char **argv) {
    const char *model_path = NULL, *text_path = NULL, *out_path = NULL, *in_files[MAX_IN_FILES];
    long n_threads = 0, n_ctx = 0, n_batch = 0, n_chunks = 0, first_chunk = 0;
    int n_in = 0, format = -1;
    long save_every = 0;
    bool process_output = false, no_ppl = false, parse_special = false, statistics = false;
    const cli_option opts[] = {
        CLI_MODEL(&model_path),
        CLI_STR("-f", "--file", &text_path, "TEXT", "the calibration text file"),
        CLI_STR("-o", "--output", &out_path, "OUT", "the matrix file to write"),
        CLI_LIST("--in-file", NULL, in_files, MAX_IN_FILES, &n_in, "input matrices", "FILE", "an earlier matrix (GGUF or .dat) to add in"),
        CLI_CALL("--output-format", NULL, parse_format, &format, "gguf|dat", "the output's form (default gguf; dat: the legacy imatrix.dat)"),
        CLI_INT("-c", "--ctx-size", &n_ctx, 16, 1 << 20, "N", "tokens per chunk (default 512, or the input matrix's)"),
        CLI_INT("-b", "--batch-size", &n_batch, 0, 1 << 20, "N", "tokens per batch within a chunk (default: the chunk)"),
        CLI_INT("--chunks", NULL, &n_chunks, 0, 1 << 30, "N", "run at most N chunks (default 0: all)"),
        CLI_INT("--chunk", NULL, &first_chunk, 0, 1 << 30, "N", "skip the text's first N chunks"),
        CLI_FLAG("--process-output", NULL, &process_output, "include output.weight"),
        CLI_FLAG("--no-ppl", NULL, &no_ppl, "do not compute the perplexity on the text"),
        CLI_FLAG("--parse-special", NULL, &parse_special, "read special tokens written in the text as such"),
        CLI_INT("--save-frequency", NULL, &save_every, 0, 1 << 30, "N", "also write OUT.at_<chunks> every N chunks (default 0: never)"),
        CLI_FLAG("--show-statistics", NULL, &statistics, "print per-tensor and per-layer statistics of --in-file"),
        CLI_THREADS(&n_threads),
        CLI_END,
    };
    int parsed = cli_parse("imatrix", argc, argv, opts);
    if (parsed) return cli_exit_code(parsed);
    if (statistics) {
        if (n_in != 1 || model_path || text_path || out_path) {
            fprintf(stderr, "tokd imatrix: --show-statistics takes one --in-file and nothing else to do\n");
            return 2;
        }
        return show_statistics(in_files[0]);
    }
    if (!out_path || (!model_path && !text_path && !n_in) || !model_path != !text_path) {
        fprintf(stderr, "tokd imatrix: need -m MODEL -f TEXT (or --in-file FILE) and -o OUT\n");
        return 2;
    }
    tokd_err err;
    tokd_imatrix *all = tokd_imatrix_new(), *in[MAX_IN_FILES] = {0};
    int rc = 0;
    for (int i = 0; i < n_in && !rc; i++) {
        in[i] = tokd_imatrix_load(in_files[i], &err);
        if (!in[i]) fprintf(stderr, "tokd imatrix: %s\n", err.msg);
        rc = !in[i];
        if (!n_ctx && !model_path && in[i] && in[i]->chunk_size > 0) n_ctx = in[i]->chunk_size;
    }
    if (!n_ctx) n_ctx = 512;
    for (int i = 0; i < n_in && !rc; i++) { /* first, as llama-imatrix: their datasets come first */
        rc = tokd_imatrix_combine(all, in[i], (int32_t)n_ctx, &err);
        if (rc) fprintf(stderr, "tokd imatrix: %s: %s\n", in_files[i], err.msg);
    }
    for (int i = 0; i < n_in; i++) tokd_imatrix_free(in[i]);
    const tokd_imatrix_format fmt = format == TOKD_IMATRIX_DAT ? TOKD_IMATRIX_DAT : TOKD_IMATRIX_GGUF;
    if (!rc && model_path) {
        tokd_imatrix_params p = {.n_ctx = (int32_t)n_ctx, .n_batch = (int32_t)n_batch, .n_chunks = (int32_t)n_chunks,
                                 .n_threads = (int32_t)n_threads, .first_chunk = (int32_t)first_chunk,
                                 .parse_special = parse_special};
        saver sv = {all, out_path, text_path, fmt, (int32_t)n_ctx, (int32_t)save_every};
        tokd_imatrix *im = compute(model_path, text_path, &p, process_output, !no_ppl, &sv);
        tokd_imatrix_free(all);
        all = im;
        rc = !im;
    }
    if (!rc) {
        const size_t ol = strlen(out_path);
        if (format < 0 && (ol < 5 || strcmp(out_path + ol - 5, ".gguf")))
            fprintf(stderr, "tokd imatrix: writing GGUF to a name without .gguf; --output-format dat gives the legacy file\n");
        rc = tokd_imatrix_write(all, out_path, fmt, (int32_t)n_ctx, &err);
        if (rc)
            fprintf(stderr, "tokd imatrix: %s\n", err.msg);
        else
            fprintf(stderr, "tokd imatrix: wrote %s (%s, %zu entries, %d chunks)\n", out_path,
                    fmt == TOKD_IMATRIX_DAT ? "legacy format" : "GGUF", all->n_entries, all->chunks);
    }
    tokd_imatrix_free(all);
    return rc ? 1 : 0;
}
