/* row_forms.h — the entry points of a float-row kernel family built around one worker.
 *
 * bf16_rows.c and f32_rows.c each write, per path ISA, one always_inline worker
 *   rows_ISA(n, out, w, act, act_stride, R, stream)
 * (one weight row against R = 1..4 activation rows; stream: decode's prefetches). The
 * forms types.h names are that worker with constants, so the compiler unrolls it and
 * keeps the lane sums in registers; this macro spells them out once for both. */
#ifndef TOKD_KERNELS_ROW_FORMS_H
#define TOKD_KERNELS_ROW_FORMS_H

/* tokd_T_dot_ISA (vec_dot), tokd_T_stream_dot_ISA (vec_dot_stream), tokd_T_stream_rows_ISA
 * (vec_dot_stream_rows) and tokd_T_dot4_ISA (vec_dot4), with the target attribute TGT. */
#define TOKD_ROW_FORMS(T, ISA, TGT)                                                                      \
    TGT void tokd_##T##_dot_##ISA(int64_t n, float *out, const void *w, const void *act) {               \
        rows_##ISA(n, out, w, act, 0, 1, 0);                                                             \
    }                                                                                                    \
    TGT void tokd_##T##_stream_dot_##ISA(int64_t n, float *out, const void *w, const void *act) {        \
        rows_##ISA(n, out, w, act, 0, 1, 1);                                                             \
    }                                                                                                    \
    /* decode of a few sequences: the weight row read once, with the stream's prefetches */            \
    TGT void tokd_##T##_stream_rows_##ISA(int64_t n, float *out, const void *w, const void *act, size_t as, \
                                          int rows) {                                                    \
        switch (rows) {                                                                                  \
        case 1: rows_##ISA(n, out, w, act, as, 1, 1); break;                                             \
        case 2: rows_##ISA(n, out, w, act, as, 2, 1); break;                                             \
        case 3: rows_##ISA(n, out, w, act, as, 3, 1); break;                                             \
        default: rows_##ISA(n, out, w, act, as, 4, 1); break;                                            \
        }                                                                                                \
    }                                                                                                    \
    /* prefill: four activation rows from cache */                                                      \
    TGT void tokd_##T##_dot4_##ISA(int64_t n, float out[4], const void *w, const void *act, size_t as) { \
        rows_##ISA(n, out, w, act, as, 4, 0);                                                            \
    }

#endif
