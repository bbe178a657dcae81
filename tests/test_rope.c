/* test_rope.c — rope.c: the selected RoPE loop, and the AVX2 one whichever path runs,
 * give the scalar statement's bits in both styles, for rotations narrower than the head
 * (partial rotary), several positions and head counts, and values of many magnitudes;
 * dims past n_rot are left alone; the statement rotates as cos/sin do (norms kept,
 * a known angle checked in double); and the table divides each angle by the model's
 * frequency factor (rope_freqs.weight) where it has one. */
#include <math.h>
#include <string.h>

#include "kernels/types.h"
#include "rope.h"
#include "t.h"
#include "t_rand.h"

static uint64_t rng = 0x243F6A8885A308D3ull;

static void check_paths(void) {
    const int32_t hds[] = {64, 128, 96};
    const int32_t rots[] = {64, 32, 96, 2, 20};
    float x[8 * 128], y[8 * 128], z[8 * 128], z2[8 * 128], cs[128];
    int bad = 0, bad_tail = 0, cases = 0, bad_avx2 = 0, avx2_cases = 0, bad_refusal = 0;
    for (int neox = 0; neox < 2; neox++)
        for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++)
            for (size_t ri = 0; ri < sizeof rots / sizeof rots[0]; ri++) {
                const int32_t hd = hds[hi], n_rot = rots[ri];
                if (n_rot > hd) continue;
                for (int32_t pos = 0; pos < 5000; pos += 997) {
                    tokd_rope_table(cs, pos, n_rot, 10000.0f, pos % 2 ? 1.0f : 0.25f, NULL);
                    for (int i = 0; i < 8 * hd; i++) x[i] = t_rand_half(&rng) * (i % 17 == 0 ? 300.0f : i % 5 == 0 ? 1e-3f : 4.0f);
                    memcpy(y, x, sizeof(float) * 8 * (size_t)hd);
                    memcpy(z, x, sizeof(float) * 8 * (size_t)hd);
                    tokd_rope_apply_ref(y, 8, hd, n_rot, neox, cs);
                    tokd_rope_apply(z, 8, hd, n_rot, neox, cs);
                    bad += memcmp(y, z, sizeof(float) * 8 * (size_t)hd) != 0;
                    memcpy(z2, x, sizeof(float) * 8 * (size_t)hd);
                    int took = tokd_rope_apply_avx2(z2, 8, hd, n_rot, neox, cs) == 0;
                    avx2_cases += took;
                    bad_avx2 += took && memcmp(y, z2, sizeof(float) * 8 * (size_t)hd) != 0;
                    bad_refusal += took != (tokd_cpu_avx2() && n_rot % 16 == 0);
                    for (int h = 0; h < 8; h++)
                        bad_tail += memcmp(z + h * hd + n_rot, x + h * hd + n_rot, sizeof(float) * (size_t)(hd - n_rot)) != 0;
                    cases++;
                }
            }
    CHECK(bad == 0, "%d of %d RoPE cases of the %s path differ from the scalar statement", bad, cases, tokd_kernels_path());
    CHECK(bad_tail == 0, "%d RoPE cases changed dims past n_rot", bad_tail);
    CHECK(bad_avx2 == 0, "%d of %d RoPE cases of the AVX2 loop differ from the scalar statement", bad_avx2, avx2_cases);
    CHECK(bad_refusal == 0, "the AVX2 loop took or refused %d cases wrongly", bad_refusal);
    CHECK(avx2_cases > 0 || !tokd_cpu_avx2(), "the AVX2 loop took no case on an AVX2 machine");
}

/* The statement against the rotation in double: pair 0 turns by pos radians (its
 * frequency is 1), every pair keeps its norm. */
static void check_rotation(void) {
    float cs[64], v[64];
    const int32_t pos = 3;
    tokd_rope_table(cs, pos, 64, 10000.0f, 1.0f, NULL);
    for (int i = 0; i < 64; i++) v[i] = (float)(i % 7) - 2.5f;
    float w[64];
    memcpy(w, v, sizeof v);
    tokd_rope_apply(w, 1, 64, 64, false, cs);
    double want0 = v[0] * cos(3.0) - v[1] * sin(3.0), want1 = v[0] * sin(3.0) + v[1] * cos(3.0);
    CHECK(fabs(w[0] - want0) < 1e-5 && fabs(w[1] - want1) < 1e-5, "pair 0 rotated by 3 rad: %g %g vs %g %g", w[0], w[1],
          want0, want1);
    double worst = 0;
    for (int i = 0; i < 32; i++) {
        double n0 = hypot(v[2 * i], v[2 * i + 1]), n1 = hypot(w[2 * i], w[2 * i + 1]);
        if (fabs(n1 - n0) > worst) worst = fabs(n1 - n0);
    }
    CHECK(worst < 1e-5, "rotation changed a pair's norm by %g", worst);
}

/* Frequency factors (Llama 3.1+'s rope_freqs.weight): factors of 1 give the bits of no
 * factors; a pair whose factor is 1 keeps its entry and the others change; each angle is
 * (pos * base^(-2i/n_rot) / factor) * scale, checked in double. */
static void check_freq_factors(void) {
    enum { N_ROT = 64, HALF = N_ROT / 2 };
    float ones[HALF], ff[HALF], plain[N_ROT], with_ones[N_ROT], with_ff[N_ROT];
    for (int i = 0; i < HALF; i++) {
        ones[i] = 1.0f;
        ff[i] = i < 12 ? 1.0f : i > 18 ? 32.0f : 1.0f + 31.0f * (float)(i - 12) / 6.0f; /* llama3's shape */
    }
    int bad_ones = 0, bad_kept = 0, bad_changed = 0;
    double worst = 0;
    for (int32_t pos = 0; pos <= 300; pos += 37) {
        tokd_rope_table(plain, pos, N_ROT, 500000.0f, 0.5f, NULL);
        tokd_rope_table(with_ones, pos, N_ROT, 500000.0f, 0.5f, ones);
        tokd_rope_table(with_ff, pos, N_ROT, 500000.0f, 0.5f, ff);
        bad_ones += memcmp(plain, with_ones, sizeof plain) != 0;
        for (int i = 0; i < HALF; i++) {
            const int same = memcmp(plain + 2 * i, with_ff + 2 * i, 2 * sizeof(float)) == 0;
            if (ff[i] == 1.0f) bad_kept += !same;
            else bad_changed += pos > 0 && same;
            const double angle = pos * pow(500000.0, -2.0 * i / N_ROT) / ff[i] * 0.5;
            const double e = fmax(fabs(with_ff[2 * i] - cos(angle)), fabs(with_ff[2 * i + 1] - sin(angle)));
            worst = e > worst ? e : worst;
        }
    }
    CHECK(bad_ones == 0, "%d RoPE tables with factors of 1 differ from no factors", bad_ones);
    CHECK(bad_kept == 0 && bad_changed == 0, "RoPE factors: %d pairs of factor 1 changed, %d others kept", bad_kept,
          bad_changed);
    CHECK(worst < 1e-4, "RoPE table with factors off the angle in double by %g", worst);
}

/* The statement's rounding, pair by pair, in both styles: x0' = fma(x0, c, -(x1 * s)),
 * x1' = fma(x0, s, x1 * c), as llama.cpp's GCC build computes it (rope.h). The inputs
 * are such that two rounded products would differ in many places (counted). */
static void check_fused(void) {
    enum { N_ROT = 64, HEADS = 2 };
    float cs[N_ROT], x[HEADS * N_ROT], want[HEADS * N_ROT], got[HEADS * N_ROT];
    tokd_rope_table(cs, 37, N_ROT, 10000.0f, 1.0f, NULL);
    int bad = 0, plain_differs = 0;
    for (int neox = 0; neox < 2; neox++) {
        for (int i = 0; i < HEADS * N_ROT; i++) x[i] = sinf(0.37f * (float)i + 0.1f) * 3.0f;
        for (int h = 0; h < HEADS; h++)
            for (int i = 0; i < N_ROT / 2; i++) {
                const int a = h * N_ROT + (neox ? i : 2 * i), b = h * N_ROT + (neox ? i + N_ROT / 2 : 2 * i + 1);
                const float c = cs[2 * i], s = cs[2 * i + 1], x0 = x[a], x1 = x[b];
                const float p1 = x1 * s, p2 = x1 * c;
                want[a] = fmaf(x0, c, -p1);
                want[b] = fmaf(x0, s, p2);
                const float q0 = x0 * c, q1 = x0 * s;
                plain_differs += (q0 - p1 != want[a]) + (q1 + p2 != want[b]);
            }
        for (int path = 0; path < 3; path++) {
            memcpy(got, x, sizeof x);
            if (path == 0) tokd_rope_apply_ref(got, HEADS, N_ROT, N_ROT, neox, cs);
            else if (path == 1) tokd_rope_apply(got, HEADS, N_ROT, N_ROT, neox, cs);
            else if (tokd_rope_apply_avx2(got, HEADS, N_ROT, N_ROT, neox, cs)) continue;
            bad += memcmp(got, want, sizeof got) != 0;
        }
    }
    CHECK(plain_differs > 0, "the inputs tell the fused form from two rounded products (%d places)", plain_differs);
    CHECK(bad == 0, "%d paths and styles differ from the fused rotation", bad);
}

int main(void) {
    tokd_kernels_init();
    check_paths();
    check_rotation();
    check_freq_factors();
    check_fused();
    T_DONE();
}
