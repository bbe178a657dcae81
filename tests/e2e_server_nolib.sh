#!/usr/bin/env bash
# e2e_server_nolib.sh — `tokd serve` on a machine without a usable libmicrohttpd
# (src/server/http_lib.c): TOKD_LIBMICROHTTPD points the loader at a file that does not
# exist, then at a library that is not libmicrohttpd (libm). Each time serve exits 1 at
# once with one line naming the library and what went wrong (before it reads the model),
# and listens on nothing; tokd itself does not link the library, so the other commands
# run without it. Prints "N passed, M failed".
set -u
TOKD=${TOKD:-build/tokd}
SHARED=${TOKD_SHARED:-../shared}
. "$(dirname "$0")/checks.sh"

# serve_without LIB PATTERN: serve exits 1 within 10 s, its stderr matching PATTERN, nothing listening
serve_without() {
    TOKD_LIBMICROHTTPD="$1" timeout 10 "$TOKD" serve -m "$tmp/no-such-model.gguf" --port 0 >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ "$rc" -eq 1 ]; then ok; else bad "serve with $1: exit $rc, expected 1"; fi
    if grep -Eq "^tokd serve: $2" "$tmp/err"; then ok; else bad "serve with $1: message '$(cat "$tmp/err")'"; fi
    # the library is checked before the model is read: the model's path is never named
    if grep -q 'no-such-model' "$tmp/err"; then bad "serve with $1 read the model first: $(cat "$tmp/err")"; else ok; fi
    if [ "$(wc -l <"$tmp/err")" -eq 1 ] && ! grep -q listening "$tmp/err" "$tmp/out"; then ok; else bad "serve with $1: output $(cat "$tmp/err" "$tmp/out")"; fi
}
serve_without /nonexistent/libmicrohttpd.so.12 \
    'cannot load libmicrohttpd, which the server needs \(/nonexistent/libmicrohttpd.so.12: .*\); on Debian: apt-get install libmicrohttpd12$'
serve_without libm.so.6 'the libmicrohttpd found has no MHD_start_daemon$'

# tokd does not link it: the other commands start on a machine without it
if ldd "$TOKD" >"$tmp/ldd" 2>&1 && ! grep -q microhttpd "$tmp/ldd"; then ok; else bad "tokd links libmicrohttpd: $(cat "$tmp/ldd")"; fi
out=$(TOKD_LIBMICROHTTPD=/nonexistent "$TOKD" run -m "$SHARED/models/stories260K.gguf" -p "Once upon a time" -n 4 --temp 0 2>"$tmp/err")
if [ -n "$out" ]; then ok; else bad "run without the library: $(cat "$tmp/err")"; fi

checks_done
