/* gguf.h — GGUF file reader (v2, v3) and writer.
 *
 * The reader mmaps the file and validates everything before anything else looks at it:
 * every count, length, size and offset is checked, with overflow-safe arithmetic,
 * against the bytes actually present. After gguf_open succeeds, every gguf_str points
 * inside the mapping, every tensor's [data, data+nbytes) lies inside the file, and
 * every array's element count matches the bytes it occupies. Strings are NOT
 * NUL-terminated (GGUF does not require it); compare with gguf_str_eq.
 *
 * Metadata values are kept as parsed descriptors pointing into the mapping; arrays of
 * scalars are read element by element through accessors (the data is unaligned, little
 * endian), arrays of strings and of arrays get a descriptor per element. */
#ifndef TOKD_GGUF_H
#define TOKD_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

typedef enum {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
} gguf_type;

typedef struct {
    const char *ptr; /* inside the mapping (or caller memory for the writer) */
    uint64_t len;
} gguf_str;

typedef struct gguf_value gguf_value;

typedef struct {
    gguf_type elem_type;
    uint64_t n;
    const uint8_t *data;     /* scalar arrays: n * elem_size raw little-endian bytes */
    gguf_str *strs;          /* string arrays: n descriptors (owned by the gguf_file) */
    gguf_value *arrs;        /* arrays of arrays: n values of type ARRAY (owned) */
} gguf_array;

struct gguf_value {
    gguf_type type;
    union {
        uint64_t u64;  /* UINT8..UINT64 */
        int64_t i64;   /* INT8..INT64 */
        double f64;    /* FLOAT32, FLOAT64 */
        bool b;
        gguf_str str;
        gguf_array arr;
    } v;
};

typedef struct {
    gguf_str key;
    gguf_value value;
} gguf_kv;

/* ggml tensor types that may appear in files (ids as in GGUF). */
enum {
    GGML_TYPE_F32 = 0, GGML_TYPE_F16 = 1, GGML_TYPE_Q4_0 = 2, GGML_TYPE_Q4_1 = 3,
    GGML_TYPE_Q5_0 = 6, GGML_TYPE_Q5_1 = 7, GGML_TYPE_Q8_0 = 8, GGML_TYPE_Q8_1 = 9,
    GGML_TYPE_Q2_K = 10, GGML_TYPE_Q3_K = 11, GGML_TYPE_Q4_K = 12, GGML_TYPE_Q5_K = 13,
    GGML_TYPE_Q6_K = 14, GGML_TYPE_Q8_K = 15, GGML_TYPE_IQ2_XXS = 16, GGML_TYPE_IQ2_XS = 17,
    GGML_TYPE_IQ3_XXS = 18, GGML_TYPE_IQ1_S = 19, GGML_TYPE_IQ4_NL = 20, GGML_TYPE_IQ3_S = 21, GGML_TYPE_IQ2_S = 22,
    GGML_TYPE_IQ4_XS = 23, GGML_TYPE_I8 = 24, GGML_TYPE_I16 = 25,
    GGML_TYPE_I32 = 26, GGML_TYPE_I64 = 27, GGML_TYPE_F64 = 28, GGML_TYPE_IQ1_M = 29, GGML_TYPE_BF16 = 30,
    GGML_TYPE_MAX_ID = 40
};

/* Block geometry of a ggml type: elements per block and bytes per block. Returns false
 * for types this build does not know (the file is then rejected, naming the type). */
bool ggml_type_geometry(uint32_t type, uint32_t *blck, uint32_t *bytes);
const char *ggml_type_name(uint32_t type);

#define GGUF_MAX_DIMS 4

typedef struct {
    gguf_str name;
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS]; /* ne[0] is the contiguous (row) dimension; unused = 1 */
    uint32_t type;
    uint64_t offset;            /* relative to the data section */
    const void *data;           /* inside the mapping */
    uint64_t nbytes;
} gguf_tensor;

typedef struct gguf_file {
    uint32_t version;
    uint64_t alignment;
    uint64_t n_kv;
    gguf_kv *kv;
    uint64_t n_tensors;
    gguf_tensor *tensors;
    const uint8_t *map;
    uint64_t size;
    uint64_t data_offset;
    void *arena;  /* owned allocations (string/array descriptors) */
    void *mapping;      /* non-NULL when gguf_open mapped the file itself */
    uint64_t mapping_len;
} gguf_file;

/* Open and validate. On failure returns NULL with err naming the problem. */
gguf_file *gguf_open(const char *path, tokd_err *err);
/* Parse a buffer already in memory (used by fuzzers and tests). The buffer must
 * outlive the returned file. */
gguf_file *gguf_open_buffer(const void *buf, uint64_t size, tokd_err *err);
void gguf_close(gguf_file *f);

bool gguf_str_eq(gguf_str s, const char *cstr);

/* Metadata lookup. Returns NULL if absent. */
const gguf_value *gguf_get(const gguf_file *f, const char *key);

/* Typed getters: return 0 and store, 1 if the key is absent (out untouched), or -1 with
 * err set if present with an incompatible type or out of range. Integer getters accept
 * any integer type whose value fits. Float getters accept FLOAT32/FLOAT64 and integers. */
int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out, tokd_err *err);
int gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out, tokd_err *err);
int gguf_get_i64(const gguf_file *f, const char *key, int64_t *out, tokd_err *err);
int gguf_get_f32(const gguf_file *f, const char *key, float *out, tokd_err *err);
int gguf_get_bool(const gguf_file *f, const char *key, bool *out, tokd_err *err);
int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out, tokd_err *err);
/* Array getter: elem_type must match want_type (or pass GGUF_TYPE_COUNT for any). */
int gguf_get_arr(const gguf_file *f, const char *key, gguf_type want_type, gguf_array *out, tokd_err *err);

/* Element access for scalar arrays (index must be < n; caller checks). Integer
 * arrays of any width read as int64; float arrays as double. */
int64_t gguf_arr_i64(const gguf_array *a, uint64_t i);
double gguf_arr_f64(const gguf_array *a, uint64_t i);
size_t gguf_type_size(gguf_type t); /* scalar size, 0 for STRING/ARRAY */
const char *gguf_type_name(gguf_type t);

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);

/* ---- Writer ---------------------------------------------------------------------
 * Builds a GGUF v3 file in memory: add metadata and tensors (data copied), then write.
 * Used by `tokd quantize`, `tokd synth` and by tests that craft small files. */
typedef struct gguf_writer gguf_writer;
gguf_writer *gguf_writer_new(void);
void gguf_writer_free(gguf_writer *w);
void gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v);
void gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v);
void gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v);
void gguf_writer_set_f32(gguf_writer *w, const char *key, float v);
void gguf_writer_set_bool(gguf_writer *w, const char *key, bool v);
void gguf_writer_set_str(gguf_writer *w, const char *key, const char *v);
void gguf_writer_set_str_n(gguf_writer *w, const char *key, const char *v, uint64_t len);
/* Scalar array: n elements of elem_type, raw little-endian data. */
void gguf_writer_set_arr(gguf_writer *w, const char *key, gguf_type elem_type, const void *data, uint64_t n);
void gguf_writer_set_str_arr(gguf_writer *w, const char *key, const gguf_str *strs, uint64_t n);
/* Copy a metadata value from an open file (any type, including nested arrays). */
void gguf_writer_copy_kv(gguf_writer *w, const gguf_kv *kv);
void gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                            const uint64_t *ne, const void *data, uint64_t nbytes);
/* Serialise to a malloc'd buffer (*out, *out_size) or to a file. */
int gguf_writer_to_buffer(gguf_writer *w, uint8_t **out, uint64_t *out_size, tokd_err *err);
int gguf_writer_to_file(gguf_writer *w, const char *path, tokd_err *err);

#endif
