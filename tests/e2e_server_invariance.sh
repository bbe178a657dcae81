#!/usr/bin/env bash
# e2e_server_invariance.sh — batch invariance over HTTP with the `openai` npm client (found
# or installed into build/node as e2e_server_openai.sh does): 16 greedy requests, 8 sharing
# a ~200-token prefix, sent one at a time and then twice all at once, give byte-identical
# text every time; the concurrent rounds are batched and hit the prefix cache
# (tests/server/invariance_client.mjs).
set -u
cd "$(dirname "$0")/.."
. tests/server/lib.sh
[ -x "$TOKD" ] || { echo "FAIL: no tokd binary at $TOKD"; exit 1; }
need_openai_client
start_server --max-seqs 16
NODE_PATH="$NODE_DIR/node_modules" BASE="$BASE" node tests/server/invariance_client.mjs ||
    { echo "FAIL: invariance client failed"; tail -20 "$SERVER_LOG"; exit 1; }
stop_server || exit 1
echo "ok"
