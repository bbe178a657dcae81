#!/usr/bin/env bash
# e2e_server_openai.sh — a real client: the `openai` npm package (installed from the npm
# registry into build/node, outside the tracked sources) against `tokd serve`: chat and
# text completions, streaming and not; content, finish_reason, usage, cached tokens.
set -u
cd "$(dirname "$0")/.."
. tests/server/lib.sh
NODE_DIR="${TOKD_NODE_DIR:-$PWD/build/node}"
if [ ! -f "$NODE_DIR/node_modules/openai/package.json" ]; then
    mkdir -p "$NODE_DIR"
    if ! npm install --silent --no-audit --no-fund --prefix "$NODE_DIR" openai@4 >"$NODE_DIR/npm.log" 2>&1; then
        echo "FAIL: npm install openai@4 failed:"; cat "$NODE_DIR/npm.log"; exit 1
    fi
fi
start_server --api-key test-key-123 --ctx 1024
NODE_PATH="$NODE_DIR/node_modules" BASE="$BASE" node tests/server/openai_client.mjs || { echo "client failed"; tail -20 "$SERVER_LOG"; exit 1; }
stop_server || exit 1
echo "ok"
