#!/usr/bin/env bash
# run.sh — runs test programs and sums their results.
# Each argument is an executable. A program whose last output line reads
# "N passed, M failed" contributes those counts; any other program counts as one test,
# passed iff it exits 0. A program that exits non-zero always counts at least one failure.
# The last line printed is the total: "N passed, N failed".
set -u
total_pass=0
total_fail=0
for prog in "$@"; do
    log=$(mktemp)
    start=$(date +%s)
    "$prog" >"$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    last=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    if [ -n "$last" ]; then
        p=$(echo "$last" | awk '{print $1}')
        f=$(echo "$last" | awk '{print $3}')
        if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    else
        if [ "$rc" -eq 0 ]; then p=1; f=0; else p=0; f=1; fi
    fi
    total_pass=$((total_pass + p))
    total_fail=$((total_fail + f))
    if [ "$f" -ne 0 ]; then
        echo "FAIL $prog (exit $rc, ${secs}s): $p passed, $f failed"
        tail -n 40 "$log" | sed 's/^/    /'
    else
        echo "ok   $prog (${secs}s): $p passed"
    fi
    rm -f "$log"
done
echo "$total_pass passed, $total_fail failed"
[ -n "${RESULTS_FILE:-}" ] && echo "$total_pass $total_fail" >>"$RESULTS_FILE"
[ "$total_fail" -eq 0 ]
