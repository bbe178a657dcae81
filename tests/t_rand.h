/* t_rand.h — the one pseudo-random generator of the test programs.
 * splitmix64 on a caller-owned state: each test keeps its own `uint64_t` state and seed, so its
 * data are reproducible run to run and independent of the other tests, and of the library's
 * sampler PRNG (a test's draws never move the sampler's stream, nor the reverse). */
#ifndef TOKD_T_RAND_H
#define TOKD_T_RAND_H
#include <math.h>
#include <stdint.h>

/* 64 random bits (splitmix64: any seed, 0 included, gives a full-period stream). */
static inline uint64_t t_rand_u64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform double in [0, 1) from 53 random bits. */
static inline double t_rand_unit(uint64_t *state) { return (double)(t_rand_u64(state) >> 11) * 0x1.0p-53; }

/* Uniform double in [-1, 1). */
static inline double t_rand_pm1(uint64_t *state) { return t_rand_unit(state) * 2.0 - 1.0; }

/* Uniform float in [-0.5, 0.5) from 24 random bits (every value exact in a float). */
static inline float t_rand_half(uint64_t *state) {
    return (float)(t_rand_u64(state) >> 40) * 0x1.0p-24f - 0.5f;
}

/* Standard normal (Box-Muller, one of the pair). */
static inline float t_rand_gauss(uint64_t *state) {
    double u = t_rand_unit(state), v = t_rand_unit(state);
    if (u < 1e-300) u = 1e-300;
    return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
}
#endif
