/* outfile.c — see outfile.h. */
#include "outfile.h"

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The PATH.tmp names being written; a signal handler reads them, so they are atomics
 * (lock-free pointers) and each name stays allocated while registered. */
static _Atomic(const char *) pending[TOKD_OUTFILE_MAX_PENDING];

static int register_pending(const char *tmp) {
    for (int i = 0; i < TOKD_OUTFILE_MAX_PENDING; i++) {
        const char *none = NULL;
        if (atomic_compare_exchange_strong(&pending[i], &none, tmp)) return i;
    }
    return -1;
}

static void unregister_pending(tokd_outfile *o) {
    if (o->slot >= 0) atomic_store(&pending[o->slot], NULL);
    o->slot = -1;
}

void tokd_outfile_remove_pending(void) {
    for (int i = 0; i < TOKD_OUTFILE_MAX_PENDING; i++) {
        const char *tmp = atomic_load(&pending[i]);
        if (tmp) unlink(tmp);
    }
}

static void release(tokd_outfile *o) {
    unregister_pending(o);
    free(o->path);
    free(o->tmp);
    o->path = o->tmp = NULL;
    o->fp = NULL;
}

int tokd_outfile_open(tokd_outfile *o, const char *path, tokd_err *err) {
    memset(o, 0, sizeof *o);
    o->slot = -1;
    struct stat st, lst;
    const bool exists = stat(path, &st) == 0;
    if (exists && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) { /* a device or a FIFO: write in place */
        o->path = tokd_xstrdup(path);
        o->fp = fopen(path, "wb");
        if (!o->fp) {
            tokd_seterr(err, "cannot write '%s': %s", path, strerror(errno));
            release(o);
            return -1;
        }
        return 0;
    }
    /* A link to a regular file: the file it names is replaced, not the link. */
    char resolved[PATH_MAX];
    const bool link = exists && lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode) && realpath(path, resolved);
    o->path = tokd_xstrdup(link ? resolved : path);
    tokd_buf tmp = {0};
    tokd_buf_appendf(&tmp, "%s.tmp", o->path);
    o->tmp = tmp.data;
    o->slot = register_pending(o->tmp); /* before the file exists, so no moment leaves it unlisted */
    if (o->slot < 0) {
        tokd_seterr(err, "cannot write '%s': more than %d output files open at once", path, TOKD_OUTFILE_MAX_PENDING);
        release(o);
        return -1;
    }
    o->fp = fopen(o->tmp, "wb");
    if (!o->fp) {
        tokd_seterr(err, "cannot create '%s': %s", o->tmp, strerror(errno));
        release(o);
        return -1;
    }
    return 0;
}

int tokd_outfile_commit(tokd_outfile *o, tokd_err *err) {
    int e = 0;
    if (fflush(o->fp) != 0 || ferror(o->fp)) e = errno ? errno : EIO;
    if (fclose(o->fp) != 0 && !e) e = errno ? errno : EIO;
    o->fp = NULL;
    if (e) {
        tokd_seterr(err, "cannot write '%s': %s", o->path, strerror(e));
        if (o->tmp) unlink(o->tmp);
        release(o);
        return -1;
    }
    if (o->tmp && rename(o->tmp, o->path) != 0) {
        tokd_seterr(err, "cannot rename '%s' to '%s': %s", o->tmp, o->path, strerror(errno));
        unlink(o->tmp);
        release(o);
        return -1;
    }
    release(o);
    return 0;
}

void tokd_outfile_abort(tokd_outfile *o) {
    if (o->fp) fclose(o->fp);
    if (o->tmp) unlink(o->tmp);
    release(o);
}

int tokd_write_file(const char *path, const void *data, size_t n, tokd_err *err) {
    tokd_outfile o;
    if (tokd_outfile_open(&o, path, err)) return -1;
    if (fwrite(data, 1, n, o.fp) != n) {
        tokd_seterr(err, "cannot write '%s': %s", path, strerror(errno));
        tokd_outfile_abort(&o);
        return -1;
    }
    return tokd_outfile_commit(&o, err);
}
