#!/usr/bin/env bash
# e2e_server_disconnect.sh — 50 streaming clients hang up mid-stream: the server keeps
# serving, every engine request is cancelled and counted in tokd_client_disconnects_total,
# and /metrics shows every KV block back in the pool (tokd_kv_blocks_used 0; free + cached
# == total: unreferenced blocks may stay as evictable prefix cache). Then a non-streaming
# client hangs up while its request produces tokens: it is cancelled (not run to the end
# of the context) and counted as a disconnect.
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
[ "${disc:-0}" -ge 45 ] || { echo "FAIL: only $disc disconnects counted"; fail=1; }
# a non-streaming client leaves while its tokens keep coming (the check must not wait for a pause)
outcome() { curl -s "$BASE/metrics" | awk -v o="$1" '$1 == "tokd_requests_total{outcome=\""o"\"}" {print $2}'; }
ok0=$(outcome ok); can0=$(outcome cancelled); disc0=$(metric tokd_client_disconnects_total); gen0=$(metric tokd_generated_tokens_total)
nbody='{"prompt":"Once upon a time","max_tokens":4000,"ignore_eos":true}'
exec 3<>"/dev/tcp/127.0.0.1/$PORT"
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s' "${#nbody}" "$nbody" >&3
sleep 0.2
exec 3>&- 3<&-
for _ in $(seq 1 100); do [ "$(metric tokd_sequences_running)" = 0 ] && break; sleep 0.05; done
ok1=$(outcome ok); can1=$(outcome cancelled); disc1=$(metric tokd_client_disconnects_total); gen1=$(metric tokd_generated_tokens_total)
echo "non-streaming client gone: ok +$((ok1 - ok0)) cancelled +$((can1 - can0)) disconnects +$((disc1 - disc0)) tokens $((gen1 - gen0))"
# cancelled within about 50 ms of the hang-up, not when a pause in its tokens came (the context holds 2047)
[ $((gen1 - gen0)) -lt 1000 ] || { echo "FAIL: $((gen1 - gen0)) tokens generated for a client that had left"; fail=1; }
[ $((can1 - can0)) -eq 1 ] && [ "$ok1" = "$ok0" ] || { echo "FAIL: the request was not cancelled"; fail=1; }
[ $((disc1 - disc0)) -eq 1 ] || { echo "FAIL: the disconnect was not counted"; fail=1; }
stop_server || fail=1
exit $fail
