/* cmd_info.c — `tokd info`: what a model file holds and what running it costs:
 * architecture, hyperparameters, tokenizer, tensor types, and the memory budget
 * (weights, KV cache per token, scratch buffers for a default context). Works on
 * vocabulary-only files too (tokenizer part only). */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "kernels/types.h"
#include "model.h"

static void print_tokenizer(const tokd_tokenizer *t) {
    tokd_tokenizer_info ti;
    tokd_tokenizer_get_info(t, &ti);
    printf("tokenizer:    %s (pre-tokenizer %s), %d tokens, %d merges, %d special\n", ti.model, ti.pre ? ti.pre : "-",
           ti.n_vocab, ti.n_merges, ti.n_special);
    printf("              bos %d, eos %d, unk %d, add_bos %s, add_eos %s, add_space_prefix %s\n", ti.bos, ti.eos, ti.unk,
           ti.add_bos ? "yes" : "no", ti.add_eos ? "yes" : "no", ti.add_space_prefix ? "yes" : "no");
}

static void mib(const char *label, double bytes) { printf("  %-22s %10.2f MiB\n", label, bytes / (1024.0 * 1024.0)); }

int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    const cli_option opts[] = {CLI_MODEL(&path), CLI_END};
    int parsed = cli_parse("info", argc, argv, opts);
    if (parsed) return cli_exit_code(parsed);
    if (!path) {
        fprintf(stderr, "tokd info: missing -m MODEL\n");
        return 2;
    }
    tokd_err err;
    gguf_file *f = gguf_open(path, &err);
    if (!f) {
        fprintf(stderr, "tokd info: %s\n", err.msg);
        return 1;
    }
    if (f->n_tensors == 0) { /* vocabulary-only file */
        tokd_tokenizer *t = tokd_tokenizer_load(f, &err);
        if (!t) {
            fprintf(stderr, "tokd info: %s: %s\n", path, err.msg);
            gguf_close(f);
            return 1;
        }
        printf("file:         %s (GGUF v%u, vocabulary only: %llu metadata entries, no tensors)\n", path, f->version,
               (unsigned long long)f->n_kv);
        print_tokenizer(t);
        tokd_tokenizer_free(t);
        gguf_close(f);
        return 0;
    }
    tokd_model *m = tokd_model_load_uncopied(path, &err); /* describes; runs nothing */
    if (!m) {
        fprintf(stderr, "tokd info: %s\n", err.msg);
        gguf_close(f);
        return 1;
    }
    tokd_model_info mi;
    tokd_model_get_info(m, &mi);
    printf("file:         %s (GGUF v%u, %llu metadata entries, %llu tensors)\n", path, f->version,
           (unsigned long long)f->n_kv, (unsigned long long)f->n_tensors);
    printf("model:        %s, architecture %s\n", mi.name[0] ? mi.name : "(unnamed)", mi.arch);
    printf("shape:        %d layers, dim %d, %d heads (%d KV heads, head size %d), FFN %d, vocab %d\n", mi.n_layer,
           mi.n_embd, mi.n_head, mi.n_head_kv, mi.head_dim, mi.n_ff, mi.n_vocab);
    printf("rope:         %s, %d dims, base %g, linear scale %g%s; RMS norm eps %g; context (trained) %d\n",
           mi.rope_neox ? "neox" : "normal", mi.n_rot, mi.rope_freq_base, mi.rope_freq_scale,
           mi.rope_freq_factors ? ", frequency factors (rope_freqs.weight)" : "", mi.norm_eps, mi.n_ctx_train);
    printf("output:       %s\n", mi.tied_output ? "tied to token embeddings" : "separate output.weight");
    print_tokenizer(m->tok);
    uint64_t counts[GGML_TYPE_MAX_ID] = {0}, bytes[GGML_TYPE_MAX_ID] = {0};
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (f->tensors[i].type < GGML_TYPE_MAX_ID) {
            counts[f->tensors[i].type]++;
            bytes[f->tensors[i].type] += f->tensors[i].nbytes;
        }
    printf("tensor types:");
    for (int t = 0; t < GGML_TYPE_MAX_ID; t++)
        if (counts[t]) printf(" %s x%llu (%.2f MiB)", ggml_type_name((uint32_t)t), (unsigned long long)counts[t], bytes[t] / 1048576.0);
    printf("\n");
    tokd_ctx_params cp;
    tokd_ctx_params_default(&cp);
    int32_t n_ctx = mi.n_ctx_train < 4096 ? mi.n_ctx_train : 4096;
    uint64_t kv_tok = tokd_kv_bytes_per_token(m);
    printf("memory budget (context %d, batch %d, 1 sequence):\n", n_ctx, cp.n_batch);
    mib("weights", (double)mi.weight_bytes);
    mib("  copied to huge pages", (double)mi.copied_bytes);
    printf("  %-22s %10.2f KiB\n", "KV cache per token", kv_tok / 1024.0);
    mib("KV cache (context)", (double)kv_tok * n_ctx);
    mib("scratch buffers", (double)tokd_scratch_bytes(m, &cp));
    printf("kernels:      %s\n", tokd_kernels_path());
    tokd_model_free(m);
    gguf_close(f);
    return 0;
}
