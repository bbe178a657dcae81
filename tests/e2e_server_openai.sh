#!/usr/bin/env bash
# e2e_server_openai.sh — a real client: the `openai` npm package (installed from the npm
# registry into build/node, outside the tracked sources) against `tokd serve`: chat and
# text completions, streaming and not; content, finish_reason, usage, cached tokens; and
# structured output from a zod schema (zod_client.mjs, with `zod` from npm too).
set -u
cd "$(dirname "$0")/.."
. tests/server/lib.sh
need_openai_client
start_server --api-key test-key-123 --ctx 1024
NODE_PATH="$NODE_DIR/node_modules" BASE="$BASE" node tests/server/openai_client.mjs || { echo "client failed"; tail -20 "$SERVER_LOG"; exit 1; }
NODE_PATH="$NODE_DIR/node_modules" BASE="$BASE" node tests/server/zod_client.mjs || { echo "zod client failed"; tail -20 "$SERVER_LOG"; exit 1; }
stop_server || exit 1
echo "ok"
