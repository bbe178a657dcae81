#!/usr/bin/env bash
# run_fuzz.sh — runs each libFuzzer binary for FUZZ_SECONDS (default 60) from its seed
# corpus fuzz/corpus/NAME (NAME = binary name without the fuzz_ prefix), with the
# dictionary fuzz/NAME.dict when there is one, and reports
# "N passed, M failed" (a fuzzer passes when it ends without a finding).
# Each fuzzer is one process on one core, so FUZZ_JOBS of them (default: the cores) run
# at once; every one still gets its FUZZ_SECONDS, and the results print in argument order.
set -u
secs=${FUZZ_SECONDS:-60}
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
out=$(mktemp -d)

fuzz_one() { # $1: index, $2: binary; leaves $out/$1.log and $out/$1.rc
    local bin=$2 name work dict=()
    name=$(basename "$bin")
    work=$(mktemp -d)
    local seeds="fuzz/corpus/${name#fuzz_}"
    [ -d "$seeds" ] && cp -r "$seeds"/. "$work"/
    [ -f "fuzz/${name#fuzz_}.dict" ] && dict=(-dict="fuzz/${name#fuzz_}.dict")
    "$bin" "${dict[@]}" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "$work" \
        >"$out/$1.log" 2>&1
    echo $? >"$out/$1.rc"
    rm -rf "$work"
}

i=0
for bin in "$@"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    fuzz_one "$i" "$bin" &
    i=$((i + 1))
done
wait

pass=0
fail=0
i=0
for bin in "$@"; do
    name=$(basename "$bin")
    if [ "$(cat "$out/$i.rc" 2>/dev/null)" = 0 ]; then
        echo "ok   $name ($(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out/$i.log" | grep -o '[0-9]*$') runs in ${secs}s)"
        pass=$((pass + 1))
    else
        echo "FAIL $name"
        tail -n 60 "$out/$i.log" 2>/dev/null | sed 's/^/    /'
        fail=$((fail + 1))
    fi
    i=$((i + 1))
done
rm -rf "$out"
echo "$pass passed, $fail failed"
[ -n "${RESULTS_FILE:-}" ] && echo "$pass $fail" >>"$RESULTS_FILE"
[ "$fail" -eq 0 ]
