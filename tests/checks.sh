# checks.sh — sourced by the end-to-end scripts that count their own checks (e2e_bench,
# e2e_render, e2e_server_nolib, e2e_tokenize): ok and bad count a check each (bad also
# says why on stderr), $tmp is a directory removed at exit, and checks_done prints the
# "N passed, M failed" line tests/run.sh reads and returns non-zero after any failure.
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
checks_done() {
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
