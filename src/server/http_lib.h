/* http_lib.h — libmicrohttpd, opened when the server starts instead of linked into tokd.
 *
 * Linked, libmicrohttpd brings GnuTLS and eight more shared libraries into every tokd
 * process, and the dynamic loader spends ~4 ms mapping and relocating them at each start:
 * half the start-up of `tokd info` or `tokd tokenize`, which never serve. Opened here,
 * only `tokd serve` pays it, and a machine without the library can still run every
 * other command; `serve` then says which library is missing.
 *
 * The table holds the functions server.c calls, typed from <microhttpd.h> itself, so a
 * call through it is checked exactly as a direct call would be. */
#ifndef TOKD_SERVER_HTTP_LIB_H
#define TOKD_SERVER_HTTP_LIB_H

#include <microhttpd.h>

#include "util.h"

typedef struct {
    __typeof__(MHD_start_daemon) *start_daemon;
    __typeof__(MHD_stop_daemon) *stop_daemon;
    __typeof__(MHD_quiesce_daemon) *quiesce_daemon;
    __typeof__(MHD_get_daemon_info) *get_daemon_info;
    __typeof__(MHD_get_connection_info) *get_connection_info;
    __typeof__(MHD_lookup_connection_value) *lookup_connection_value;
    __typeof__(MHD_create_response_from_buffer) *create_response_from_buffer;
    __typeof__(MHD_create_response_from_callback) *create_response_from_callback;
    __typeof__(MHD_add_response_header) *add_response_header;
    __typeof__(MHD_queue_response) *queue_response;
    __typeof__(MHD_destroy_response) *destroy_response;
} tokd_http_lib;

/* The library's functions, loaded on the first call (thread-safe; later calls return
 * the same table). NULL, with the reason in err, when the library or one of its
 * functions cannot be found. The library stays loaded until the process exits. */
const tokd_http_lib *tokd_http_lib_load(tokd_err *err);

#endif
