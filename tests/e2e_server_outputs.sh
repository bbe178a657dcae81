#!/usr/bin/env bash
# e2e_server_outputs.sh — what the server answers, field by field, where the text it was
# given and the answer it built once disagreed:
#   - tool calls cut by max_tokens: finish_reason "length" (streamed too), the complete call
#     kept, the half-written one neither a call nor content;
#   - tool-call ids: two requests with the same seed (successive turns of one conversation)
#     never share an id, while the rest of the answer stays the same;
#   - /v1/completions logprobs.text_offset: each token's offset in the returned text, also
#     while a stop string holds text back.
set -u
shopt -s lastpipe # `... | check`: check runs in this shell, so its fail=1 stays
cd "$(dirname "$0")/.."
. tests/server/lib.sh
command -v python3 >/dev/null || { echo "FAIL: python3 is not installed"; exit 1; }
start_server --ctx 1024
fail=0
post() { curl -s -m 60 "$BASE$1" -H 'Content-Type: application/json' -d "$2"; }
# check NAME PYTHON-EXPR (over r, the response) on stdin's JSON
check() {
    python3 -c 'import json,sys,re
r=json.load(sys.stdin)
ok=eval(sys.argv[2])
print(("ok: " if ok else "FAIL: ")+sys.argv[1]+("" if ok else ": "+json.dumps(r)[:600]))
sys.exit(0 if ok else 1)' "$1" "$2" || fail=1
}
TOOLS='[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]'
GRAMMAR='root ::= \"<tool_call>\\n{\\\"name\\\": \\\"get_weather\\\", \\\"arguments\\\": {\\\"city\\\": \\\"Paris\\\"}}\\n</tool_call>\\n<tool_call>\\n{\\\"name\\\": \\\"get_weather\\\", \\\"arguments\\\": {\\\"city\\\": \\\"Rome\\\"}}\\n</tool_call>\"'
CALLS="{\"messages\":[{\"role\":\"user\",\"content\":\"weather?\"}],\"tools\":$TOOLS,\"grammar\":\"$GRAMMAR\",\"temperature\":0"

# cut in the middle of the second call (the whole output is about 110 tokens)
post /v1/chat/completions "$CALLS,\"max_tokens\":90}" | check "cut call: finish length, one call, no markup" \
    'c["finish_reason"]=="length" and [t["function"]["arguments"] for t in c["message"]["tool_calls"]]==["{\"city\":\"Paris\"}"] and not c["message"]["content"] if (c:=r["choices"][0]) else 0'
post /v1/chat/completions "$CALLS,\"max_tokens\":90,\"stream\":true}" | sed -n 's/^data: //p' | grep -v '^\[DONE\]' |
    python3 -c 'import json,sys; print(json.dumps([json.loads(l) for l in sys.stdin]))' |
    check "cut call, streamed: finish length, one call, no markup" \
    '[c["finish_reason"] for x in r for c in x["choices"] if c["finish_reason"]]==["length"] and len([t for x in r for c in x["choices"] for t in c["delta"].get("tool_calls",[])])==1 and not "".join(c["delta"].get("content") or "" for x in r for c in x["choices"])'
# not cut: both calls, finish tool_calls
post /v1/chat/completions "$CALLS,\"max_tokens\":400}" | check "whole calls: finish tool_calls, two calls" \
    'r["choices"][0]["finish_reason"]=="tool_calls" and len(r["choices"][0]["message"]["tool_calls"])==2'

# ids: the same seed twice, n 2: eight different ids, the same calls otherwise
A=$(post /v1/chat/completions "$CALLS,\"max_tokens\":400,\"seed\":42,\"n\":2}")
B=$(post /v1/chat/completions "$CALLS,\"max_tokens\":400,\"seed\":42,\"n\":2}")
echo "[$A,$B]" | check "tool-call ids unique across requests with one seed" \
    'len(ids:=[t["id"] for x in r for c in x["choices"] for t in c["message"]["tool_calls"]])==8 and len(set(ids))==8 and all(len(i)==29 and i.startswith("call_") for i in ids)'
echo "[$A,$B]" | check "and the calls themselves the same" \
    'len({json.dumps([t["function"] for t in c["message"]["tool_calls"]]) for x in r for c in x["choices"]})==1'

# text_offset: running sums of the token texts, with a stop string that holds text back
OFFSETS='(lp:=r["choices"][0]["logprobs"]) and lp["text_offset"]==[sum(len(t) for t in lp["tokens"][:i]) for i in range(len(lp["tokens"]))]'
post /v1/completions '{"prompt":"Once upon a time","max_tokens":12,"temperature":0,"logprobs":1}' | check "text_offset, no stop" "$OFFSETS"
post /v1/completions '{"prompt":"Once upon a time","max_tokens":12,"temperature":0,"logprobs":1,"stop":"ly. She"}' |
    check "text_offset with a stop string" "r[\"choices\"][0][\"finish_reason\"]==\"stop\" and $OFFSETS"
post /v1/completions '{"prompt":"Once upon a time","max_tokens":12,"temperature":0,"logprobs":1,"stop":"ly. She","stream":true}' |
    sed -n 's/^data: //p' | grep -v '^\[DONE\]' |
    python3 -c 'import json,sys
ch=[json.loads(l)["choices"][0] for l in sys.stdin]
print(json.dumps({"choices":[{"finish_reason":ch[-1]["finish_reason"],"logprobs":{k:sum((c["logprobs"][k] for c in ch if c["logprobs"]),[]) for k in ("tokens","text_offset")}}]}))' |
    check "text_offset with a stop string, streamed" "$OFFSETS"

# patterns: four answers under a schema with three and a uri, each string matching its own
PSCHEMA='{"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{3}-\\d{2,4}$"},"word":{"type":"string","pattern":"^[a-z]+$","maxLength":8},"tag":{"type":"string","pattern":"x|y"},"site":{"type":"string","format":"uri","maxLength":40}},"required":["code","word","tag","site"]}'
PFORMAT="\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\",\"schema\":$PSCHEMA}}"
post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"code?\"}],\"max_tokens\":400,\"n\":4,\"temperature\":1,\"seed\":7,$PFORMAT}" |
    check "pattern schema: every answer matches" \
    'len(r["choices"])==4 and all(c["finish_reason"]=="stop" and re.fullmatch(r"[A-Z]{3}-\d{2,4}",(v:=json.loads(c["message"]["content"]))["code"],re.A) and re.fullmatch(r"[a-z]{1,8}",v["word"]) and re.search("x|y",v["tag"]) and len(v["site"])<=40 and re.fullmatch(r"https?://[A-Za-z0-9.-]+(:[0-9]+)?[^\s%]*",v["site"]) for c in r["choices"])'
post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":10,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\",\"schema\":{\"type\":\"string\",\"pattern\":\"(?<=a)b\"}}}}" |
    check "a pattern with look-behind: 400 naming it" \
    '"error" in r and "pattern" in r["error"]["message"] and "look-around" in r["error"]["message"]'

stop_server || fail=1
exit $fail
