# lib.sh — shared by tests/e2e_server_*.sh: start `tokd serve` on a free port (the server
# picks it: --port 0, and prints it), wait for /health, always kill it on exit.
# After start_server: $PORT, $BASE, $SERVER_PID, $SERVER_LOG.
set -u
: "${TOKD:?set TOKD to the tokd binary}"
MODEL_DIR="${TOKD_SHARED:-../shared}/models"
SERVER_PID=""
SERVER_LOG=$(mktemp)
cleanup() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null
        for _ in $(seq 1 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$SERVER_PID" 2>/dev/null
    fi
    rm -f "$SERVER_LOG"
}
trap cleanup EXIT

# The `openai` npm package for the test clients: found in $NODE_DIR (default build/node)
# or installed there from the npm registry; fails the test loudly if it cannot be.
need_openai_client() {
    command -v node >/dev/null || { echo "FAIL: node is not installed"; exit 1; }
    NODE_DIR="${TOKD_NODE_DIR:-$PWD/build/node}"
    if [ ! -f "$NODE_DIR/node_modules/openai/package.json" ] || [ ! -f "$NODE_DIR/node_modules/zod/package.json" ]; then
        mkdir -p "$NODE_DIR"
        if ! npm install --silent --no-audit --no-fund --prefix "$NODE_DIR" openai@4 zod@3 >"$NODE_DIR/npm.log" 2>&1; then
            echo "FAIL: npm install openai@4 zod@3 failed:"; cat "$NODE_DIR/npm.log"; exit 1
        fi
    fi
}

start_server() { # args: extra serve options
    "$TOKD" serve -m "${SERVER_MODEL:-$MODEL_DIR/stories260K.gguf}" --port 0 -t 1 "$@" >"$SERVER_LOG" 2>&1 &
    SERVER_PID=$!
    PORT=""
    for _ in $(seq 1 200); do
        PORT=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$SERVER_LOG" | head -n 1)
        [ -n "$PORT" ] && break
        kill -0 "$SERVER_PID" 2>/dev/null || { echo "server died:"; cat "$SERVER_LOG"; exit 1; }
        sleep 0.05
    done
    [ -n "$PORT" ] || { echo "server did not start"; cat "$SERVER_LOG"; exit 1; }
    BASE="http://127.0.0.1:$PORT"
    for _ in $(seq 1 100); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "$BASE/health")" = 200 ] && return 0
        sleep 0.05
    done
    echo "server not healthy"; cat "$SERVER_LOG"; exit 1
}

# Stop the server with SIGTERM and require a clean exit 0.
stop_server() {
    kill -TERM "$SERVER_PID"
    local rc=0
    wait "$SERVER_PID" || rc=$?
    SERVER_PID=""
    if [ "$rc" -ne 0 ]; then echo "server exited with $rc"; cat "$SERVER_LOG"; return 1; fi
}

metric() { # name -> value
    curl -s "$BASE/metrics" | awk -v n="$1" '$1 == n {print $2}'
}
