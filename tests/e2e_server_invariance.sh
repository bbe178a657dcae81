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
command -v node >/dev/null || { echo "FAIL: node is not installed"; exit 1; }
NODE_DIR="${TOKD_NODE_DIR:-$PWD/build/node}"
if [ ! -f "$NODE_DIR/node_modules/openai/package.json" ]; then
    mkdir -p "$NODE_DIR"
    if ! npm install --silent --no-audit --no-fund --prefix "$NODE_DIR" openai@4 >"$NODE_DIR/npm.log" 2>&1; then
        echo "FAIL: npm install openai@4 failed:"; cat "$NODE_DIR/npm.log"; exit 1
    fi
fi
start_server --max-seqs 16
NODE_PATH="$NODE_DIR/node_modules" BASE="$BASE" node tests/server/invariance_client.mjs ||
    { echo "FAIL: invariance client failed"; tail -20 "$SERVER_LOG"; exit 1; }
stop_server || exit 1
echo "ok"
