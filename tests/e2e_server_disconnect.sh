#!/usr/bin/env bash
# e2e_server_disconnect.sh — 50 streaming clients hang up mid-stream: the server keeps
# serving, every engine request is cancelled, and /metrics shows every KV block back in
# the pool (tokd_kv_blocks_used 0; free + cached == total: unreferenced blocks may stay
# as evictable prefix cache).
set -u
cd "$(dirname "$0")/.."
. tests/server/lib.sh
start_server --max-seqs 16 --ctx 2048
body='{"prompt":"Once upon a time","max_tokens":1500,"temperature":0.8,"seed":SEED,"ignore_eos":true,"stream":true}'
pids=()
for i in $(seq 1 50); do
    # head exits after a few chunks; curl then fails on its next write and closes the socket
    ( curl -sN -m 60 "$BASE/v1/completions" -d "${body/SEED/$i}" | head -c $((400 + i * 37)) >/dev/null ) &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
fail=0
# still serving, correctly
out=$(curl -s "$BASE/v1/completions" -d '{"prompt":"Once upon a time","max_tokens":12,"temperature":0}')
echo "$out" | grep -q 'Lily' || { echo "FAIL: no correct answer after disconnects: $out"; fail=1; }
# every block back
used=""
for _ in $(seq 1 100); do
    used=$(metric tokd_kv_blocks_used); running=$(metric tokd_sequences_running); waiting=$(metric tokd_sequences_waiting)
    [ "$used" = 0 ] && [ "$running" = 0 ] && [ "$waiting" = 0 ] && break
    sleep 0.1
done
total=$(metric tokd_kv_blocks_total); free=$(metric tokd_kv_blocks_free); cached=$(metric tokd_kv_blocks_cached)
cancelled=$(curl -s "$BASE/metrics" | awk '$1 == "tokd_requests_total{outcome=\"cancelled\"}" {print $2}')
disc=$(metric tokd_client_disconnects_total)
echo "blocks: total $total used $used free $free cached $cached; requests cancelled $cancelled; disconnects seen $disc"
[ "$used" = 0 ] || { echo "FAIL: $used KV blocks still referenced"; fail=1; }
[ $((free + cached)) -eq "$total" ] || { echo "FAIL: free + cached != total"; fail=1; }
[ "${cancelled:-0}" -ge 45 ] || { echo "FAIL: only $cancelled requests cancelled"; fail=1; }
stop_server || fail=1
exit $fail
