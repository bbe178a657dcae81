/* fuzz_jinja.c — libFuzzer target: arbitrary bytes as a template, parsed and rendered with
 * a small fixed chat context under tight limits. Whatever the input, parsing and rendering
 * must return (success or an error) without crashing, hanging or leaking; the step, output,
 * memory and depth limits are what make every input finish quickly. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "chat/jinja.h"

static const char CONTEXT[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \"Hi \\u00e9 \\ud83e\\udd99 \\\"q\\\" \\\\\"},"
    " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"call_1\", \"type\": \"function\","
    "   \"function\": {\"name\": \"f\", \"arguments\": {\"x\": 1.5, \"y\": [true, null]}}}]},"
    " {\"role\": \"tool\", \"tool_call_id\": \"call_1\", \"content\": \"{\\\"ok\\\": 1}\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"d\","
    "   \"parameters\": {\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"number\"}}, \"required\": [\"x\"]}}}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"n\": 3, \"f\": 0.5}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 1 << 16) return 0;
    tokd_err err;
    jinja_template *t = jinja_parse((const char *)data, size, &err);
    if (!t) return 0;
    jinja_limits lim = {.max_steps = 200000, .max_output = 1 << 16, .max_memory = 16 << 20, .max_depth = 100};
    char *out = NULL;
    size_t len = 0;
    if (jinja_render_json(t, CONTEXT, sizeof CONTEXT - 1, &lim, &out, &len, &err) == 0) free(out);
    jinja_free(t);
    return 0;
}
