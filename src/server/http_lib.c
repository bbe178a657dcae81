/* http_lib.c — see http_lib.h.
 *
 * The library is opened by its soname (the runtime package's file, libmicrohttpd.so.12
 * on Debian 12), falling back to the development link, or from the path or name in
 * TOKD_LIBMICROHTTPD when that is set (a build kept elsewhere; the tests point it at
 * files that are not the library). RTLD_NOW resolves everything at once so that a broken
 * installation fails here, with a message, and not in the middle of a request. The
 * outcome of the one attempt is kept: later calls see the same table or the same error. */
#include "server/http_lib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static tokd_http_lib lib;
static const tokd_http_lib *loaded;
static char load_error[512];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void) {
    const char *given = getenv("TOKD_LIBMICROHTTPD");
    const char *const names[] = {given && *given ? given : "libmicrohttpd.so.12", given && *given ? NULL : "libmicrohttpd.so"};
    void *h = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && names[i] && !h; i++) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        snprintf(load_error, sizeof load_error,
                 "cannot load libmicrohttpd, which the server needs (%s); on Debian: apt-get install libmicrohttpd12",
                 why ? why : "not found");
        return;
    }
    /* dlsym returns void *; the table's members are function pointers of the header's
     * types. The conversion is what POSIX specifies dlsym for. */
#define RESOLVE(member, symbol)                                                                            \
    do {                                                                                                   \
        void *p = dlsym(h, symbol);                                                                        \
        if (!p) {                                                                                          \
            snprintf(load_error, sizeof load_error, "the libmicrohttpd found has no %s", symbol);         \
            dlclose(h);                                                                                    \
            return;                                                                                        \
        }                                                                                                  \
        memcpy(&lib.member, &p, sizeof p);                                                                 \
    } while (0)
    RESOLVE(start_daemon, "MHD_start_daemon");
    RESOLVE(stop_daemon, "MHD_stop_daemon");
    RESOLVE(quiesce_daemon, "MHD_quiesce_daemon");
    RESOLVE(get_daemon_info, "MHD_get_daemon_info");
    RESOLVE(get_connection_info, "MHD_get_connection_info");
    RESOLVE(lookup_connection_value, "MHD_lookup_connection_value");
    RESOLVE(create_response_from_buffer, "MHD_create_response_from_buffer");
    RESOLVE(create_response_from_callback, "MHD_create_response_from_callback");
    RESOLVE(add_response_header, "MHD_add_response_header");
    RESOLVE(queue_response, "MHD_queue_response");
    RESOLVE(destroy_response, "MHD_destroy_response");
#undef RESOLVE
    loaded = &lib;
}

const tokd_http_lib *tokd_http_lib_load(tokd_err *err) {
    pthread_once(&load_once, load);
    if (!loaded) tokd_seterr(err, "%s", load_error);
    return loaded;
}
