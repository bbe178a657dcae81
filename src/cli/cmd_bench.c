/* cmd_bench.c — `tokd bench -m MODEL [-p 512] [-n 128] [-d 0] [-s 1] [-r 3] [-t N] [--json]
 * [--no-machine] [--bw-mib N] [--tg-probe WHEN] [--profile N]`: prompt processing (pp) and
 * text generation (tg) speed with llama-bench's definitions, next to the machine's measured memory bandwidth and
 * arithmetic peak, and with two threads or more the handoff between them after each tg
 * run (see src/bench.h). Text on stdout, or one JSON object per line with
 * --json. -p, -n, -d, -s and -t take comma-separated lists (-t 1,2 -p 128,512), as
 * llama-bench's do, and every combination is run (cmd_bench below; text then ends with
 * one markdown table of every row, as llama-bench prints). -s N runs N
 * sequences together (llama-batched-bench's parallel sequences; rows "tg128 x4").
 * -p 0 or -n 0 skips that test; -d N runs both after N positions already in the cache
 * (shown as "pp512 @ d2048", as llama-bench does); --no-machine skips the bandwidth and
 * peak measurements; --bw-mib N sets the bandwidth buffer (default 512 MiB; tests use a
 * small one); --tg-probe between|after|auto says when tg's bandwidth is measured (between
 * each run's steps, or right after it; src/bench.h says why and when auto picks which);
 * --profile N runs N more decode steps and shows where their time went, by stage and by
 * thread (src/kernels/step_profile.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

static void json_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') printf("\\%c", ch);
        else if (ch < 0x20) printf("\\u%04x", ch);
        else putchar(ch);
    }
    putchar('"');
}

/* "key":{"median":..,"min":..,"max":..,"samples":[..]} with every value times scale */
static void json_stat_scaled(const char *key, const tokd_bench_stat *s, double scale) {
    printf(",\"%s\":{\"median\":%.4f,\"min\":%.4f,\"max\":%.4f,\"samples\":[", key, s->median * scale, s->min * scale,
           s->max * scale);
    for (int i = 0; i < s->n; i++) printf("%s%.4f", i ? "," : "", s->samples[i] * scale);
    printf("]}");
}

static void json_stat(const char *key, int n_tokens, const tokd_bench_stat *s) {
    printf("\"%s\":{\"n_tokens\":%d,\"runs\":%d,\"median_tok_s\":%.3f,\"min_tok_s\":%.3f,\"max_tok_s\":%.3f,\"samples\":[", key,
           n_tokens, s->n, s->median, s->min, s->max);
    for (int i = 0; i < s->n; i++) printf("%s%.3f", i ? "," : "", s->samples[i]);
    printf("]}");
}

/* The profiled steps (--profile): per stage, its part of a step, and for decode products
 * the regions a step, the caller's preparation and the threads' tail (us a region), and
 * each thread's read rate in its shares; for attention in a one-region decode step
 * (decode_step.c), the threads' spread at the barrier after it (us a layer). */
static int profile_threads(const tokd_bench_result *r) {
    int n = r->n_threads < TOKD_PROFILE_MAX_THREADS ? r->n_threads : TOKD_PROFILE_MAX_THREADS;
    return n > 0 ? n : 1;
}
static void print_profile(const tokd_bench_result *r, int depth, bool json) {
    const tokd_step_profile *pr = &r->profile;
    const double steps = pr->steps ? (double)pr->steps : 1, hz = r->profile_tsc_hz > 0 ? r->profile_tsc_hz : 1;
    uint64_t total = 0;
    for (int s = 0; s < TOKD_STAGE_COUNT; s++) total += pr->stage_cycles[s];
    const int nt = profile_threads(r);
    if (json) {
        printf(",\"profile\":{\"steps\":%llu,\"step_ms\":%.4f,\"tsc_ghz\":%.4f,\"stages\":[", (unsigned long long)pr->steps,
               r->profile_step_s * 1e3, hz / 1e9);
    } else {
        printf("profile:   %llu decode steps from position %d, %.3f ms a step (TSC %.3f GHz)\n", (unsigned long long)pr->steps,
               depth, r->profile_step_s * 1e3, hz / 1e9);
        printf("           %-10s %7s %8s %8s %8s  %s\n", "stage", "% step", "regions", "prep us", "tail us", "GB/s in shares, by thread");
    }
    for (int s = 0; s < TOKD_STAGE_COUNT; s++) {
        const double part = total ? (double)pr->stage_cycles[s] / (double)total : 0;
        const double regions = (double)pr->regions[s];
        const double prep_us = regions > 0 ? pr->prep_cycles[s] / regions / hz * 1e6 : 0;
        const double tail_us = regions > 0 ? pr->tail_cycles[s] / regions / hz * 1e6 : 0;
        /* a stage with a barrier but no products (attention) */
        const double wait_us = regions == 0 && pr->tails[s] ? pr->tail_cycles[s] / (double)pr->tails[s] / hz * 1e6 : -1;
        double gb_s[TOKD_PROFILE_MAX_THREADS];
        for (int t = 0; t < nt; t++) gb_s[t] = pr->share_cycles[t][s] ? pr->share_bytes[t][s] / (pr->share_cycles[t][s] / hz) / 1e9 : 0;
        if (json) {
            printf("%s{\"stage\":\"%s\",\"share_of_step\":%.5f,\"regions_per_step\":%.2f", s ? "," : "", tokd_stage_name(s), part,
                   regions / steps);
            if (regions > 0) {
                printf(",\"prep_us\":%.3f,\"tail_us\":%.3f,\"thread_gb_s\":[", prep_us, tail_us);
                for (int t = 0; t < nt; t++) printf("%s%.3f", t ? "," : "", gb_s[t]);
                printf("],\"thread_bytes_per_step\":[");
                for (int t = 0; t < nt; t++) printf("%s%.0f", t ? "," : "", pr->share_bytes[t][s] / steps);
                putchar(']');
            } else if (wait_us >= 0) {
                printf(",\"tail_us\":%.3f", wait_us);
            }
            putchar('}');
            continue;
        }
        printf("           %-10s %7.1f", tokd_stage_name(s), 100 * part);
        if (regions > 0) {
            printf(" %8.1f %8.2f %8.2f ", regions / steps, prep_us, tail_us);
            for (int t = 0; t < nt; t++) printf(" %.1f", gb_s[t]);
        } else if (wait_us >= 0) {
            printf(" %8s %8s %8.2f", "-", "-", wait_us);
        }
        putchar('\n');
    }
    if (json) printf("]}");
}

/* One combination's results as one JSON object on one line. */
static void print_json(const tokd_bench_params *p, const tokd_bench_result *r) {
    const double GB = 1e9;
    printf("{\"model\":");
    json_str(p->model_path);
    printf(",\"name\":");
    json_str(r->name);
    printf(",\"arch\":\"%s\",\"types\":", r->arch);
    json_str(r->types);
    printf(",\"weight_bytes\":%llu,\"threads\":%d,\"kernels\":\"%s\",\"n_depth\":%d,\"n_seqs\":%d,",
           (unsigned long long)r->weight_bytes, r->n_threads, r->kernels, p->n_depth, r->n_seqs);
    if (r->pp.n) {
        json_stat("pp", p->n_prompt, &r->pp);
        putchar(',');
    }
    if (r->tg.n) {
        json_stat("tg", p->n_gen, &r->tg);
        putchar(',');
    }
    printf("\"bytes_per_token\":%llu,\"macs_per_token\":%llu", (unsigned long long)r->bytes_per_token,
           (unsigned long long)r->macs_per_token);
    if (p->measure_machine) {
        printf(",\"bandwidth_buffer_mib\":%d,\"bandwidth_gb_s\":%.3f,\"tg_limit_tok_s\":%.3f", r->bw_mib, r->bandwidth / GB, r->tg_limit);
        if (r->tg.n) {
            printf(",\"tg_share\":%.4f,\"tg_probe_passes\":%d", r->tg_share, r->tg_probe_passes);
            json_stat_scaled("tg_bandwidth_gb_s", &r->tg_bw, 1 / GB);
            json_stat_scaled("tg_shares", &r->tg_shares, 1);
            if (r->tg_handoff.n) json_stat_scaled("tg_handoff_ns", &r->tg_handoff, 1);
        }
        printf(",\"peak_int8_gmac_s\":%.2f,\"peak_int8_isa\":\"%s\",\"peak_f32_gflop_s\":%.2f,\"peak_f32_isa\":\"%s\"",
               r->peak_int8 / GB, r->isa_int8, 2 * r->peak_f32 / GB, r->isa_f32);
        if (r->peak_bf16 > 0) printf(",\"peak_bf16_gflop_s\":%.2f,\"peak_bf16_isa\":\"%s\"", 2 * r->peak_bf16 / GB, r->isa_bf16);
        printf(",\"pp_peak\":\"%s\"", r->pp_peak);
        if (r->pp.n) printf(",\"pp_share\":%.4f", r->pp_peak_share);
    }
    if (p->profile_steps > 0) print_profile(r, p->n_depth, true);
    printf("}\n");
}

/* A test's name as llama-bench writes it: "pp512", "tg128 x4 @ d2048". */
static void test_label(char *buf, size_t cap, const char *test, int n_tokens, int n_seqs, int depth) {
    int k = snprintf(buf, cap, "%s%d", test, n_tokens);
    if (n_seqs > 1 && k > 0 && (size_t)k < cap) k += snprintf(buf + k, cap - (size_t)k, " x%d", n_seqs);
    if (depth > 0 && k > 0 && (size_t)k < cap) snprintf(buf + k, cap - (size_t)k, " @ d%d", depth);
}

/* The rows of every combination, for the table text ends with when there were several. */
typedef struct {
    int threads;
    char test[48];
    tokd_bench_stat tok_s;
    double share; /* of the limit named by of; 0: not measured */
    char of[32];
} summary_row;
typedef struct {
    summary_row *rows;
    int n, cap;
} summary;

static void summary_add(summary *sm, int threads, const char *test, const tokd_bench_stat *st, double share, const char *of) {
    if (sm->n == sm->cap) {
        sm->cap = sm->cap ? 2 * sm->cap : 16;
        sm->rows = tokd_xrealloc(sm->rows, (size_t)sm->cap * sizeof *sm->rows);
    }
    summary_row *row = &sm->rows[sm->n++];
    *row = (summary_row){.threads = threads, .tok_s = *st, .share = share};
    snprintf(row->test, sizeof row->test, "%s", test);
    snprintf(row->of, sizeof row->of, "%s", of);
}

static void summary_print(const summary *sm) {
    printf("\n| threads | test | tok/s | min | max | share |\n| ---: | --- | ---: | ---: | ---: | --- |\n");
    for (int i = 0; i < sm->n; i++) {
        const summary_row *row = &sm->rows[i];
        printf("| %d | %s | %.2f | %.2f | %.2f | ", row->threads, row->test, row->tok_s.median, row->tok_s.min, row->tok_s.max);
        if (row->share > 0) printf("%.1f %% of the %s |\n", 100 * row->share, row->of);
        else printf("|\n");
    }
}

/* One combination's results as text; the model's lines only before the first. */
static void print_text(const tokd_bench_params *p, const tokd_bench_result *r, bool first) {
    const double GB = 1e9;
    if (first) {
        printf("model:     %s (%s, %s), %s\n", p->model_path, r->name[0] ? r->name : "?", r->arch, r->types);
        if (r->n_seqs == 1)
            printf("           %.2f MiB of weights, %.2f MB read and %.3f G multiply-accumulates per token\n",
                   (double)r->weight_bytes / (1 << 20), (double)r->bytes_per_token / 1e6, (double)r->macs_per_token / GB);
        else
            printf("           %.2f MiB of weights, %.3f G multiply-accumulates per token\n", (double)r->weight_bytes / (1 << 20),
                   (double)r->macs_per_token / GB);
    } else {
        putchar('\n');
    }
    printf("threads:   %d, kernels %s, %d run%s each", r->n_threads, r->kernels, p->reps, p->reps > 1 ? "s" : "");
    if (r->n_seqs > 1)
        printf("; %d sequences together, %.2f MB read a decode step of %d tokens", r->n_seqs, (double)r->bytes_per_token / 1e6,
               r->n_seqs);
    putchar('\n');
    if (r->pp.n) {
        char label[48];
        test_label(label, sizeof label, "pp", p->n_prompt, r->n_seqs, p->n_depth);
        printf("%-11s%9.2f tok/s  (min %.2f, max %.2f)", label, r->pp.median, r->pp.min, r->pp.max);
        if (p->measure_machine && r->pp_peak_share > 0)
            printf("  %5.1f %% of the %s peak", 100 * r->pp_peak_share, r->pp_peak);
        putchar('\n');
    }
    if (r->tg.n) {
        char label[48];
        test_label(label, sizeof label, "tg", p->n_gen, r->n_seqs, p->n_depth);
        printf("%-11s%9.2f tok/s  (min %.2f, max %.2f)", label, r->tg.median, r->tg.min, r->tg.max);
        if (p->measure_machine) printf("  %5.1f %% of the bandwidth limit %.2f tok/s", 100 * r->tg_share, r->tg_limit);
        putchar('\n');
        if (p->measure_machine) {
            printf("           share per run %.1f .. %.1f %%, against memory read %.2f GB/s (min %.2f, max %.2f) measured ",
                   100 * r->tg_shares.min, 100 * r->tg_shares.max, r->tg_bw.median / GB, r->tg_bw.min / GB, r->tg_bw.max / GB);
            if (r->tg_probe_passes) printf("between each run's steps (%d passes)\n", r->tg_probe_passes);
            else printf("after each run\n");
            if (r->tg_handoff.n)
                printf("           handoff between threads %.0f ns one way (min %.0f, max %.0f) after each run\n",
                       r->tg_handoff.median, r->tg_handoff.min, r->tg_handoff.max);
        }
    }
    if (p->measure_machine) {
        printf("machine:   memory read %.2f GB/s (%d thread%s, %d MiB, median of 7)\n", r->bandwidth / GB, r->n_threads,
               r->n_threads == 1 ? "" : "s", r->bw_mib);
        printf("           int8 peak %.1f GMAC/s (%s), f32 peak %.1f GFLOP/s (%s)", r->peak_int8 / GB, r->isa_int8,
               2 * r->peak_f32 / GB, r->isa_f32);
        if (r->peak_bf16 > 0) printf(", bf16 peak %.1f GFLOP/s (%s)", 2 * r->peak_bf16 / GB, r->isa_bf16);
        putchar('\n');
    }
    if (p->profile_steps > 0) print_profile(r, p->n_depth, false);
}

static int parse_tg_probe(const char *cmd, const char *opt, const char *val, void *dst) {
    int *when = dst;
    if (!strcmp(val, "auto")) *when = TOKD_BENCH_PROBE_AUTO;
    else if (!strcmp(val, "between")) *when = TOKD_BENCH_PROBE_BETWEEN;
    else if (!strcmp(val, "after")) *when = TOKD_BENCH_PROBE_AFTER;
    else {
        fprintf(stderr, "tokd %s: %s takes auto, between or after, not '%s'\n", cmd, opt, val);
        return -1;
    }
    return 0;
}

/* -p, -n, -d, -t and -s take lists, as llama-bench's do. Every thread count is run at
 * every depth with every sequence count; within those, the i-th prompt length and the
 * i-th generation length share one run of tokd_bench_model (one load, one set of machine
 * probes), a shorter list padding with 0 (none). --profile profiles the first of them.
 * Text then ends with every row in one table, llama-bench's rows, when there were several
 * runs. */
int cmd_bench(int argc, char **argv) {
    tokd_bench_params p = {.reps = 3, .measure_machine = true};
    cli_int_list prompts = {{512}, 1}, gens = {{128}, 1}, depths = {{0}, 1}, threads = {{0}, 1}, seqs = {{1}, 1};
    int profile_steps = 0;
    bool json = false, no_machine = false;
    const cli_option opts[] = {
        CLI_MODEL(&p.model_path),
        CLI_INTS("-p", "--n-prompt", &prompts, 0, 65536, "N[,N...]", "pp: one batched prompt of N tokens (default 512; 0: none)"),
        CLI_INTS("-n", "--n-gen", &gens, 0, 65536, "N[,N...]", "tg: N single-token decode steps (default 128; 0: none)"),
        CLI_INTS("-d", "--n-depth", &depths, 0, 1 << 20, "N[,N...]", "run pp and tg after N positions already in the cache (default 0)"),
        CLI_INTS("-s", "--seqs", &seqs, 1, TOKD_BENCH_MAX_SEQS, "N[,N...]",
                 "N sequences together: pp N prompts in one batch, tg one token of each a step (default 1)"),
        CLI_INT("-r", "--repetitions", &p.reps, 1, TOKD_BENCH_MAX_REPS, "N", "runs of each, reported as median and range (default 3)"),
        CLI_INTS("-t", "--threads", &threads, 1, 1024, "N[,N...]", "threads (default: the physical cores)"),
        CLI_INT("--bw-mib", NULL, &p.bw_mib, 16, 1 << 16, "MIB", "the bandwidth probe's buffer (default 512)"),
        CLI_FLAG("--json", NULL, &json, "print one JSON object (a line) for each combination instead of text"),
        CLI_CALL("--tg-probe", NULL, parse_tg_probe, &p.tg_probe, "WHEN",
                 "tg's bandwidth: between each run's steps, after each run, or auto (default: between when a step "
                 "reads 256 MiB or more)"),
        CLI_FLAG("--no-machine", NULL, &no_machine, "skip the bandwidth and arithmetic-peak probes"),
        CLI_INT("--profile", NULL, &profile_steps, 1, 65536, "N", "then N more decode steps, showing where their time went"),
        CLI_END,
    };
    int parsed = cli_parse("bench", argc, argv, opts);
    if (parsed) return cli_exit_code(parsed);
    if (no_machine) p.measure_machine = false;
    if (!p.model_path) {
        fprintf(stderr, "tokd bench: need -m MODEL\n");
        return 2;
    }
    const int pairs = prompts.n > gens.n ? prompts.n : gens.n;
    bool any = false;
    for (int i = 0; i < pairs; i++) any |= (i < prompts.n && prompts.v[i] > 0) || (i < gens.n && gens.v[i] > 0);
    if (!any) {
        fprintf(stderr, "tokd bench: nothing to measure (-p 0 and -n 0)\n");
        return 2;
    }
    bool first = true;
    summary sm = {0};
    int runs = 0, rc = 0;
    /* combination k, in the order: threads, then depth, then sequences, then the pairs */
    const int total = threads.n * depths.n * seqs.n * pairs;
    for (int k = 0; k < total && !rc; k++) {
        const int i = k % pairs, si = k / pairs % seqs.n, di = k / pairs / seqs.n % depths.n,
                  ti = k / pairs / seqs.n / depths.n;
        p.n_threads = threads.v[ti];
        p.n_depth = depths.v[di];
        p.n_seqs = seqs.v[si];
        p.n_prompt = i < prompts.n ? prompts.v[i] : 0;
        p.n_gen = i < gens.n ? gens.v[i] : 0;
        if (p.n_prompt == 0 && p.n_gen == 0) continue;
        p.profile_steps = i == 0 ? profile_steps : 0;
        tokd_bench_result r;
        tokd_err err;
        if (tokd_bench_model(&p, &r, &err)) {
            fprintf(stderr, "tokd bench: %s\n", err.msg);
            rc = 1;
            break;
        }
        if (json) print_json(&p, &r);
        else print_text(&p, &r, first);
        fflush(stdout);
        first = false;
        runs++;
        char label[48];
        if (r.pp.n) {
            test_label(label, sizeof label, "pp", p.n_prompt, r.n_seqs, p.n_depth);
            char of[32];
            snprintf(of, sizeof of, "%s peak", r.pp_peak ? r.pp_peak : "");
            summary_add(&sm, r.n_threads, label, &r.pp, p.measure_machine ? r.pp_peak_share : 0, of);
        }
        if (r.tg.n) {
            test_label(label, sizeof label, "tg", p.n_gen, r.n_seqs, p.n_depth);
            summary_add(&sm, r.n_threads, label, &r.tg, p.measure_machine ? r.tg_share : 0, "bandwidth limit");
        }
    }
    if (!rc && !json && runs > 1) summary_print(&sm);
    free(sm.rows);
    return rc;
}
