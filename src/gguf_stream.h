/* gguf_stream.h — a GGUF v3 writer that streams tensor data straight to the file.
 *
 * gguf_writer (gguf.h) keeps every tensor in memory until it serialises, which is fine
 * for test files but not for a 1.1B-parameter model. This writer takes the metadata
 * from a gguf_writer (so the same set_* / copy_kv calls build it) and the list of
 * tensors up front — name, shape, type, byte size — writes the header, the metadata and
 * the tensor infos (offsets follow from the sizes), then accepts each tensor's bytes in
 * order, in pieces of any size. Memory stays bounded by the caller's pieces.
 *
 * The file is an outfile (outfile.h): written to PATH.tmp and renamed to PATH by
 * gguf_stream_close once every byte announced has arrived (a device or FIFO at PATH is
 * written in place); gguf_stream_abort removes it. */
#ifndef TOKD_GGUF_STREAM_H
#define TOKD_GGUF_STREAM_H

#include <stdint.h>
#include <stddef.h>

#include "gguf.h"

typedef struct {
    const char *name;
    uint32_t type, n_dims;
    uint64_t ne[GGUF_MAX_DIMS]; /* unused dims: 1 */
    uint64_t nbytes;
} gguf_stream_tensor;

typedef struct gguf_stream gguf_stream;

/* meta holds metadata only (tensors added to it are ignored). The data alignment is
 * meta's general.alignment if set, else 32. */
gguf_stream *gguf_stream_create(const char *path, gguf_writer *meta, const gguf_stream_tensor *tensors, uint64_t n_tensors,
                                tokd_err *err);
/* Append n bytes of tensor data: they continue the current tensor, moving on to the
 * next one (after padding) when it is complete. Writing more than announced fails. */
int gguf_stream_write(gguf_stream *s, const void *data, size_t n, tokd_err *err);
/* Check that every tensor is complete, flush, rename into place, free s. */
int gguf_stream_close(gguf_stream *s, tokd_err *err);
/* Discard: close and remove the partial file, free s. NULL is fine. */
void gguf_stream_abort(gguf_stream *s);

#endif
