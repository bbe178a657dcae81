#!/usr/bin/env bash
# e2e_render.sh — `tokd render` through the CLI (run from the repo root; TOKD = the binary,
# TOKD_SHARED = reference data, default ../shared). Prints "N passed, M failed".
set -u
TOKD=${TOKD:-build/tokd}
SHARED=${TOKD_SHARED:-../shared}
export TOKD_NOW=2026-01-15T09:30:00
. "$(dirname "$0")/checks.sh"

# a real template, byte-exact against the golden output (compared as files: the output has
# no trailing newline and must keep every byte)
T=$SHARED/templates/Qwen-Qwen2.5-7B-Instruct.jinja
printf '%s' '{"messages": [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "Hello!"}], "add_generation_prompt": true, "bos_token": "<|BOS|>", "eos_token": "<|EOS|>"}' >"$tmp/ctx.json"
if "$TOKD" render --template "$T" <"$tmp/ctx.json" >"$tmp/out" 2>"$tmp/err"; then ok; else bad "qwen render failed: $(cat "$tmp/err")"; fi
printf '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n' >"$tmp/want"
if cmp -s "$tmp/out" "$tmp/want"; then ok; else bad "qwen output differs: $(od -c "$tmp/out" | head -5)"; fi

# extra keys pass through as variables; add_generation_prompt defaults to false
printf '{{ greeting }} {{ add_generation_prompt }} {{ messages|length }}' >"$tmp/t.jinja"
out=$(printf '{"messages": [], "greeting": "hey"}' | "$TOKD" render --template "$tmp/t.jinja")
if [ "$out" = "hey False 0" ]; then ok; else bad "pass-through: got '$out'"; fi

# a template error: one line on stderr with FILE:LINE:COL, non-zero exit, nothing on stdout
printf 'a\n{{ raise_exception("bad input") }}' >"$tmp/e.jinja"
if printf '{}' | "$TOKD" render --template "$tmp/e.jinja" >"$tmp/out" 2>"$tmp/err"; then bad "error template exited 0"; else ok; fi
err=$(cat "$tmp/err")
case "$err" in "tokd render: $tmp/e.jinja:2:"*"bad input") ok ;; *) bad "error line: '$err'" ;; esac
if [ "$(wc -l <"$tmp/err")" -eq 1 ] && [ ! -s "$tmp/out" ]; then ok; else bad "error output not one stderr line"; fi

# bad JSON on stdin and a missing file are errors too
if printf '{"messages": ' | "$TOKD" render --template "$tmp/t.jinja" >/dev/null 2>&1; then bad "bad JSON exited 0"; else ok; fi
if printf '{}' | "$TOKD" render --template "$tmp/missing.jinja" >/dev/null 2>&1; then bad "missing file exited 0"; else ok; fi
if "$TOKD" render >/dev/null 2>&1 </dev/null; then bad "no --template exited 0"; else ok; fi

checks_done
