#!/usr/bin/env bash
# vs_llama_cpp.sh — tokd bench and llama.cpp's llama-bench on the same GGUF files, same
# flags (-p 512 -n 128 -r 3 -t THREADS), interleaved model by model and round by round so
# that both see the same state of a shared, noisy machine. Prints each round and the
# medians over the rounds, with llama.cpp's tg share computed against the bytes a step
# reads and the bandwidth that tokd bench measured during its own tg runs in the
# same round (the same limit tokd's share is against).
#
# llama.cpp is not a dependency of tokd: build llama-bench yourself from its source
# (cmake -B build -DGGML_NATIVE=ON -DCMAKE_BUILD_TYPE=Release; cmake --build build
# --target llama-bench) and pass its path.
#
# usage: bench/vs_llama_cpp.sh LLAMA_BENCH ROUNDS THREADS MODEL.gguf...
set -euo pipefail

if [ $# -lt 4 ]; then
    echo "usage: $0 LLAMA_BENCH ROUNDS THREADS MODEL.gguf..." >&2
    exit 2
fi
llama_bench=$1 rounds=$2 threads=$3
shift 3
tokd=${TOKD:-$(dirname "$0")/../build/tokd}
for exe in "$llama_bench" "$tokd"; do
    [ -x "$exe" ] || { echo "$0: $exe is not an executable (build tokd with make)" >&2; exit 2; }
done
for m in "$@"; do [ -r "$m" ] || { echo "$0: cannot read $m" >&2; exit 2; }; done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# json_num FILE KEY [NTH]: the NTH (default 1) number that follows "KEY": in tokd's --json
json_num() { grep -o "\"$2\":[0-9.e+-]*" "$1" | sed -n "${3:-1}p" | grep -o '[0-9.e+-]*$'; }
# llama_ts CSV N_PROMPT N_GEN: avg_ts of the row for that test in llama-bench's -o csv
llama_ts() {
    awk -F'","|^"|"$' -v np="$2" -v ng="$3" '
        NR == 1 { gsub(/"/, ""); n = split($0, h, ","); for (i = 1; i <= n; i++) col[h[i]] = i + 1; next }
        $col["n_prompt"] == np && $col["n_gen"] == ng { print $col["avg_ts"] }' "$1"
}

printf '%-28s %5s | %9s %9s %7s | %9s %9s %7s | %8s\n' model round "tokd pp" "tokd tg" share \
    "llama pp" "llama tg" share "GB/s"
for r in $(seq 1 "$rounds"); do
    for m in "$@"; do
        name=$(basename "$m" .gguf)
        "$tokd" bench -m "$m" -p 512 -n 128 -r 3 -t "$threads" --json > "$work/tokd.json"
        "$llama_bench" -m "$m" -p 512 -n 128 -r 3 -t "$threads" -o csv > "$work/llama.csv" 2> "$work/llama.err" ||
            { cat "$work/llama.err" >&2; exit 1; }
        tpp=$(json_num "$work/tokd.json" median_tok_s 1)
        ttg=$(json_num "$work/tokd.json" median_tok_s 2)
        tsh=$(json_num "$work/tokd.json" tg_share)
        bytes=$(json_num "$work/tokd.json" bytes_per_token)
        bw=$(grep -o '"tg_bandwidth_gb_s":{"median":[0-9.]*' "$work/tokd.json" | grep -o '[0-9.]*$')
        lpp=$(llama_ts "$work/llama.csv" 512 0)
        ltg=$(llama_ts "$work/llama.csv" 0 128)
        echo "$name $r $tpp $ttg $tsh $lpp $ltg $bytes $bw" >> "$work/rows"
        awk -v n="$name" -v r="$r" -v tpp="$tpp" -v ttg="$ttg" -v tsh="$tsh" -v lpp="$lpp" -v ltg="$ltg" \
            -v bytes="$bytes" -v bw="$bw" 'BEGIN {
            printf "%-28s %5s | %9.1f %9.2f %6.1f%% | %9.1f %9.2f %6.1f%% | %8.1f\n",
                n, r, tpp, ttg, 100 * tsh, lpp, ltg, 100 * ltg * bytes / (bw * 1e9), bw }'
    done
done

echo
echo "medians over $rounds rounds (tokd / llama.cpp):"
for m in "$@"; do
    name=$(basename "$m" .gguf)
    awk -v n="$name" '
        function median(a, k,   i, j, t) {
            for (i = 2; i <= k; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
            return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
        }
        $1 == n { k++; tpp[k] = $3; ttg[k] = $4; tsh[k] = $5; lpp[k] = $6; ltg[k] = $7; lsh[k] = $7 * $8 / ($9 * 1e9) }
        END {
            a = median(tpp, k); b = median(lpp, k); c = median(ttg, k); d = median(ltg, k)
            printf "%-28s pp512 %.1f / %.1f tok/s (%.2fx)   tg128 %.2f / %.2f tok/s (%.2fx), share %.1f / %.1f %%\n",
                n, a, b, a / b, c, d, c / d, 100 * median(tsh, k), 100 * median(lsh, k)
        }' "$work/rows"
done
