// queue_client.mjs — a server started with --max-seqs 1 --max-queue 1 holds one running and
// one waiting request; every further request is refused at once with 429, Retry-After: 1
// and an OpenAI error object (seen raw and through the `openai` client's RateLimitError),
// streamed or not; the admitted ones finish correctly, and once the queue drains the server
// serves again.
import { createRequire } from 'node:module';
import assert from 'node:assert/strict';
const require = createRequire(process.env.NODE_PATH + '/');
const OpenAI = require('openai').default ?? require('openai');

const BASE = process.env.BASE;
const LONG = Number(process.env.LONG_TOKENS || 2000);
const client = new OpenAI({ baseURL: BASE + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 120000 });
let checks = 0;
const ok = (c, msg) => { assert.ok(c, msg); checks++; };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const metrics = async () => {
  const t = await (await fetch(BASE + '/metrics')).text();
  const m = {};
  for (const l of t.split('\n')) if (l && !l.startsWith('#')) { const i = l.lastIndexOf(' '); m[l.slice(0, i)] = Number(l.slice(i + 1)); }
  return m;
};
const waitFor = async (what, pred) => {
  for (let i = 0; i < 400; i++) { const m = await metrics(); if (pred(m)) return m; await sleep(5); }
  assert.fail('timed out waiting for ' + what);
};

const model = (await client.models.list()).data[0].id;
const long = { model, prompt: 'Once upon a time', max_tokens: LONG, temperature: 0, ignore_eos: true };
const post = (path, body) => fetch(BASE + path, { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                                  body: JSON.stringify(body) });
// a raw request that must be refused: 429, Retry-After 1, JSON error object
async function expect429(name, path, body) {
  const r = await post(path, body);
  const text = await r.text();
  ok(r.status === 429, `${name}: status ${r.status}, expected 429: ${text.slice(0, 200)}`);
  ok(r.headers.get('retry-after') === '1', `${name}: Retry-After ${r.headers.get('retry-after')}`);
  ok((r.headers.get('content-type') || '').startsWith('application/json'), `${name}: content-type ${r.headers.get('content-type')}`);
  const e = JSON.parse(text).error;
  ok(e && e.type === 'rate_limit_error' && typeof e.message === 'string' && /retry/i.test(e.message),
     `${name}: error object ${text}`);
}
// the same through the openai client: a typed RateLimitError carrying the header
async function expectClient429(name, fn) {
  try { await fn(); ok(false, `${name}: expected 429`); }
  catch (e) {
    ok(e instanceof OpenAI.RateLimitError && e.status === 429, `${name}: ${e}`);
    ok(e.headers?.['retry-after'] === '1', `${name}: client saw Retry-After ${e.headers?.['retry-after']}`);
  }
}

// 1. deterministic: fill the one running slot and the one queue place, then everything is refused
const m0 = await metrics();
const a = client.completions.create(long);
await waitFor('A running', (m) => m.tokd_sequences_running === 1);
const b = client.completions.create({ ...long, prompt: 'The little dog' });
await waitFor('B queued', (m) => m.tokd_sequences_running === 1 && m.tokd_sequences_waiting === 1);
await expect429('completion', '/v1/completions', { prompt: 'Hello', max_tokens: 4 });
await expect429('streamed completion', '/v1/completions', { prompt: 'Hello', max_tokens: 4, stream: true });
await expect429('chat', '/v1/chat/completions', { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4 });
await expectClient429('client completion', () => client.completions.create({ model, prompt: 'Hello', max_tokens: 4 }));
await expectClient429('client streamed chat', async () => {
  const s = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, stream: true });
  for await (const _ of s);
});
const m1 = await metrics();
ok(m1.tokd_sequences_running === 1 && m1.tokd_sequences_waiting === 1, 'A and B still in the engine during the refusals');
ok(m1['tokd_http_responses_total{code="429"}'] - m0['tokd_http_responses_total{code="429"}'] === 5, '429s counted in /metrics');
const [ra, rb] = await Promise.all([a, b]);
for (const [n, r] of [['A', ra], ['B', rb]])
  ok(r.choices[0].finish_reason === 'length' && r.usage.completion_tokens === LONG && r.choices[0].text.length > 0,
     `${n} completed: ${r.choices[0].finish_reason} ${r.usage.completion_tokens}`);

// 2. once drained, the same request is served again
await waitFor('drained', (m) => m.tokd_sequences_running === 0 && m.tokd_sequences_waiting === 0);
const again = await client.completions.create({ model, prompt: 'Hello', max_tokens: 4, temperature: 0 });
ok(again.usage.completion_tokens > 0, 'served after the queue drained');

// 3. a burst of long requests: each is either refused with 429 + Retry-After, or completes
// with exactly the text A got (same prompt, greedy); the first always gets in
const burst = await Promise.all(Array.from({ length: 6 }, () => post('/v1/completions', long)
  .then(async (r) => ({ status: r.status, retry: r.headers.get('retry-after'), body: await r.json() }))));
let n200 = 0, n429 = 0;
for (const r of burst) {
  if (r.status === 200) {
    n200++;
    ok(r.body.choices[0].text === ra.choices[0].text && r.body.usage.completion_tokens === LONG, 'burst: admitted request is correct');
  } else {
    n429++;
    ok(r.status === 429 && r.retry === '1' && r.body.error?.type === 'rate_limit_error', `burst: ${r.status} ${JSON.stringify(r.body)}`);
  }
}
ok(n200 >= 1 && n429 >= 1, `burst: ${n200} served, ${n429} refused`);
const h = await fetch(BASE + '/health');
ok(h.status === 200, 'healthy after the burst');
console.log(`burst: ${n200} served, ${n429} refused`);
console.log(`${checks} checks passed`);
