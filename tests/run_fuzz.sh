#!/usr/bin/env bash
# run_fuzz.sh — runs each libFuzzer binary for FUZZ_SECONDS (default 60) from its seed
# corpus fuzz/corpus/NAME (NAME = binary name without the fuzz_ prefix), with the
# dictionary fuzz/NAME.dict when there is one, and reports
# "N passed, M failed" (a fuzzer passes when it ends without a finding).
set -u
secs=${FUZZ_SECONDS:-60}
pass=0
fail=0
for bin in "$@"; do
    name=$(basename "$bin")
    seeds="fuzz/corpus/${name#fuzz_}"
    work=$(mktemp -d)
    [ -d "$seeds" ] && cp -r "$seeds"/. "$work"/
    dict=()
    [ -f "fuzz/${name#fuzz_}.dict" ] && dict=(-dict="fuzz/${name#fuzz_}.dict")
    log=$(mktemp)
    if "$bin" "${dict[@]}" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "$work" >"$log" 2>&1; then
        echo "ok   $name ($(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$') runs in ${secs}s)"
        pass=$((pass + 1))
    else
        echo "FAIL $name"
        tail -n 60 "$log" | sed 's/^/    /'
        fail=$((fail + 1))
    fi
    rm -rf "$work" "$log"
done
echo "$pass passed, $fail failed"
[ -n "${RESULTS_FILE:-}" ] && echo "$pass $fail" >>"$RESULTS_FILE"
[ "$fail" -eq 0 ]
