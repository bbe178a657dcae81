// openai_client.mjs — drives tokd serve with the official `openai` npm client.
import { createRequire } from 'node:module';
import assert from 'node:assert/strict';
const require = createRequire(process.env.NODE_PATH + '/');
const OpenAI = require('openai').default ?? require('openai');

const client = new OpenAI({ baseURL: process.env.BASE + '/v1', apiKey: 'test-key-123', maxRetries: 0 });
let checks = 0;
const ok = (c, msg) => { assert.ok(c, msg); checks++; };

const models = await client.models.list();
ok(models.data.length === 1 && models.data[0].id === 'stories260K', 'models list');
const model = models.data[0].id;

// text completion, not streamed: the story the model was trained on
const c1 = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 24, temperature: 0 });
ok(c1.object === 'text_completion' && c1.choices.length === 1, 'completion shape');
ok(c1.choices[0].text.includes('Lily'), 'completion text: ' + c1.choices[0].text);
ok(c1.choices[0].finish_reason === 'length', 'finish_reason length');
ok(c1.usage.prompt_tokens > 0 && c1.usage.completion_tokens === 24 && c1.usage.total_tokens === c1.usage.prompt_tokens + 24, 'usage');

// streamed: the same text in pieces
const s1 = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 24, temperature: 0, stream: true,
                                              stream_options: { include_usage: true } });
let text = '', finish = null, usage = null, chunks = 0;
for await (const ch of s1) {
  chunks++;
  if (ch.usage) usage = ch.usage;
  for (const c of ch.choices) { text += c.text; if (c.finish_reason) finish = c.finish_reason; }
}
ok(text === c1.choices[0].text, `streamed text equals non-streamed: ${JSON.stringify(text)}`);
ok(chunks > 5 && finish === 'length' && usage && usage.completion_tokens === 24, 'stream finish and usage');

// stop string
const c2 = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 40, temperature: 0, stop: ['Lily'] });
ok(!c2.choices[0].text.includes('Lily') && c2.choices[0].finish_reason === 'stop', 'stop string: ' + c2.choices[0].text);

// chat, not streamed and streamed
const msgs = [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'Tell me about a cat.' }];
const r1 = await client.chat.completions.create({ model, messages: msgs, max_tokens: 16, temperature: 0 });
ok(r1.object === 'chat.completion' && r1.choices[0].message.role === 'assistant', 'chat shape');
ok(typeof r1.choices[0].message.content === 'string' && r1.choices[0].message.content.length > 0, 'chat content');
ok(['stop', 'length'].includes(r1.choices[0].finish_reason), 'chat finish_reason');
ok(r1.usage.prompt_tokens > 10 && r1.usage.completion_tokens > 0, 'chat usage');
const r2 = await client.chat.completions.create({ model, messages: msgs, max_tokens: 16, temperature: 0, stream: true,
                                                 stream_options: { include_usage: true } });
let ctext = '', cfinish = null, cusage = null, role = null;
for await (const ch of r2) {
  if (ch.usage) cusage = ch.usage;
  for (const c of ch.choices) {
    if (c.delta.role) role = c.delta.role;
    if (c.delta.content) ctext += c.delta.content;
    if (c.finish_reason) cfinish = c.finish_reason;
  }
}
ok(role === 'assistant' && ctext === r1.choices[0].message.content, 'chat stream equals non-stream: ' + ctext);
ok(cfinish === r1.choices[0].finish_reason && cusage && cusage.completion_tokens === r1.usage.completion_tokens, 'chat stream usage');
ok(cusage.prompt_tokens_details.cached_tokens >= 16, 'second identical chat prompt hits the prefix cache');

// n > 1 with seeds, and logprobs
const r3 = await client.chat.completions.create({ model, messages: msgs, max_tokens: 8, temperature: 0.9, seed: 7, n: 3,
                                                 logprobs: true, top_logprobs: 2 });
ok(r3.choices.length === 3 && r3.choices.every((c, i) => c.index === i), 'n = 3');
ok(r3.choices[0].logprobs.content.length > 0 && r3.choices[0].logprobs.content[0].top_logprobs.length === 2, 'logprobs');
const r4 = await client.chat.completions.create({ model, messages: msgs, max_tokens: 8, temperature: 0.9, seed: 7, n: 3 });
ok(r4.choices.map(c => c.message.content).join('|') === r3.choices.map(c => c.message.content).join('|'), 'seeded sampling is reproducible');

// prefix cache: a long shared prefix
const long = 'Once upon a time, there was a little girl named Lily. She loved to play outside in the park. '.repeat(8);
const p1 = await client.completions.create({ model, prompt: long + 'One day', max_tokens: 4, temperature: 0 });
const p2 = await client.completions.create({ model, prompt: long + 'The dog', max_tokens: 4, temperature: 0 });
ok(p2.usage.prompt_tokens_details.cached_tokens >= p1.usage.prompt_tokens - 32, `cached ${p2.usage.prompt_tokens_details.cached_tokens} of ${p2.usage.prompt_tokens}`);

// errors come back as the client's typed errors
try { await client.completions.create({ model, prompt: 'x', max_tokens: -1 }); ok(false, 'expected 400'); }
catch (e) { ok(e.status === 400 && /max_tokens/.test(e.message), 'bad request: ' + e.message); }
try { await client.completions.create({ model: 'gpt-4', prompt: 'x' }); ok(false, 'expected 404'); }
catch (e) { ok(e.status === 404, 'unknown model: ' + e.status); }
const bad = new OpenAI({ baseURL: process.env.BASE + '/v1', apiKey: 'wrong', maxRetries: 0 });
try { await bad.models.list(); ok(false, 'expected 401'); }
catch (e) { ok(e.status === 401, 'wrong key: ' + e.status); }
console.log(`${checks} checks passed`);
