/* outfile.h — an output file that appears whole or not at all, and that Ctrl-C does not
 * leave half-written.
 *
 * A command that writes a model or a matrix (quantize, synth, imatrix) writes PATH.tmp
 * and renames it over PATH once every byte is there, so that a reader never sees a
 * partial file and an old PATH survives a failed write. Two things go wrong with that
 * alone:
 *   - PATH may be something other than a regular file: a device (/dev/null), a FIFO. A
 *     rename would replace it with a regular file (as root, /dev/null itself). Such a
 *     PATH is opened and written in place instead; only a regular file or a new name
 *     goes through PATH.tmp.
 *   - A signal ends the process before the rename, leaving PATH.tmp (gigabytes for a
 *     real model). Every PATH.tmp being written is registered while it is open, and
 *     tokd_outfile_remove_pending, which is async-signal-safe, removes them: the CLI's
 *     handlers for SIGINT, SIGTERM and SIGHUP call it before the default action.
 * At most TOKD_OUTFILE_MAX_PENDING are open at once (a command writes one or two). */
#ifndef TOKD_OUTFILE_H
#define TOKD_OUTFILE_H

#include <stdio.h>

#include "util.h"

#define TOKD_OUTFILE_MAX_PENDING 8

typedef struct {
    FILE *fp;   /* write here */
    char *path; /* the destination */
    char *tmp;  /* PATH.tmp, renamed to path on commit; NULL when writing in place */
    int slot;   /* its place among the pending names, or -1 */
} tokd_outfile;

/* Open path for writing (see above). On error: -1 with err naming the file. */
int tokd_outfile_open(tokd_outfile *o, const char *path, tokd_err *err);
/* Flush and close; rename into place when written through PATH.tmp. On error the
 * temporary file is removed and -1 returned. Frees o's names either way. */
int tokd_outfile_commit(tokd_outfile *o, tokd_err *err);
/* Close and remove the temporary file (a file written in place is left as it is).
 * Frees o's names. An o that was never opened (zeroed) is fine. */
void tokd_outfile_abort(tokd_outfile *o);
/* Writes n bytes to path whole or not at all (open, write, commit): a failure (disk full,
 * no such folder) leaves any earlier file at path as it was and no partial one. -1 with
 * err set when it cannot. */
int tokd_write_file(const char *path, const void *data, size_t n, tokd_err *err);
/* Remove every PATH.tmp still being written. Async-signal-safe (unlink only). */
void tokd_outfile_remove_pending(void);

#endif
