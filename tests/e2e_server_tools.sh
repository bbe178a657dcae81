#!/usr/bin/env bash
# e2e_server_tools.sh — the `openai` npm client (installed as in e2e_server_openai.sh) against
# `tokd serve`: tool calls (tool_choice required / named / none, the round trip with the tool
# result, streamed deltas), response_format json_object and json_schema, `grammar`, and
# reasoning_content. Twice: on stories260K (no template: ChatML, Hermes calls) and on a copy
# of it that carries the Qwen 2.5 chat template (made by tests/test_chat_server).
set -u
cd "$(dirname "$0")/.."
. tests/server/lib.sh
need_openai_client
HELPER="$(dirname "$TOKD")/tests/test_chat_server"
[ -x "$HELPER" ] || { echo "FAIL: $HELPER is not built"; exit 1; }
TEMPLATED_MODEL=$(mktemp --suffix=.gguf)
trap 'cleanup; rm -f "$TEMPLATED_MODEL"' EXIT

start_server --ctx 1024
grep -q "chat template: ChatML (none in the file); tool calls: hermes; reasoning: think" "$SERVER_LOG" || { echo "FAIL: template line"; cat "$SERVER_LOG"; exit 1; }
NODE_PATH="$NODE_DIR/node_modules" BASE="$BASE" node tests/server/tools_client.mjs || { echo "client failed"; tail -20 "$SERVER_LOG"; exit 1; }
stop_server || exit 1

"$HELPER" --with-template "$MODEL_DIR/stories260K.gguf" "${TOKD_SHARED:-../shared}/templates/Qwen-Qwen2.5-7B-Instruct.jinja" "$TEMPLATED_MODEL" || exit 1
SERVER_MODEL="$TEMPLATED_MODEL" start_server --ctx 2048
grep -q "chat template: the model's; tool calls: hermes" "$SERVER_LOG" || { echo "FAIL: template line"; cat "$SERVER_LOG"; exit 1; }
NODE_PATH="$NODE_DIR/node_modules" BASE="$BASE" TEMPLATED=1 node tests/server/tools_client.mjs || { echo "client failed"; tail -20 "$SERVER_LOG"; exit 1; }
stop_server || exit 1

# --chat-template-file, and a template error is a 400 that carries the template's message
TPL=$(mktemp --suffix=.jinja)
printf '%s' "{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('no tool turns here') }}{% endif %}[{{ m.role }}]{{ m.content }}{% endfor %}" >"$TPL"
start_server --chat-template-file "$TPL"
rm -f "$TPL"
grep -q "chat template: given; tool calls: hermes; reasoning: think" "$SERVER_LOG" || { echo "FAIL: template line"; cat "$SERVER_LOG"; exit 1; }
R=$(curl -s -w ' %{http_code}' -H 'Content-Type: application/json' "$BASE/v1/chat/completions" \
    -d '{"messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"c","content":"x"}],"max_tokens":2}')
case "$R" in *"no tool turns here"*" 400") ;; *) echo "FAIL: template error: $R"; exit 1 ;; esac
R=$(curl -s -w ' %{http_code}' "$BASE/v1/chat/completions" -d '{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}')
case "$R" in *'"finish_reason":"length"'*" 200") ;; *) echo "FAIL: given template: $R"; exit 1 ;; esac
stop_server || exit 1
echo "ok"
