#!/usr/bin/env bash
# e2e_bench.sh — `tokd bench` through the CLI on stories260K (-p 32 -n 8 -r 1, a 64 MiB
# bandwidth buffer to stay fast): it runs,
# prints every field in text and in JSON, and rejects bad options. No timing assertions:
# only that the figures are there and positive. Prints "N passed, M failed".
set -u
TOKD=${TOKD:-build/tokd}
SHARED=${TOKD_SHARED:-../shared}
MODEL=$SHARED/models/stories260K.gguf
. "$(dirname "$0")/checks.sh"

# text output
if "$TOKD" bench -m "$MODEL" -p 32 -n 8 -r 1 -t 2 --bw-mib 64 >"$tmp/out" 2>"$tmp/err"; then ok; else bad "bench exited $?: $(cat "$tmp/err")"; fi
for field in '^model: ' '^threads: *2' '^pp32 .* tok/s' '^tg8 .* tok/s .* % of the bandwidth limit' \
    'share per run [0-9.]* \.\. [0-9.]* %, against memory read [0-9.]* GB/s .* measured after each run' \
    'memory read [0-9.]* GB/s' 'int8 peak [0-9.]* GMAC/s' \
    'handoff between threads [0-9]+ ns one way \(min [0-9]+, max [0-9]+\) after each run'; do
    if grep -Eq "$field" "$tmp/out"; then ok; else bad "text output lacks /$field/"; fi
done
# one thread hands nothing over: no handoff line
"$TOKD" bench -m "$MODEL" -p 0 -n 4 -r 1 -t 1 --bw-mib 64 >"$tmp/out1" 2>&1
if grep -q '^tg4 ' "$tmp/out1" && ! grep -q handoff "$tmp/out1"; then ok; else bad "-t 1: $(cat "$tmp/out1")"; fi
# in JSON, one handoff sample a tg run
"$TOKD" bench -m "$MODEL" -p 0 -n 4 -r 2 -t 2 --bw-mib 64 --json >"$tmp/jh" 2>&1
if grep -Eq '"tg_handoff_ns":\{"median":[0-9.]+,"min":[0-9.]+,"max":[0-9.]+,"samples":\[[0-9.]+,[0-9.]+\]\}' "$tmp/jh"; then ok
else bad "JSON tg_handoff_ns: $(cat "$tmp/jh")"; fi

# JSON output: one object with the fields, numbers positive
if "$TOKD" bench -m "$MODEL" -p 32 -n 8 -r 2 --bw-mib 64 --json >"$tmp/json" 2>"$tmp/err"; then ok; else bad "bench --json exited $?"; fi
fields='pp.median_tok_s pp.min_tok_s pp.max_tok_s tg.median_tok_s tg.min_tok_s tg.max_tok_s bandwidth_gb_s tg_limit_tok_s tg_share pp_share bytes_per_token weight_bytes threads tg_bandwidth_gb_s.median tg_bandwidth_gb_s.min tg_shares.median tg_shares.max'
if command -v node >/dev/null 2>&1; then
    if node -e '
        const o = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
        let bad = [];
        for (const f of process.argv[2].split(" ")) {
            const v = f.split(".").reduce((a, k) => (a == null ? a : a[k]), o);
            if (!(typeof v === "number" && v > 0)) bad.push(f + "=" + v);
        }
        if (o.pp.runs !== 2 || o.pp.samples.length !== 2 || o.tg.n_tokens !== 8) bad.push("runs/samples/n_tokens");
        /* one bandwidth probe per tg run; the share printed is the median of the runs own shares */
        if (o.tg_bandwidth_gb_s.samples.length !== 2 || o.tg_shares.samples.length !== 2) bad.push("per-run probes");
        if (Math.abs(o.tg_share - o.tg_shares.median) > 1e-3) bad.push("tg_share != median of tg_shares");
        o.tg_shares.samples.forEach((sh, i) => {
            const expect = o.tg.samples[i] * o.bytes_per_token / (o.tg_bandwidth_gb_s.samples[i] * 1e9);
            if (Math.abs(sh - expect) > 1e-3 * expect + 1e-4) bad.push("share " + i + " " + sh + " vs " + expect);
        });
        if (bad.length) { console.error(bad.join(" ")); process.exit(1); }' "$tmp/json" "$fields"; then ok; else bad "JSON fields"; fi
else
    for f in $fields; do
        k=${f##*.}
        if grep -Eq "\"$k\":[0-9]*\.?[0-9]+" "$tmp/json"; then ok; else bad "JSON lacks $k"; fi
    done
fi
[ "$(wc -l <"$tmp/json")" -eq 1 ] && ok || bad "JSON is not one line"

# -n 0 skips tg; --no-machine skips the machine figures
"$TOKD" bench -m "$MODEL" -p 16 -n 0 -r 1 --no-machine --json >"$tmp/json2" 2>/dev/null
if grep -q '"pp":' "$tmp/json2" && ! grep -q '"tg":' "$tmp/json2" && ! grep -q bandwidth "$tmp/json2"; then ok; else bad "-n 0 --no-machine: $(cat "$tmp/json2")"; fi

# --profile N: the profiled steps' table in text, and the same figures in JSON (every
# stage present, its parts of a step summing to 1, each product with a region per layer)
if "$TOKD" bench -m "$MODEL" -p 0 -n 4 -r 1 -t 2 --no-machine --profile 6 >"$tmp/prof" 2>"$tmp/err"; then ok; else bad "bench --profile exited $?: $(cat "$tmp/err")"; fi
for field in '^profile: +6 decode steps from position 0, [0-9.]+ ms a step' 'GB/s in shares, by thread' \
    '^ +qkv +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ [0-9.]+$' '^ +attention +[0-9.]+ +- +- +[0-9.]+$' '^ +logits +[0-9.]+ +1\.0 '; do
    if grep -Eq "$field" "$tmp/prof"; then ok; else bad "profile text lacks /$field/: $(cat "$tmp/prof")"; fi
done
if "$TOKD" bench -m "$MODEL" -p 0 -n 4 -r 1 -t 2 --no-machine --profile 6 --json >"$tmp/pjson" 2>"$tmp/err"; then ok; else bad "bench --profile --json exited $?"; fi
if command -v node >/dev/null 2>&1; then
    if node -e '
        const o = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")), p = o.profile, bad = [];
        if (!p || p.steps !== 6 || !(p.step_ms > 0) || !(p.tsc_ghz > 0)) bad.push("header " + JSON.stringify(p));
        const names = (p && p.stages || []).map(s => s.stage).join(",");
        if (names !== "other,qkv,attention,o,ffn_up,ffn_down,logits") bad.push("stages " + names);
        const sum = (p && p.stages || []).reduce((a, s) => a + s.share_of_step, 0);
        if (Math.abs(sum - 1) > 1e-3) bad.push("parts sum to " + sum);
        for (const s of (p && p.stages || []).filter(s => s.stage !== "other" && s.stage !== "attention")) {
            if (s.regions_per_step !== (s.stage === "logits" ? 1 : 5)) bad.push(s.stage + " regions " + s.regions_per_step);
            if (s.thread_gb_s.length !== 2 || !s.thread_gb_s.some(v => v > 0)) bad.push(s.stage + " rates " + s.thread_gb_s);
        }
        const att = (p && p.stages || []).find(s => s.stage === "attention");
        if (!att || !(att.tail_us >= 0)) bad.push("attention wait " + JSON.stringify(att));
        if (bad.length) { console.error(bad.join("; ")); process.exit(1); }' "$tmp/pjson"; then ok; else bad "profile JSON"; fi
else
    if grep -q '"profile":{"steps":6,' "$tmp/pjson" && grep -q '"stage":"logits"' "$tmp/pjson"; then ok; else bad "profile JSON"; fi
fi

# -d N: both tests after N positions in the cache, labelled as llama-bench does; the KV
# read of the N positions joins each decode token's bytes (the same run without -d reads
# N times the per-position KV bytes fewer)
if "$TOKD" bench -m "$MODEL" -p 16 -n 4 -d 40 -r 2 --no-machine >"$tmp/depth" 2>"$tmp/err"; then ok; else bad "bench -d exited $?: $(cat "$tmp/err")"; fi
for field in '^pp16 @ d40 +[0-9.]+ tok/s' '^tg4 @ d40 +[0-9.]+ tok/s'; do
    if grep -Eq "$field" "$tmp/depth"; then ok; else bad "depth text lacks /$field/: $(cat "$tmp/depth")"; fi
done
b0=$("$TOKD" bench -m "$MODEL" -p 0 -n 4 -r 1 --no-machine --json 2>/dev/null | grep -o '"bytes_per_token":[0-9]*' | cut -d: -f2)
jd=$("$TOKD" bench -m "$MODEL" -p 0 -n 4 -d 40 -r 1 --no-machine --json 2>/dev/null)
b40=$(echo "$jd" | grep -o '"bytes_per_token":[0-9]*' | cut -d: -f2)
if echo "$jd" | grep -q '"n_depth":40,' && [ -n "$b0" ] && [ -n "$b40" ] && [ "$b40" -gt "$b0" ] && [ $(((b40 - b0) % 40)) -eq 0 ]; then ok; else bad "depth JSON: bytes $b0 -> $b40: $jd"; fi
if "$TOKD" bench -m "$MODEL" -p 0 -n 2 -d 20 -r 1 --no-machine --profile 3 2>/dev/null | grep -Eq '^profile: +3 decode steps from position 20,'; then ok; else bad "profile from the depth"; fi

# lists, as llama-bench's: every thread count at every depth, and in each the i-th -p
# with the i-th -n (a shorter list is 0: none) in one block of text or one JSON line
if "$TOKD" bench -m "$MODEL" -p 16,32 -n 4 -t 1,2 -r 1 --no-machine >"$tmp/list" 2>"$tmp/err"; then ok; else bad "bench lists exited $?: $(cat "$tmp/err")"; fi
got=$(grep -Eo '^(model|threads: +[0-9]+|pp[0-9]+|tg[0-9]+)' "$tmp/list" | sed 's/threads: */t/' | tr '\n' ' ')
if [ "$got" = "model t1 pp16 tg4 t1 pp32 t2 pp16 tg4 t2 pp32 " ]; then ok; else bad "list rows: $got"; fi
# then one table of every row (threads, test, median tok/s), the blocks' figures
blocks=$(awk '/^threads:/ {t = $2 + 0} /^(pp|tg)[0-9]+ / {printf "%d %s %s\n", t, $1, $2}' "$tmp/list")
table=$(awk -F' *[|] *' '/^[|] [0-9]/ {printf "%d %s %s\n", $2, $3, $4}' "$tmp/list")
if [ -n "$blocks" ] && [ "$blocks" = "$table" ] && grep -q '^| threads | test | tok/s | min | max | share |$' "$tmp/list"; then ok; else
    bad "summary table: blocks [$blocks] table [$table]"; fi
"$TOKD" bench -m "$MODEL" -p 16 -n 4 -r 1 --no-machine >"$tmp/one" 2>/dev/null
if ! grep -q '^|' "$tmp/one"; then ok; else bad "a single run printed a table"; fi
if "$TOKD" bench -m "$MODEL" -p 16 -n 0,4 -d 0,8 -r 1 --no-machine --json >"$tmp/jlist" 2>"$tmp/err"; then ok; else bad "bench lists --json exited $?"; fi
if command -v node >/dev/null 2>&1; then
    if node -e '
        const rows = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map(l => JSON.parse(l));
        const got = rows.map(o => "d" + o.n_depth + (o.pp ? " pp" + o.pp.n_tokens : "") + (o.tg ? " tg" + o.tg.n_tokens : "")).join(", ");
        if (got !== "d0 pp16, d0 tg4, d8 pp16, d8 tg4") { console.error(got); process.exit(1); }' "$tmp/jlist"; then ok; else bad "list JSON lines"; fi
else
    [ "$(wc -l <"$tmp/jlist")" -eq 4 ] && ok || bad "list JSON lines: $(cat "$tmp/jlist")"
fi

# -s N: N sequences together (pp: N prompts in one batch; tg: one token of each a step),
# labelled "x N"; tokens/s count every sequence's, and the share divides by N x the
# bandwidth (a step's bytes: the weights once, each sequence's embedding row and KV)
if "$TOKD" bench -m "$MODEL" -p 16 -n 4 -s 3 -r 1 --no-machine >"$tmp/seqs" 2>"$tmp/err"; then ok; else bad "bench -s exited $?: $(cat "$tmp/err")"; fi
for field in '^threads: .*; 3 sequences together, [0-9.]+ MB read a decode step of 3 tokens' '^pp16 x3 +[0-9.]+ tok/s' '^tg4 x3 +[0-9.]+ tok/s'; do
    if grep -Eq "$field" "$tmp/seqs"; then ok; else bad "-s text lacks /$field/: $(cat "$tmp/seqs")"; fi
done
if "$TOKD" bench -m "$MODEL" -p 0 -n 4 -s 1,3 -r 2 --bw-mib 64 --json >"$tmp/sjson" 2>"$tmp/err"; then ok; else bad "bench -s --json exited $?"; fi
if command -v node >/dev/null 2>&1; then
    if node -e '
        const [one, three] = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map(l => JSON.parse(l)), bad = [];
        if (one.n_seqs !== 1 || three.n_seqs !== 3) bad.push("n_seqs " + one.n_seqs + " " + three.n_seqs);
        if (!(three.bytes_per_token > one.bytes_per_token && three.bytes_per_token < 1.5 * one.bytes_per_token)) bad.push("bytes " + one.bytes_per_token + " -> " + three.bytes_per_token);
        three.tg_shares.samples.forEach((sh, i) => {
            const expect = three.tg.samples[i] * three.bytes_per_token / (3 * three.tg_bandwidth_gb_s.samples[i] * 1e9);
            if (Math.abs(sh - expect) > 1e-3 * expect + 1e-4) bad.push("share " + i + " " + sh + " vs " + expect);
        });
        if (bad.length) { console.error(bad.join("; ")); process.exit(1); }' "$tmp/sjson"; then ok; else bad "-s JSON: $(cat "$tmp/sjson")"; fi
else
    grep -q '"n_seqs":3,' "$tmp/sjson" && ok || bad "-s JSON: $(cat "$tmp/sjson")"
fi

# --tg-probe: auto measures a model this small after each run (its weights would stay in
# cache between steps, and the probe would evict them); between puts one probe pass of
# each form after every ceil(n / 16) steps and after the last (-n 20: every 2 steps, 10
# passes; -n 17: every 2 and the 17th, 9), and each run's share is against its own
# passes' bandwidth. A 16 MiB buffer keeps the passes cheap under the sanitizers.
if grep -q '"tg_probe_passes":0,' "$tmp/json"; then ok; else bad "auto on stories260K is not after each run: $(cat "$tmp/json")"; fi
if "$TOKD" bench -m "$MODEL" -p 0 -n 20 -r 1 --bw-mib 16 --tg-probe between >"$tmp/btext" 2>"$tmp/err"; then ok; else bad "--tg-probe between exited $?: $(cat "$tmp/err")"; fi
if grep -Eq 'against memory read [0-9.]+ GB/s .* measured between each run.s steps \(10 passes\)$' "$tmp/btext"; then ok; else bad "--tg-probe between text: $(cat "$tmp/btext")"; fi
if "$TOKD" bench -m "$MODEL" -p 0 -n 17 -r 2 --bw-mib 16 --tg-probe between --json >"$tmp/bjson" 2>"$tmp/err"; then ok; else bad "--tg-probe between --json exited $?"; fi
if command -v node >/dev/null 2>&1; then
    if node -e '
        const o = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")), bad = [];
        if (o.tg_probe_passes !== 9) bad.push("passes " + o.tg_probe_passes);
        if (o.tg_bandwidth_gb_s.samples.length !== 2 || !o.tg_bandwidth_gb_s.samples.every(v => v > 0)) bad.push("per-run bandwidths");
        o.tg_shares.samples.forEach((sh, i) => {
            const expect = o.tg.samples[i] * o.bytes_per_token / (o.tg_bandwidth_gb_s.samples[i] * 1e9);
            if (Math.abs(sh - expect) > 1e-3 * expect + 1e-4) bad.push("share " + i + " " + sh + " vs " + expect);
        });
        if (bad.length) { console.error(bad.join("; ")); process.exit(1); }' "$tmp/bjson"; then ok; else bad "--tg-probe between JSON: $(cat "$tmp/bjson")"; fi
else
    grep -q '"tg_probe_passes":9,' "$tmp/bjson" && ok || bad "--tg-probe between JSON: $(cat "$tmp/bjson")"
fi
if "$TOKD" bench -m "$MODEL" -p 0 -n 4 -r 1 --bw-mib 16 --tg-probe after --json 2>/dev/null | grep -q '"tg_probe_passes":0,'; then ok; else bad "--tg-probe after"; fi

# errors: one line on stderr, non-zero exit, nothing on stdout
err_case() {
    local name=$1
    shift
    "$TOKD" bench "$@" >"$tmp/o" 2>"$tmp/e"
    local rc=$?
    if [ $rc -ne 0 ] && [ "$(wc -l <"$tmp/e")" -eq 1 ] && [ ! -s "$tmp/o" ]; then ok; else bad "$name: rc=$rc, stderr: $(cat "$tmp/e")"; fi
}
err_case "no -m"
err_case "missing model" -m "$tmp/none.gguf"
err_case "bad -p" -m "$MODEL" -p x
err_case "bad -r" -m "$MODEL" -r 0
err_case "unknown option" -m "$MODEL" --bogus
err_case "nothing to do" -m "$MODEL" -p 0 -n 0
err_case "bad --profile" -m "$MODEL" --profile 0
err_case "bad -d" -m "$MODEL" -d -1
err_case "empty list item" -m "$MODEL" -p 16,
err_case "empty first item" -m "$MODEL" -p ,16
err_case "bad item" -m "$MODEL" -t 2,x
err_case "zero threads in a list" -m "$MODEL" -t 0,2
err_case "list too long" -m "$MODEL" -n 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17
err_case "only zeros" -m "$MODEL" -p 0,0 -n 0
err_case "no sequences" -m "$MODEL" -s 0
err_case "too many sequences" -m "$MODEL" -s 257
err_case "a prompt batch over 65536 tokens" -m "$MODEL" -s 200 -p 512 -n 0
err_case "bad --tg-probe" -m "$MODEL" --tg-probe sometimes

checks_done
