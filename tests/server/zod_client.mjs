// zod_client.mjs — structured output the way TypeScript users ask for it: a zod schema
// (a regex, an email, a url, an array of enum values, bounded strings and an integer range),
// sent by the `openai` package's zodResponseFormat as a strict json_schema, answered by
// tokd serve, and checked by the client's own parse() (which runs zod over the answer), then
// by zod again on the raw text.
import { createRequire } from 'node:module';
const require = createRequire(process.env.NODE_PATH + '/');
const { z } = require('zod');
const { zodResponseFormat } = require('openai/helpers/zod');
const OpenAI = require('openai').default ?? require('openai');

const client = new OpenAI({ baseURL: process.env.BASE + '/v1', apiKey: 'test-key-123', maxRetries: 0 });
const Contact = z.object({
  name: z.string().regex(/^[A-Z][a-z]+$/).max(12),
  email: z.string().email().max(30),
  site: z.string().url().max(40),
  tags: z.array(z.enum(['red', 'green', 'blue'])).max(3),
  code: z.string().min(2).max(6),
  age: z.number().int().min(0).max(120),
});
let fails = 0;
for (let seed = 1; seed <= 6; seed++) {
  try {
    const r = await client.beta.chat.completions.parse({
      model: 'stories260K', messages: [{ role: 'user', content: 'A contact, please.' }],
      response_format: zodResponseFormat(Contact, 'contact'), temperature: 1, seed, max_tokens: 600 });
    const c = r.choices[0];
    const ok = c.finish_reason === 'stop' && c.message.parsed && Contact.safeParse(JSON.parse(c.message.content)).success;
    if (!ok) fails++;
    console.log(ok ? 'ok  ' : 'FAIL', 'seed', seed, c.finish_reason, c.message.content.replace(/\s+/g, ' '));
  } catch (e) {
    fails++;
    console.log('FAIL seed', seed, String(e).slice(0, 400));
  }
}
process.exit(fails ? 1 : 0);
