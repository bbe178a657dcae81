/* toolchoice.h — a grammar that forces the model to call a tool (tool_choice "required" or a
 * named function), written in the model's own tool-call syntax.
 *
 * The grammar accepts exactly one call, spelled the way the tool-call parser (toolcall.h)
 * reads it back for the format:
 *   HERMES       <tool_call>\n{"name": "N", "arguments": ARGS}\n</tool_call>
 *   PHI4         <|tool_call|>{"name": "N", "arguments": ARGS}<|/tool_call|>
 *   NEMOTRON     <TOOLCALL>[{"name": "N", "arguments": ARGS}]</TOOLCALL>
 *   LLAMA3       {"name": "N", "parameters": ARGS}
 *   MISTRAL      [TOOL_CALLS][{"name": "N", "arguments": ARGS}]
 *   FUNCTIONARY  <function=N>ARGS</function>
 * where N is one of the tools' names (or the named one) and ARGS a JSON object valid under
 * that tool's `parameters` schema (json_schema.c; any object when the tool has none). The
 * markers are plain text in the grammar: a marker that is a special token of the vocabulary
 * is written by the model as ordinary pieces and reads back the same once detokenized.
 * Other formats (and NONE) are refused with an error naming the format.
 *
 * Each tool's schema grammar is generated on its own and its rule names are prefixed
 * ("t3-..."), so the tools' rules never collide. */
#ifndef TOKD_TOOLCHOICE_H
#define TOKD_TOOLCHOICE_H

#include <cjson/cJSON.h>

#include "chat/toolcall.h"
#include "util.h"

/* tools: the request's OpenAI array [{"type": "function", "function": {"name", "parameters"}}].
 * only_name: force this function (NULL: any of the tools). Returns malloc'd grammar text, or
 * NULL with err (no tools, unknown name, a bad schema, an unsupported format). */
char *tokd_toolchoice_gbnf(tokd_toolcall_format fmt, const cJSON *tools, const char *only_name, tokd_err *err);

#endif
