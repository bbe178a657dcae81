#!/usr/bin/env bash
# e2e_tokenize.sh — `tokd tokenize` through the CLI (run from the repo root; TOKD = the
# binary, TOKD_SHARED = reference data, default ../shared). Prints "N passed, M failed".
set -u
TOKD=${TOKD:-build/tokd}
SHARED=${TOKD_SHARED:-../shared}
. "$(dirname "$0")/checks.sh"
expect() { # name, expected, actual
    if [ "$2" = "$3" ]; then ok; else bad "$1: expected '$2', got '$3'"; fi
}

SPM=$SHARED/vocab/ggml-vocab-llama-spm.gguf
GPT2=$SHARED/vocab/ggml-vocab-gpt-2.gguf
STORIES=$SHARED/models/stories260K.gguf

# vectors from the shared files: "Hello world" (llama-spm: 15043 3186, no BOS)
expect "spm no-bos" "15043 3186" "$(printf 'Hello world' | "$TOKD" tokenize -m "$SPM" --no-bos)"
expect "spm bos" "1 15043 3186" "$(printf 'Hello world' | "$TOKD" tokenize -m "$SPM")"
# stdin without a trailing newline vs with one: the newline is a token (<0x0A> = 13)
expect "spm newline kept" "1 15043 3186 13" "$(printf 'Hello world\n' | "$TOKD" tokenize -m "$SPM")"
# golden prompt p1 on the real model
want=$(python3 -c 'import json,sys; print(" ".join(map(str,json.load(open(sys.argv[1]))["prompt_tokens"])))' \
    "$SHARED/golden/stories260K.p1.json" 2>/dev/null || echo "")
if [ -n "$want" ]; then
    expect "stories260K p1" "$want" "$(printf 'Once upon a time' | "$TOKD" tokenize -m "$STORIES")"
fi
# byte-level BPE: gpt-2 adds no BOS by default; special text parsed only with --special
expect "gpt2 hello" "15496 995" "$(printf 'Hello world' | "$TOKD" tokenize -m "$GPT2")"
expect "gpt2 special" "64 50256 65" "$(printf 'a<|endoftext|>b' | "$TOKD" tokenize -m "$GPT2" --special)"
plain=$(printf 'a<|endoftext|>b' | "$TOKD" tokenize -m "$GPT2")
case " $plain " in *" 50256 "*) bad "special parsed without --special: $plain" ;; *) ok ;; esac
# empty stdin: an empty line (SPM with BOS: just the BOS)
expect "gpt2 empty" "" "$("$TOKD" tokenize -m "$GPT2" </dev/null)"
expect "spm empty bos" "1" "$("$TOKD" tokenize -m "$SPM" </dev/null)"
# invalid UTF-8 and NUL bytes are fine
out=$(printf 'a\377\000b' | "$TOKD" tokenize -m "$GPT2")
if [ $? -eq 0 ] && [ -n "$out" ]; then ok; else bad "invalid utf-8"; fi
# a large input
head -c 300000 /dev/zero | tr '\0' 'x' >"$tmp/big"
n=$("$TOKD" tokenize -m "$GPT2" <"$tmp/big" | wc -w)
if [ "$n" -gt 1000 ]; then ok; else bad "big input gave $n tokens"; fi

# errors: one line on stderr, non-zero exit
err_case() { # name, args...
    local name=$1
    shift
    "$TOKD" tokenize "$@" </dev/null >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    local lines
    lines=$(wc -l <"$tmp/err")
    if [ $rc -ne 0 ] && [ "$lines" -eq 1 ] && [ ! -s "$tmp/out" ]; then ok; else bad "$name: rc=$rc, $lines stderr lines"; fi
}
err_case "missing file" -m "$tmp/no-such-file.gguf"
err_case "no -m"
err_case "-m without value" -m
err_case "unknown option" -m "$SPM" --bogus
printf 'GGUF garbage' >"$tmp/bad.gguf"
err_case "not a gguf" -m "$tmp/bad.gguf"
grep -q "no-such-file" "$tmp/err" 2>/dev/null || true

checks_done
