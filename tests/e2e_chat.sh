#!/usr/bin/env bash
# e2e_chat.sh — `tokd chat` driven as a person would, through tmux: three turns typed at
# the prompt, each answered, the history kept (the later turns reuse cached tokens),
# then /exit. Then, piped, --system on a model whose template has no system role (Gemma 2):
# the system text goes into the first user turn; and a turn beyond the context points to
# /reset. Fails loudly if tmux is missing (scripts/install-deps.sh installs it).
set -u
TOKD=${TOKD:-build/tokd}
command -v tmux >/dev/null || { echo "FAIL: tmux is not installed"; exit 1; }
sock="tokd-chat-$$"
log=$(mktemp)
cleanup() { tmux -L "$sock" kill-server >/dev/null 2>&1; rm -f "$log"; }
trap cleanup EXIT
tmux -L "$sock" new-session -d -x 200 -y 50 "$TOKD chat -m ../shared/models/stories260K.gguf -n 12 --temp 0 2>$log; echo CHAT-EXITED-\$?; sleep 30"
wait_for() { # pattern count timeout
    for _ in $(seq 1 $(( $3 * 10 ))); do
        n=$(tmux -L "$sock" capture-pane -p -S -200 | grep -c -- "$1")
        [ "$n" -ge "$2" ] && return 0
        sleep 0.1
    done
    return 1
}
fail() { echo "FAIL: $1"; tmux -L "$sock" capture-pane -p -S -200; echo "--- stderr:"; cat "$log"; exit 1; }
wait_for '^>' 1 20 || fail "no prompt"
i=1
for msg in "Hello, who are you?" "Tell me about the park." "Thank you!"; do
    tmux -L "$sock" send-keys -l "$msg"
    tmux -L "$sock" send-keys Enter
    i=$((i + 1))
    wait_for '^>' "$i" 30 || fail "turn $((i - 1)) not answered"
done
tmux -L "$sock" send-keys -l "/exit"
tmux -L "$sock" send-keys Enter
wait_for 'CHAT-EXITED-0' 1 10 || fail "did not exit cleanly"
screen=$(tmux -L "$sock" capture-pane -p -S -200)
for msg in "Hello, who are you?" "Tell me about the park." "Thank you!"; do
    echo "$screen" | grep -qF "> $msg" || fail "typed text missing: $msg"
done
# each reply is non-empty text on the line(s) after the typed one
answered=$(echo "$screen" | awk '/^>/{p=1; next} p && NF {c++; p=0} END {print c+0}')
[ "$answered" -ge 3 ] || fail "only $answered replies"
turns=$(grep -c "prompt tokens" "$log")
[ "$turns" -eq 3 ] || fail "expected 3 turns in the stats, got $turns"
cached=$(grep "prompt tokens" "$log" | tail -1 | sed -E 's/.*\(([0-9]+) cached\).*/\1/')
[ "${cached:-0}" -gt 0 ] || fail "the third turn reused no cached tokens"

# --system on Gemma 2's template, which raises "System role not supported"
HELPER="$(dirname "$TOKD")/tests/test_chat_server"
[ -x "$HELPER" ] || fail "$HELPER is not built"
g2=$(mktemp --suffix=.gguf)
"$HELPER" --with-template ../shared/models/stories260K.gguf "${TOKD_SHARED:-../shared}/templates/google-gemma-2-2b-it.jinja" "$g2" ||
    fail "cannot write the Gemma 2 model"
out=$(printf 'Hi\n' | "$TOKD" chat -m "$g2" --system "Be brief." -n 4 --temp 0 2>&1)
rm -f "$g2"
echo "$out" | grep -q "prompt tokens" || { echo "FAIL: --system on Gemma 2: $out"; exit 1; }
echo "$out" | grep -q "System role" && { echo "FAIL: the template's error came back: $out"; exit 1; }
# a turn that no longer fits the context says how to go on
out=$(printf 'Hello there, tell me a long story about a cat\n' | "$TOKD" chat -m ../shared/models/stories260K.gguf -c 40 -n 4 2>&1)
echo "$out" | grep -q "does not fit the context of 40 tokens (/reset starts a new conversation" ||
    { echo "FAIL: a turn beyond the context: $out"; exit 1; }
echo "6 passed, 0 failed"
