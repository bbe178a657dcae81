#!/usr/bin/env bash
# e2e_server_queue.sh — a full queue is answered at once with 429, Retry-After: 1 and an
# OpenAI error object; the admitted requests complete correctly; the server serves again
# afterwards (tests/server/queue_client.mjs). `tokd serve --max-seqs 1 --max-queue 1` on the
# random-weight tiny-llama (its 4096-token context makes requests long enough to overlap).
set -u
cd "$(dirname "$0")/.."
. tests/server/lib.sh
[ -x "$TOKD" ] || { echo "FAIL: no tokd binary at $TOKD"; exit 1; }
need_openai_client
# a bad --max-queue is a usage error
for bad in 0 -1 abc; do
    out=$(timeout 10 "$TOKD" serve -m "$MODEL_DIR/stories260K.gguf" --port 0 --max-queue "$bad" 2>&1); rc=$?
    if [ "$rc" -ne 2 ] || ! printf '%s' "$out" | grep -q -- '--max-queue'; then
        echo "FAIL: --max-queue $bad: exit $rc, expected 2 and a message naming the option: $out"; exit 1
    fi
done
SERVER_MODEL="$MODEL_DIR/tiny-llama-f32.gguf" start_server --max-seqs 1 --max-queue 1 --ctx 2560
NODE_PATH="$NODE_DIR/node_modules" BASE="$BASE" LONG_TOKENS=2000 node tests/server/queue_client.mjs ||
    { echo "FAIL: queue client failed"; tail -20 "$SERVER_LOG"; exit 1; }
stop_server || exit 1
echo "ok"
