/* test_packed.c — the packed weight layout (src/kernels/packed.h).
 *
 * For Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q2_K to Q6_K: random matrices are packed, activation rows prepared, and every
 * output of the SIMD packed gemm must be bit-equal to the scalar contract (ref_dot, from
 * the unpacked row and the Q8_0 / Q8_1 / Q8_K activation blocks; for the K-quants that is the
 * file layout's own vec_dot_ref), for 1..17 and 33 activation rows
 * (every tile width and tail), several K (odd block counts included) and group counts.
 * The contract itself must agree with the unpacked scalar vec_dot to float rounding.
 * Through tokd_matmul, a packed matrix gives the same bits for any row count, chunking
 * and thread count. The AVX2 kernels (with and without AVX-VNNI) and their activation
 * preparation are checked the same way on any CPU that can run them,
 * whichever path the process runs. A row prepared in parts, column ranges at a time,
 * has the whole row's bytes. */
#include <math.h>
#include <string.h>

#include "gguf.h"
#include "kernels/matmul.h"
#include "kernels/packed.h"
#include "kernels/quants.h"
#include "kernels/types.h"
#include "t.h"
#include "t_rand.h"
#include "util.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull; /* t_rand.h state */

static void check_type(uint32_t type, const tokd_packed_traits *pk, tokd_pool *pool2) {
    const tokd_type_traits *tt = tokd_type_get(type), *at = tokd_type_get(tt->vec_dot_type);
    /* K-quants: K in super-blocks of 256 */
    const int kquant = type == GGML_TYPE_Q2_K || type == GGML_TYPE_Q3_K || type == GGML_TYPE_Q4_K ||
                       type == GGML_TYPE_Q5_K || type == GGML_TYPE_Q6_K || type == GGML_TYPE_IQ4_XS;
    /* 4096, 4128: an even and an odd block count (decode's aligned block pairs, and groups
       that start off the line); 4096 also spans several 4 KB pages per group, which
       decode primes ahead (packed.h) */
    const int64_t Ks[] = {32, 96, 256, 2080, 4096, 4128}, Ks6[] = {256, 512, 768, 2304, 4096, 4352};
    const int64_t NA = 33;
    for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
        const int64_t K = kquant ? Ks6[ki] : Ks[ki], gr = pk->group_rows, n_out = 3 * gr; /* three groups */
        const size_t rb = tokd_row_bytes(tt, K), qb = tokd_row_bytes(at, K);
        float *x = tokd_xmalloc(sizeof(float) * (size_t)(K * (n_out > NA ? n_out : NA)));
        uint8_t *w = tokd_xmalloc(rb * (size_t)n_out);
        for (int64_t i = 0; i < K * n_out; i++) x[i] = t_rand_half(&rng) * (i % 7 == 0 ? 8.0f : 1.0f);
        for (int64_t o = 0; o < n_out; o++) tt->from_float(x + o * K, w + (size_t)o * rb, K);
        /* activation rows: Q8_0 blocks for the contract, prepared rows for the kernel */
        for (int64_t i = 0; i < K * NA; i++) x[i] = t_rand_half(&rng) * (i % 5 == 0 ? 4.0f : 1.0f);
        uint8_t *q = tokd_xmalloc(qb * NA);
        for (int64_t r = 0; r < NA; r++) at->from_float(x + r * K, q + (size_t)r * qb, K);
        /* the two summation orders may differ by at most the classical bound of two
           float sums of nb terms: 2 * nb * 2^-24 * sum |w_i a_i| */
        float want[33][96], *wf = tokd_xmalloc(sizeof(float) * (size_t)K), *af = tokd_xmalloc(sizeof(float) * (size_t)K);
        double worst = 0.0;
        for (int64_t r = 0; r < NA; r++) {
            at->to_float(q + (size_t)r * qb, af, K);
            for (int64_t o = 0; o < n_out; o++) {
                want[r][o] = pk->ref_dot(K, w + (size_t)o * rb, q + (size_t)r * qb);
                float unpacked;
                tt->vec_dot_ref(K, &unpacked, w + (size_t)o * rb, q + (size_t)r * qb);
                tt->to_float(w + (size_t)o * rb, wf, K);
                double mag = 0.0;
                for (int64_t i = 0; i < K; i++) mag += fabs((double)wf[i] * af[i]);
                double ratio = fabs((double)unpacked - want[r][o]) / (2.0 * (double)(K / 32) * 0x1p-24 * mag + 1e-30);
                if (ratio > worst) worst = ratio;
            }
        }
        free(wf);
        free(af);
        CHECK(worst <= 1.0, "%s K=%lld: packed contract vs vec_dot_ref at %.2f of the rounding bound", tt->name,
              (long long)K, worst);

        tokd_matrix W = {.data = w, .tt = tt, .K = K, .n_out = n_out, .row_bytes = rb};
        CHECK(tokd_matrix_pack(NULL, &W, pk) == 0 && W.pk == pk, "%s pack (%lld-row groups)", tt->name, (long long)gr);
        const size_t as = (pk->act_bytes(K) + 63) & ~(size_t)63;
        uint8_t *act = tokd_aligned_alloc(as * NA);
        for (int64_t r = 0; r < NA; r++) pk->prep(x + r * K, act + (size_t)r * as, K);
        /* the SIMD preparation writes the scalar statement's bytes (x has a NaN, an
           infinity-free block of zeros and the usual values) */
        uint8_t *ref = tokd_aligned_alloc(as);
        int prep_bad = 0;
        for (int64_t r = 0; r < NA && !kquant; r++) {
            memset(ref, 0, as);
            tokd_packed_prep_ref(x + r * K, ref, K, pk->act_bias);
            prep_bad += memcmp(ref, act + (size_t)r * as, (size_t)(K / 32) * 40) != 0;
        }
        CHECK(prep_bad == 0, "%s K=%lld: %d prepared activation rows differ from the scalar statement", tt->name,
              (long long)K, prep_bad);
        if (!kquant) { /* this form's own preparation, on a NaN block and a zero block */
            float special[64] = {0};
            special[3] = NAN;
            for (int i = 32; i < 64; i++) special[i] = (float)(i - 48) * 0.37f;
            uint8_t sa[64 * 40 / 32 + 64], sb[64 * 40 / 32 + 64];
            tokd_packed_prep_ref(special, sa, 64, pk->act_bias);
            pk->prep(special, sb, 64);
            CHECK(memcmp(sa, sb, 80) == 0, "%s: prep of a NaN block and a zero block differs from the scalar statement",
                  tt->name);
        }
        free(ref);
        float y[33 * 96];
        int bad = 0;
        for (int64_t na = 1; na <= NA; na = na == 17 ? NA : na + 1) {
            for (int64_t g0 = 0; g0 < 3; g0++) { /* groups [g0, 3) */
                memset(y, 0xFF, sizeof y);
                pk->gemm(K, 3 - g0, (uint8_t *)W.packed + (size_t)g0 * W.group_bytes, W.group_bytes, na, act, as,
                         y + gr * g0, n_out);
                for (int64_t r = 0; r < na; r++)
                    for (int64_t o = gr * g0; o < n_out; o++)
                        if (memcmp(&y[r * n_out + o], &want[r][o], 4)) bad++;
            }
        }
        CHECK(bad == 0, "%s K=%lld: %d packed gemm outputs differ from the contract", tt->name, (long long)K, bad);

        /* through tokd_matmul: any row count and thread count, same bits */
        float *X = x, *Y1 = tokd_xmalloc(sizeof(float) * NA * n_out), *Y2 = tokd_xmalloc(sizeof(float) * NA * n_out);
        void *scratch = tokd_aligned_alloc(tokd_matmul_scratch_bytes(tt, K, NA));
        tokd_matmul(pool2, &W, X, K, NA, Y1, n_out, scratch);
        bad = 0;
        for (int64_t r = 0; r < NA; r++) {
            tokd_matmul(NULL, &W, X + r * K, K, 1, Y2 + r * n_out, n_out, scratch);
            for (int64_t o = 0; o < n_out; o++)
                if (memcmp(&Y1[r * n_out + o], &want[r][o], 4) || memcmp(&Y2[r * n_out + o], &want[r][o], 4)) bad++;
        }
        CHECK(bad == 0, "%s K=%lld: %d matmul outputs differ between 33 rows on 2 threads and 1 row on 1", tt->name,
              (long long)K, bad);

        /* a height that leaves the last group partial (a vocabulary of 32001): the same
           rows' outputs, and nothing written past the height (Y sized exactly, ASan) */
        const int64_t n_part = n_out - 5;
        tokd_matrix P = {.data = w, .tt = tt, .K = K, .n_out = n_part, .row_bytes = rb};
        const tokd_packed_traits *ppk = tokd_packed_fit(pk, n_part);
        CHECK(ppk && tokd_matrix_pack(NULL, &P, pk) == 0 && P.pk == ppk &&
                  tokd_matrix_packed_bytes(&P, pk) == ppk->group_bytes(K) * (size_t)((n_part + ppk->group_rows - 1) / ppk->group_rows),
              "%s: %lld rows pack, the last group padded", tt->name, (long long)n_part);
        float *P1 = tokd_xmalloc(sizeof(float) * NA * (size_t)n_part), *P2 = tokd_xmalloc(sizeof(float) * (size_t)n_part);
        bad = 0;
        if (P.pk) {
            tokd_matmul(pool2, &P, X, K, NA, P1, n_part, scratch);
            for (int64_t r = 0; r < NA; r++) {
                tokd_matmul(pool2, &P, X + r * K, K, 1, P2, n_part, scratch);
                for (int64_t o = 0; o < n_part; o++)
                    if (memcmp(&P1[r * n_part + o], &want[r][o], 4) || memcmp(&P2[o], &want[r][o], 4)) bad++;
            }
        }
        CHECK(bad == 0, "%s K=%lld: %d outputs of a %lld-row matrix differ from the contract", tt->name, (long long)K, bad,
              (long long)n_part);
        free(P1);
        free(P2);
        free(P.packed);
        free(scratch);
        free(Y1);
        free(Y2);
        free(act);
        free(W.packed);
        free(q);
        free(w);
        free(x);
    }
}

/* Matrices without a packed form (F32, F16, BF16) through tokd_matmul: every row count a
 * decode or prefill uses (1..17, 33), on 2 threads, gives each output the bits of the
 * scalar vec_dot_ref of its weight row and activation row (for F16 weights the activation
 * row rounded to F16, for BF16 weights converted to BF16). The few-row decode walk takes
 * one to four rows from memory at once, fewer where their activations would not stay in
 * L1 (K = 5632: the FFN down product), then the rest four at a time and one at a time. */
static void check_float_matmul(tokd_pool *pool2) {
    static const uint32_t types[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16};
    static const int64_t Ks[] = {7, 33, 2048, 5632 + 3};
    enum { NA = 33, N_OUT = 37 };
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
            const tokd_type_traits *tt = tokd_type_get(types[ti]);
            const int64_t K = Ks[ki];
            const size_t rb = tokd_row_bytes(tt, K);
            uint8_t *w = tokd_xmalloc(rb * N_OUT);
            float *x = tokd_xmalloc(sizeof(float) * (size_t)(NA * K)), *f = tokd_xmalloc(sizeof(float) * (size_t)K);
            for (int64_t o = 0; o < N_OUT; o++) {
                for (int64_t k = 0; k < K; k++) f[k] = t_rand_gauss(&rng);
                tt->from_float(f, w + (size_t)o * rb, K);
            }
            for (int64_t i = 0; i < NA * K; i++) x[i] = t_rand_gauss(&rng);
            /* the activations the products take, as ggml's CPU backend converts them: F16
               weights' rounded to F16 (types.h: act_convert), BF16 weights' BF16 rows */
            const tokd_type_traits *at = tokd_type_get(tt->vec_dot_type);
            const size_t ab = tokd_row_bytes(at, K);
            uint8_t *xr = tokd_xmalloc(ab * NA);
            for (int64_t r = 0; r < NA; r++) {
                uint8_t *row = xr + (size_t)r * ab;
                at->from_float(x + r * K, row, K);
                if (types[ti] == GGML_TYPE_F16) /* stated here, not through act_convert */
                    for (int64_t i = 0; i < K; i++) ((float *)row)[i] = tokd_f16_to_f32(tokd_f32_to_f16(x[r * K + i]));
            }
            const tokd_matrix W = {.data = w, .tt = tt, .K = K, .n_out = N_OUT, .row_bytes = rb};
            float *y = tokd_xmalloc(sizeof(float) * NA * N_OUT);
            void *scratch = tokd_aligned_alloc(tokd_matmul_scratch_bytes(tt, K, NA));
            int bad = 0;
            for (int64_t na = 1; na <= NA; na = na == 17 ? NA : na + 1) {
                tokd_matmul(pool2, &W, x, K, na, y, N_OUT, scratch);
                for (int64_t r = 0; r < na; r++)
                    for (int64_t o = 0; o < N_OUT; o++) {
                        float want;
                        tt->vec_dot_ref(K, &want, w + (size_t)o * rb, xr + (size_t)r * ab);
                        bad += memcmp(&want, &y[r * N_OUT + o], 4) != 0;
                    }
            }
            CHECK(bad == 0, "%s K=%lld: %d matmul outputs differ from the scalar reference", tt->name, (long long)K, bad);
            free(scratch), free(y), free(f), free(xr), free(x), free(w);
        }
}

/* The int16 sums of the AVX2 kernels (packed_avx2_gemm.h: padd) stay exact only if no
 * step's sums pass 2^15. Random data never comes near that, so each type also gets rows
 * whose every weight takes its largest unsigned value (all quant bytes 0xFF; Q8_0 -128)
 * against activation rows of one sign throughout (all +1 and all -1: every quant +-127),
 * where every product has the same sign and the largest magnitude: a form that summed
 * one step too many would saturate and differ from the contract. */
static void extreme_row(uint32_t type, uint8_t *row, int64_t K) {
    const tokd_type_traits *tt = tokd_type_get(type);
    const size_t bb = tt->bytes;
    memset(row, 0xFF, tokd_row_bytes(tt, K));
    for (uint8_t *b = row; b < row + tokd_row_bytes(tt, K); b += bb) {
        const uint8_t one[2] = {0x00, 0x3C}; /* fp16 1.0 */
        switch (type) {
        case GGML_TYPE_Q8_0: memset(b + 2, 0x80, 32), memcpy(b, one, 2); break;
        case GGML_TYPE_Q4_0:
        case GGML_TYPE_IQ4_NL:
        case GGML_TYPE_IQ4_XS: /* and its block scales all 31 */
        case GGML_TYPE_Q5_0: memcpy(b, one, 2); break;
        case GGML_TYPE_Q4_1:
        case GGML_TYPE_Q5_1: memcpy(b, one, 2), memcpy(b + 2, one, 2); break; /* d, m */
        case GGML_TYPE_Q4_K:
        case GGML_TYPE_Q5_K: memcpy(b, one, 2), memcpy(b + 2, one, 2); break; /* d, dmin */
        case GGML_TYPE_Q6_K: memcpy(b + 208, one, 2); break;
        case GGML_TYPE_Q3_K: memcpy(b + 108, one, 2); break;
        case GGML_TYPE_Q2_K: memcpy(b + 80, one, 2), memcpy(b + 82, one, 2); break;
        default: break;
        }
    }
}
static void check_extremes(uint32_t type, const tokd_packed_traits *pk) {
    const tokd_type_traits *tt = tokd_type_get(type), *at = tokd_type_get(tt->vec_dot_type);
    const int64_t K = 512, gr = pk->group_rows, n_out = 2 * gr, NA = 5;
    const size_t rb = tokd_row_bytes(tt, K), qb = tokd_row_bytes(at, K), as = (pk->act_bytes(K) + 63) & ~(size_t)63;
    uint8_t *w = tokd_xmalloc(rb * (size_t)n_out), *q = tokd_xmalloc(qb), *act = tokd_aligned_alloc(as * NA);
    float *x = tokd_xmalloc(sizeof(float) * (size_t)K), y[5 * 64];
    for (int64_t o = 0; o < n_out; o++) extreme_row(type, w + (size_t)o * rb, K);
    tokd_matrix W = {.data = w, .tt = tt, .K = K, .n_out = n_out, .row_bytes = rb};
    CHECK(tokd_matrix_pack(NULL, &W, pk) == 0, "%s: pack the extreme rows", tt->name);
    for (int sign = -1; sign <= 1; sign += 2) {
        for (int64_t i = 0; i < K; i++) x[i] = (float)sign;
        at->from_float(x, q, K);
        for (int64_t r = 0; r < NA; r++) pk->prep(x, act + (size_t)r * as, K);
        const float want = pk->ref_dot(K, w, q);
        int bad = 0;
        for (int64_t na = 1; na <= NA; na += 3) { /* decode (1) and a 4-row prefill tile (4) */
            memset(y, 0xFF, sizeof y);
            pk->gemm(K, 2, W.packed, W.group_bytes, na, act, as, y, n_out);
            for (int64_t i = 0; i < na * n_out; i++) bad += memcmp(&y[i], &want, 4) != 0;
        }
        CHECK(bad == 0 && want != 0.0f && want == want, "%s: weights at their largest against activations all %+d: %d outputs differ from the contract (%g)",
              tt->name, sign, bad, (double)want);
    }
    free(W.packed);
    free(act);
    free(x);
    free(q);
    free(w);
}

/* Columns [c0, c1) of a prepared row of K (`whole`: the row prepared at once):
 * - tokd_packed_prep_cols_spans's runs hold every byte tokd_packed_prep_cols writes (a
 *   byte counts as written where it differs from the fill in either of two runs, filled
 *   0x00 and 0xFF); bytes of the runs it leaves alone are padding no kernel reads (Q2_K's
 *   32 a super-block). covered[] counts each byte's runs, for check_prep_cols to find
 *   runs of different columns that overlap;
 * - tokd_packed_prep_cols_claim writes only whole lines inside the runs, and preparing
 *   the columns afterwards gives whole's bytes everywhere but in the padding. */
static void check_prep_cols_spans(const tokd_packed_traits *pk, const float *x, int64_t K, int64_t c0, int64_t c1,
                                  const uint8_t *whole, uint8_t *covered) {
    const char *name = tokd_type_get(pk->id)->name;
    const size_t bytes = pk->act_bytes(K);
    uint8_t *a = tokd_aligned_alloc(bytes), *b = tokd_aligned_alloc(bytes), *in = calloc(bytes, 1);
    tokd_prep_span spans[TOKD_PREP_SPANS];
    const int n = tokd_packed_prep_cols_spans(pk, K, c0, c1, spans);
    CHECK(n >= 1 && n <= TOKD_PREP_SPANS, "%s: columns [%lld, %lld) in %d runs", name, (long long)c0, (long long)c1, n);
    for (int i = 0; i < n; i++) {
        CHECK(spans[i].off + spans[i].len <= bytes, "%s: run %d inside the row", name, i);
        for (size_t k = spans[i].off; k < spans[i].off + spans[i].len && k < bytes; k++) in[k] = 1, covered[k]++;
    }
    memset(a, 0x00, bytes);
    memset(b, 0xFF, bytes);
    tokd_packed_prep_cols(pk, x, a, K, c0, c1);
    tokd_packed_prep_cols(pk, x, b, K, c0, c1);
    size_t stray = 0, padding = 0;
    for (size_t i = 0; i < bytes; i++) {
        const int written = a[i] != 0x00 || b[i] != 0xFF;
        stray += written && !in[i];
        padding += in[i] && !written;
        a[i] = (uint8_t)written; /* kept: which bytes the columns write */
    }
    CHECK(stray == 0 && padding <= (size_t)(c1 - c0) / 8, "%s K=%lld: columns [%lld, %lld) write %zu bytes outside their runs, leave %zu of them",
          name, (long long)K, (long long)c0, (long long)c1, stray, padding);
    memcpy(b, whole, bytes);
    tokd_packed_prep_cols_claim(pk, b, K, c0, c1);
    size_t outside = 0, changed = 0, lines_in = 0;
    for (size_t line = 0; line + 64 <= bytes; line += 64) {
        int all_in = 1;
        for (size_t k = line; k < line + 64; k++) all_in &= in[k];
        lines_in += (size_t)all_in;
        for (size_t k = line; k < line + 64; k++)
            if (b[k] != whole[k]) changed++, outside += !all_in;
    }
    CHECK(outside == 0 && (changed > 0) == (lines_in > 0),
          "%s K=%lld: claiming columns [%lld, %lld) changes %zu bytes, %zu outside the %zu whole lines of their runs", name,
          (long long)K, (long long)c0, (long long)c1, changed, outside, lines_in);
    tokd_packed_prep_cols(pk, x, b, K, c0, c1);
    size_t differ = 0;
    for (size_t i = 0; i < bytes; i++) differ += b[i] != whole[i] && !(in[i] && !a[i]);
    CHECK(differ == 0, "%s: claimed, then prepared, the columns are the whole row's (%zu bytes differ)", name, differ);
    free(a);
    free(b);
    free(in);
}

/* An activation row prepared in parts (tokd_packed_prep_cols: decode_step.c's threads
 * each prepare their own columns into one row) has the bytes of the whole row prepared at
 * once: parts cut at the preparation's column multiple, written last part first, at a K
 * whose blocks do not fill the AVX-512 preparation's sixteen-block steps. IQ4_XS's
 * preparation does not split. */
static void check_prep_cols(uint32_t type, const tokd_packed_traits *pk) {
    const tokd_type_traits *tt = tokd_type_get(type);
    const int64_t align = tokd_packed_prep_cols_align(pk);
    const int kquant = type == GGML_TYPE_Q2_K || type == GGML_TYPE_Q3_K || type == GGML_TYPE_Q4_K ||
                       type == GGML_TYPE_Q5_K || type == GGML_TYPE_Q6_K;
    if (type == GGML_TYPE_IQ4_XS) {
        CHECK(align == 0, "%s: the preparation does not split by columns", tt->name);
        return;
    }
    CHECK(align == (kquant ? 256 : 32), "%s: the preparation splits every %lld columns", tt->name, (long long)align);
    if (align <= 0) return;
    const int64_t K = kquant ? 2304 : 4128, n = K / align;
    const int64_t cuts[] = {0, 3 * align, n / 2 * align, (n - 1) * align, K};
    const size_t bytes = pk->act_bytes(K);
    float *x = tokd_xmalloc(sizeof(float) * (size_t)K);
    for (int64_t i = 0; i < K; i++) x[i] = t_rand_half(&rng) * (i % 5 == 0 ? 4.0f : 1.0f);
    uint8_t *whole = tokd_aligned_alloc(bytes + 64), *parts = tokd_aligned_alloc(bytes + 64);
    memset(whole, 0x5A, bytes + 64);
    memset(parts, 0x5A, bytes + 64);
    pk->prep(x, whole, K);
    for (int i = 3; i >= 0; i--) tokd_packed_prep_cols(pk, x, parts, K, cuts[i], cuts[i + 1]);
    CHECK(memcmp(whole, parts, bytes + 64) == 0, "%s K=%lld: the row prepared in four parts equals the whole row",
          tt->name, (long long)K);
    uint8_t *covered = calloc(bytes, 1);
    for (int i = 0; i < 4; i++) check_prep_cols_spans(pk, x, K, cuts[i], cuts[i + 1], whole, covered);
    size_t shared = 0;
    for (size_t i = 0; i < bytes; i++) shared += covered[i] > 1;
    CHECK(shared == 0, "%s K=%lld: the four column ranges' runs share %zu bytes", tt->name, (long long)K, shared);
    free(covered);
    free(x);
    free(whole);
    free(parts);
}

int main(void) {
    tokd_kernels_init();
    const tokd_cpu_features *c = tokd_cpu();
    const int simd = c->avx512f && c->avx512bw && c->avx512vl && c->avx512vnni && c->f16c && c->fma &&
                     strcmp(tokd_kernels_path(), "avx512") == 0;
    tokd_pool *pool2 = tokd_pool_new(2);
    const uint32_t types[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q5_K,
                              GGML_TYPE_Q3_K, GGML_TYPE_Q2_K, GGML_TYPE_Q5_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_1};
    const int n_types = (int)(sizeof types / sizeof types[0]);
    const int avx2_path = !strcmp(tokd_kernels_path(), "avx2");
    for (int i = 0; i < n_types; i++) {
        const tokd_packed_traits *pk = tokd_packed_get_any(types[i]);
        if (!simd) {
            /* without AVX-512 VNNI the AVX2 forms, on the AVX2 path or AVX-512 without
               VNNI */
            int want = (avx2_path || !strcmp(tokd_kernels_path(), "avx512")) && c->avx2 && c->fma && c->f16c;
            CHECK((pk != NULL) == want, "type %u: packed form %s on the %s path", types[i], pk ? "offered" : "missing",
                  tokd_kernels_path());
            if (!pk) continue;
        } else {
            CHECK(pk != NULL, "no packed form for type %u on an AVX-512 VNNI CPU", types[i]);
        }
        if (pk) check_type(types[i], pk, pool2);
        if (pk) check_extremes(types[i], pk), check_prep_cols(types[i], pk);
        /* a form with groups of 32 rows keeps a 16-row form for heights that are odd
           multiples of 16 (tokd_packed_fit) */
        if (pk && pk->group_rows != 16) {
            const tokd_packed_traits *pk16 = tokd_packed_fit(pk, 48);
            CHECK(pk16 && pk16 != pk && pk16->id == pk->id && pk16->group_rows == 16, "type %u: a 16-row form beside the %d-row one",
                  types[i], pk->group_rows);
            if (pk16) check_type(types[i], pk16, pool2);
        }
    }
    CHECK(!simd || tokd_packed_get_any(GGML_TYPE_Q4_0)->group_rows == 32, "AVX-512 Q4_0 packs 32 rows a group");
    /* IQ4_NL and IQ4_XS are packed on AVX-512 VNNI only (their nibbles through a table
       lookup) */
    const uint32_t iq4_types[] = {GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS};
    for (int i = 0; i < 2; i++) {
        const tokd_packed_traits *pk = tokd_packed_get_any(iq4_types[i]);
        CHECK((pk != NULL) == simd && !tokd_packed_get_avx2(iq4_types[i]), "type %u packed %s on the %s path", iq4_types[i],
              pk ? "offered" : "not offered", tokd_kernels_path());
        if (pk) check_type(iq4_types[i], pk, pool2);
        if (pk) check_extremes(iq4_types[i], pk), check_prep_cols(iq4_types[i], pk);
    }
    /* an AVX-512 VNNI CPU runs an AVX-512 kernel for every type (Q6_K, Q3_K and Q2_K's
       need GFNI too; packed.c), Q4_1 and Q5_1 included */
    for (int i = 0; simd && i < n_types; i++) {
        const int k16 = types[i] == GGML_TYPE_Q6_K || types[i] == GGML_TYPE_Q3_K || types[i] == GGML_TYPE_Q2_K;
        const tokd_packed_traits *pk = tokd_packed_get_any(types[i]), *avx2 = tokd_packed_get_avx2(types[i]);
        CHECK(pk && avx2 && (pk->gemm != avx2->gemm) == (!k16 || c->gfni), "type %u: the AVX-512 kernel on AVX-512 VNNI",
              types[i]);
    }
    /* both AVX2 kernels (vpmaddubsw, and AVX-VNNI's vpdpbusd) wherever the CPU can run
       them, whichever path this process runs */
    if (c->avx2 && c->fma && c->f16c) {
        for (int i = 0; i < n_types; i++) {
            const uint32_t *avx2_types = types;
            const tokd_packed_traits *plain = tokd_packed_get_avx2_form(avx2_types[i], 0);
            const tokd_packed_traits *vnni = tokd_packed_get_avx2_form(avx2_types[i], 1);
            CHECK(plain != NULL, "AVX2 offers type %u", avx2_types[i]);
            CHECK((vnni != NULL) == c->avxvnni && tokd_packed_get_avx2(avx2_types[i]) == (c->avxvnni ? vnni : plain),
                  "type %u: the AVX2 form takes the AVX-VNNI kernel exactly where the CPU has AVX-VNNI", avx2_types[i]);
            if (plain) check_type(avx2_types[i], plain, pool2), check_extremes(avx2_types[i], plain), check_prep_cols(avx2_types[i], plain);
            if (vnni) check_type(avx2_types[i], vnni, pool2), check_extremes(avx2_types[i], vnni), check_prep_cols(avx2_types[i], vnni);
            if (plain && vnni) CHECK(plain->gemm != vnni->gemm, "type %u: two distinct AVX2 kernels", avx2_types[i]);
        }
    }
    { /* the weights' buffer: 2 MiB-aligned, zeroed, writable end to end */
        const size_t n = ((size_t)5 << 20) + 4096 + 7;
        uint8_t *h = tokd_huge_alloc(n);
        int zero = h != NULL, aligned = h && ((uintptr_t)h & (((uintptr_t)2 << 20) - 1)) == 0;
        for (size_t i = 0; h && i < n; i += 4093) zero &= h[i] == 0;
        if (h) {
            memset(h, 0xA5, n);
            zero &= h[n - 1] == 0xA5 && h[0] == 0xA5;
        }
        tokd_huge_free(h, n);
        CHECK(aligned && zero, "tokd_huge_alloc: a 2 MiB-aligned, zeroed, writable buffer");
    }
    /* types without a packed form stay unpacked; a height of an odd number of 16-row
       groups, counting a padded last one, takes AVX-512 Q4_0's 16-row form */
    CHECK(tokd_packed_get_any(GGML_TYPE_F16) == NULL && tokd_packed_get_avx2(GGML_TYPE_F16) == NULL,
          "F16 has no packed form, on AVX-512 nor on AVX2");
    if (simd) {
        const tokd_packed_traits *x32 = tokd_packed_get_any(GGML_TYPE_Q4_0);
        CHECK(tokd_packed_fit(x32, 40)->group_rows == 16 && tokd_packed_fit(x32, 60) == x32,
              "AVX-512 Q4_0: 40 rows (three 16-row groups) in the 16-row form, 60 (four) in 32-row groups");
    }
    check_float_matmul(pool2);
    tokd_pool_free(pool2);
    T_DONE();
}
