#!/usr/bin/env bash
# e2e_server_hostile.sh — malformed and hostile requests each get their documented status
# (see src/server/server.h), a well-formed request in between is answered correctly every
# time, and the server never dies (the ASan build runs this too).
set -u
cd "$(dirname "$0")/.."
. tests/server/lib.sh
KEY=sekrit-key-42
start_server --api-key "$KEY" --timeout 2 --ctx 256 --max-seqs 4 --max-queue 8
AUTH="Authorization: Bearer $KEY"
fail=0; n=0
REF=$(curl -s -H "$AUTH" "$BASE/v1/completions" -d '{"prompt":"Once upon a time","max_tokens":12,"temperature":0}' |
      sed -n 's/.*"text":"\([^"]*\)".*/\1/p')
[ -n "$REF" ] || { echo "FAIL: no reference answer"; exit 1; }
good() {
    local t
    t=$(curl -s -m 10 -H "$AUTH" "$BASE/v1/completions" -d '{"prompt":"Once upon a time","max_tokens":12,"temperature":0}' |
        sed -n 's/.*"text":"\([^"]*\)".*/\1/p')
    if [ "$t" != "$REF" ]; then echo "FAIL: well-formed request after '$1' got '$t'"; fail=1; fi
    kill -0 "$SERVER_PID" 2>/dev/null || { echo "FAIL: server died after '$1'"; cat "$SERVER_LOG"; exit 1; }
}
# expect NAME STATUS PATH BODY [curl args...]
expect() {
    local name=$1 want=$2 path=$3 body=$4; shift 4
    local got
    got=$(curl -s -m 20 -o /tmp/hostile.$$ -w '%{http_code}' -H "${HDR-$AUTH}" "$@" --data-binary "$body" "$BASE$path")
    n=$((n + 1))
    if [ "$got" != "$want" ]; then echo "FAIL: $name: status $got, expected $want: $(head -c 300 /tmp/hostile.$$)"; fail=1
    elif [ "$want" != 200 ] && ! grep -q '"error"' /tmp/hostile.$$; then echo "FAIL: $name: no error object"; fail=1; fi
    rm -f /tmp/hostile.$$
    good "$name"
}
C=/v1/completions; CH=/v1/chat/completions
expect "bad JSON"                 400 $C '{"prompt": "x",'
expect "empty body"               400 $C ''
expect "JSON array body"          400 $C '[1,2,3]'
expect "JSON string body"         400 $C '"hello"'
expect "trailing garbage"         400 $C '{"prompt":"x"} xyz'
expect "missing prompt"           400 $C '{"max_tokens":3}'
expect "prompt is a number"       400 $C '{"prompt":42}'
expect "prompt is an object"      400 $C '{"prompt":{"a":1}}'
expect "empty prompt list"        400 $C '{"prompt":[]}'
expect "negative token id"        400 $C '{"prompt":[1,-5,3]}'
expect "huge token id"            400 $C '{"prompt":[1,1e10]}'
expect "negative max_tokens"      400 $C '{"prompt":"x","max_tokens":-1}'
expect "huge max_tokens"          400 $C '{"prompt":"x","max_tokens":1e300}'
expect "fractional max_tokens"    400 $C '{"prompt":"x","max_tokens":2.5}'
expect "string max_tokens"        400 $C '{"prompt":"x","max_tokens":"5"}'
expect "temperature too high"     400 $C '{"prompt":"x","temperature":50}'
expect "temperature string"       400 $C '{"prompt":"x","temperature":"hot"}'
expect "top_p negative"           400 $C '{"prompt":"x","top_p":-0.5}'
expect "n zero"                   400 $C '{"prompt":"x","n":0}'
expect "n huge"                   400 $C '{"prompt":"x","n":100000}'
expect "stop is a number"         400 $C '{"prompt":"x","stop":5}'
expect "too many stop strings"    400 $C "{\"prompt\":\"x\",\"stop\":[$(printf '"s%d",' $(seq 1 40))\"z\"]}"
expect "logit_bias bad key"       400 $C '{"prompt":"x","logit_bias":{"abc":1}}'
expect "logit_bias bad token"     400 $C '{"prompt":"x","logit_bias":{"99999":1}}'
expect "logit_bias bad value"     400 $C '{"prompt":"x","logit_bias":{"5":1000}}'
expect "seed 1e30"                400 $C '{"prompt":"x","seed":1e30}'
expect "stream not bool"          400 $C '{"prompt":"x","stream":"yes"}'
expect "stream_options wrong"     400 $C '{"prompt":"x","stream":true,"stream_options":7}'
expect "invalid UTF-8 prompt"     400 $C "$(printf '{"prompt":"bad \xff\xfe bytes"}')"
expect "prompt past the context"  400 $C "{\"prompt\":\"$(printf 'Lily and Tom went to the park. %.0s' $(seq 1 40))\"}"
expect "deep nesting"             400 $C "$(printf '[%.0s' $(seq 1 5000))"
expect "messages not array"       400 $CH '{"messages":"hi"}'
expect "messages empty"           400 $CH '{"messages":[]}'
expect "bad role"                 400 $CH '{"messages":[{"role":"wizard","content":"hi"}]}'
expect "content number"           400 $CH '{"messages":[{"role":"user","content":12}]}'
expect "image part"               400 $CH '{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}'
expect "top_logprobs too many"    400 $CH '{"messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":50}'
expect "unknown model"            404 $C '{"model":"gpt-4","prompt":"x"}'
expect "unknown route"            404 /v1/engines '{}'
expect "path traversal"           404 /../../etc/passwd '{}'
expect "GET on completions"       405 $C '' -X GET
HDR="X-Nothing: 1" expect "missing key" 401 $C '{"prompt":"x"}'
HDR="Authorization: Bearer sekrit-key-43" expect "wrong key" 401 $C '{"prompt":"x"}'
HDR="Authorization: Basic $KEY" expect "wrong scheme" 401 $C '{"prompt":"x"}'
HDR="Authorization: Bearer " expect "empty key" 401 /v1/models '' -X GET
expect "tokenize wrong type"      400 /tokenize '{"content":5}'
# a \u0000 escape would cut the string short (cJSON strings are C strings): refused, naming the field
expect "NUL in prompt"            400 $C '{"prompt":"Once upon a time\u0000 there was a dragon","max_tokens":1}'
expect "NUL in message"           400 $CH '{"messages":[{"role":"user","content":"hi\u0000 there"}],"max_tokens":1}'
expect "NUL in stop"              400 $C '{"prompt":"x","max_tokens":1,"stop":"\u0000girl"}'
expect "NUL in tokenize"          400 /tokenize '{"content":"Once\u0000 upon"}'
printf '{"prompt":"Once\0 upon","max_tokens":1}' >/tmp/hostile_nul.$$
expect "raw NUL byte in prompt"   400 $C "@/tmp/hostile_nul.$$"
rm -f /tmp/hostile_nul.$$
expect "escaped backslash, u0000" 200 /tokenize '{"content":"Once\\u0000 upon"}'
R=$(curl -s -H "$AUTH" "$BASE/v1/chat/completions" -d '{"messages":[{"role":"user","content":"a\u0000"}]}')
case "$R" in *'"param":"messages"'*NUL*|*NUL*'"param":"messages"'*) ;; *) echo "FAIL: NUL error names no field: $R"; fail=1 ;; esac
# what can never be served is a 400, not a 500 or a 429 to retry forever
expect "max_tokens zero"          400 $C '{"prompt":"x","max_tokens":0}'
expect "empty grammar"            400 $C '{"prompt":"x","grammar":""}'
expect "n past max-seqs + queue"  400 $C '{"prompt":"x","n":16,"max_tokens":1}'
BAN=$(for i in $(seq 0 511); do [ "$i" = 100 ] || printf '"%d":-100,' "$i"; done)
expect "grammar nothing can meet" 400 $C "{\"prompt\":\"x\",\"max_tokens\":5,\"grammar\":\"root ::= \\\"b\\\"\",\"logit_bias\":{${BAN%,}}}"
expect "logit_bias bans all"      400 $C "{\"prompt\":\"x\",\"logit_bias\":{${BAN}\"100\":-100}}"
R=$(curl -s -H "$AUTH" "$BASE/v1/completions" -d "{\"prompt\":\"$(printf 'Lily and Tom went to the park. %.0s' $(seq 1 40))\"}")
case "$R" in *'"param":"prompt"'*) ;; *) echo "FAIL: a long prompt's error names no 'prompt': $R"; fail=1 ;; esac
expect "detokenize bad id"        400 /detokenize '{"tokens":[1,2,99999]}'
head -c 10000000 /dev/zero | tr '\0' 'a' >/tmp/hostile_big.$$
expect "10 MB body"               413 $C "@/tmp/hostile_big.$$"
rm -f /tmp/hostile_big.$$
# well-formed ones answer 200
expect "tokenize"                 200 /tokenize '{"content":"Once upon a time"}'
expect "detokenize"               200 /detokenize '{"tokens":[1,403,407]}'
expect "ok with token ids"        200 $C '{"prompt":[1,403,407],"max_tokens":3}'
# a body sent one byte per second: the connection is closed after --timeout (2 s)
trap "" PIPE  # a write to the socket the server closed must fail, not kill us
start=$(date +%s)
exec 3<>"/dev/tcp/127.0.0.1/$PORT"
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n' "$KEY" >&3
closed=0
for i in $(seq 1 12); do
    printf '{' >&3 2>/dev/null || { closed=1; break; }
    if read -r -t 1 -u 3 line; then :; fi
    # the server closed: a read returns EOF immediately
    if ! timeout 0.2 bash -c 'exec 0<&3; true' 2>/dev/null; then closed=1; break; fi
    [ $(( $(date +%s) - start )) -gt 8 ] && break
done
exec 3>&- 3<&- 2>/dev/null
elapsed=$(( $(date +%s) - start ))
n=$((n + 1))
# either the write failed (closed) or we got there before 8 s: check with a probe read
if [ "$closed" -ne 1 ] && [ "$elapsed" -gt 8 ]; then echo "FAIL: slow body kept open for ${elapsed}s"; fail=1; fi
good "slow body"
# health and metrics need no key; metrics count the statuses
[ "$(curl -s -o /dev/null -w '%{http_code}' "$BASE/health")" = 200 ] || { echo "FAIL: health"; fail=1; }
curl -s "$BASE/metrics" | grep -q 'tokd_http_responses_total{code="400"}' || { echo "FAIL: metrics"; fail=1; }
echo "$n hostile requests"
stop_server || fail=1
exit $fail
