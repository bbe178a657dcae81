// invariance_client.mjs — batch invariance end to end, with the official `openai` npm client:
// 16 greedy requests (8 sharing one ~200-token prefix, 8 unrelated; text completions and
// streamed chat completions) sent one at a time, then all 16 at once, twice. Every request's
// text, finish_reason and token counts must be identical in all three rounds, whatever the
// batch around it and whether its prefix came from the cache or was computed.
import { createRequire } from 'node:module';
import assert from 'node:assert/strict';
const require = createRequire(process.env.NODE_PATH + '/');
const OpenAI = require('openai').default ?? require('openai');

const BASE = process.env.BASE;
const client = new OpenAI({ baseURL: BASE + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 60000 });
const MAX_TOKENS = 48;
let checks = 0;
const ok = (c, msg) => { assert.ok(c, msg); checks++; };

const metric = async (name) => {
  const t = await (await fetch(BASE + '/metrics')).text();
  const line = t.split('\n').find((l) => l.startsWith(name + ' '));
  assert.ok(line, 'metric ' + name);
  return Number(line.split(' ')[1]);
};

const model = (await client.models.list()).data[0].id;

const PREFIX =
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her dog Max. ' +
  'Every morning she ran to the big tree near the pond and looked at the ducks. One day she saw a small bird ' +
  'sitting on a branch. The bird was sad because it had lost its mother. Lily wanted to help the bird find its ' +
  'way home, so she asked her friend Tom. Tom was a kind boy who liked to climb trees and build boats. ' +
  'They walked around the pond and called to the other birds. ';
const ENDINGS = ['Then', 'Suddenly, the bird', 'The next day,', 'Tom said,', 'But Max', 'So they went', 'At night,',
                 'Lily smiled and'];
const UNRELATED = ['The sun was hot and the sky was blue.', 'Ben had a big red ball.', 'Sue and her mom went to the shop.',
                   'A little cat lived in a box.', 'The boy wanted to fly a kite.', 'Anna found a shiny stone.',
                   'The frog jumped into the water.', 'Grandpa told a story about a dragon.'];

// request specs: what to send and how (non-streamed text completion, streamed text
// completion, streamed chat completion)
const specs = [];
ENDINGS.forEach((e, i) => {
  if (i < 6) specs.push({ shared: true, kind: i === 5 ? 'cmpl-stream' : 'cmpl', prompt: PREFIX + e });
  else specs.push({ shared: true, kind: 'chat-stream', messages: [{ role: 'system', content: PREFIX }, { role: 'user', content: e }] });
});
UNRELATED.forEach((p, i) => {
  if (i < 4) specs.push({ shared: false, kind: i === 3 ? 'cmpl-stream' : 'cmpl', prompt: p });
  else specs.push({ shared: false, kind: 'chat-stream', messages: [{ role: 'user', content: p }] });
});

async function send(s) {
  const common = { model, max_tokens: MAX_TOKENS, temperature: 0 };
  if (s.kind === 'cmpl') {
    const r = await client.completions.create({ ...common, prompt: s.prompt });
    assert.equal(r.choices.length, 1);
    return { text: r.choices[0].text, finish: r.choices[0].finish_reason, usage: r.usage };
  }
  const stream = s.kind === 'cmpl-stream'
    ? await client.completions.create({ ...common, prompt: s.prompt, stream: true, stream_options: { include_usage: true } })
    : await client.chat.completions.create({ ...common, messages: s.messages, stream: true,
                                             stream_options: { include_usage: true } });
  let text = '', finish = null, usage = null;
  for await (const ch of stream) {
    if (ch.usage) usage = ch.usage;
    for (const c of ch.choices) {
      text += s.kind === 'cmpl-stream' ? (c.text ?? '') : (c.delta?.content ?? '');
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.ok(usage, 'streamed usage');
  return { text, finish, usage };
}

const rounds = [];
// round 1: one at a time
const r1 = [];
const steps0 = await metric('tokd_steps_total');
for (const s of specs) r1.push(await send(s));
rounds.push(r1);
const stepsSeq = (await metric('tokd_steps_total')) - steps0;
// rounds 2 and 3: all 16 at once
const stepsConc = [];
for (let k = 0; k < 2; k++) {
  const before = await metric('tokd_steps_total');
  rounds.push(await Promise.all(specs.map(send)));
  stepsConc.push((await metric('tokd_steps_total')) - before);
}

// the three rounds agree, request by request, byte for byte
const ref = rounds[0];
for (let k = 1; k < 3; k++)
  for (let i = 0; i < specs.length; i++) {
    const a = ref[i], b = rounds[k][i];
    ok(Buffer.from(b.text, 'utf8').equals(Buffer.from(a.text, 'utf8')),
       `request ${i} (${specs[i].kind}) round ${k + 1} differs from round 1:\n  ${JSON.stringify(a.text)}\n  ${JSON.stringify(b.text)}`);
    ok(b.finish === a.finish && b.usage.completion_tokens === a.usage.completion_tokens &&
       b.usage.prompt_tokens === a.usage.prompt_tokens, `request ${i} round ${k + 1}: finish/usage differ`);
  }

// the concurrent rounds were really batched: far fewer steps than tokens generated
const genPerRound = ref.reduce((n, r) => n + r.usage.completion_tokens, 0);
for (const st of stepsConc) ok(st < genPerRound / 3, `concurrent round took ${st} steps for ${genPerRound} tokens: not batched`);
ok(stepsSeq >= genPerRound, `sequential round took only ${stepsSeq} steps for ${genPerRound} tokens`);

// the shared-prefix requests came from the prefix cache in the concurrent rounds
for (let k = 1; k < 3; k++)
  specs.forEach((s, i) => {
    if (!s.shared) return;
    const c = rounds[k][i].usage.prompt_tokens_details?.cached_tokens ?? 0;
    ok(c > 0, `round ${k + 1} request ${i}: no cached tokens`);
    if (s.kind !== 'chat-stream') ok(c >= 160, `round ${k + 1} request ${i}: only ${c} cached tokens of a ~200-token prefix`);
  });
// ... and the prefix really is ~200 tokens
const pt = ref[0].usage.prompt_tokens;
ok(pt >= 190 && pt <= 230, `shared-prefix prompt has ${pt} tokens`);

// the outputs are meaningful: long, mostly distinct, and the story model tells its story
const long = ref.filter((r) => r.usage.completion_tokens === MAX_TOKENS && r.text.trim().length >= 40).length;
ok(long >= 12, `only ${long} of 16 outputs ran to ${MAX_TOKENS} tokens with real text`);
const distinct = new Set(ref.map((r) => r.text)).size;
ok(distinct >= 12, `only ${distinct} distinct outputs`);
ok(ref.some((r) => /\b(Lily|Tom|Max|bird)\b/.test(r.text)), 'no shared-prefix output continues the story');

for (let i = 0; i < specs.length; i++)
  console.log(`${String(i).padStart(2)} ${specs[i].kind.padEnd(11)} cached ${String(rounds[2][i].usage.prompt_tokens_details?.cached_tokens).padStart(3)} ` +
              JSON.stringify(ref[i].text.slice(0, 60)));
console.log(`steps: sequential ${stepsSeq}, concurrent rounds ${stepsConc.join(', ')} for ${genPerRound} generated tokens each`);
console.log(`${checks} checks passed`);
