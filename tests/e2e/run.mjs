// End-to-end: sinkstream serve on a loopback port, driven by the official
// `openai` npm client (streaming chat) and by headless Chromium through
// playwright-core (the web chat page keeps its session across two messages).
// Usage: node run.mjs SINKSTREAM_BINARY MODEL
import { spawn } from 'node:child_process';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { chromium } from 'playwright-core';

const [bin, model] = process.argv.slice(2);
const servers = [];
// A server on a free loopback port (stopped at the end); returns its base URL.
async function startServer(extra = []) {
  const proc = spawn(bin, ['serve', '-m', model, '--port', '0', '--policy', 'sinks:4:60', ...extra], { stdio: ['ignore', 'pipe', 'inherit'] });
  servers.push(proc);
  const port = await new Promise((resolve, reject) => {
    let buf = '';
    proc.stdout.on('data', (d) => { buf += d; const m = buf.match(/listening on port (\d+)/); if (m) resolve(Number(m[1])); });
    proc.on('exit', (c) => reject(new Error('server exited ' + c)));
  });
  return `http://127.0.0.1:${port}`;
}
const killer = setTimeout(() => { console.error('timeout'); for (const p of servers) p.kill('SIGKILL'); process.exit(1); }, 180000);
const base = await startServer();
let passed = 0, failed = 0;
async function check(name, fn) {
  try { await fn(); passed++; console.log(`ok - ${name}`); } catch (e) { failed++; console.log(`not ok - ${name}: ${e.stack || e}`); }
}

await check('openai client streams a chat completion', async () => {
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused' });
  const models = await client.models.list();
  assert.ok(models.data.length === 1);
  const stream = await client.chat.completions.create({
    model: models.data[0].id, messages: [{ role: 'user', content: 'Once upon a time' }], stream: true, max_tokens: 30, temperature: 0,
  });
  let text = '', chunks = 0, finish = null;
  for await (const chunk of stream) {
    chunks++;
    text += chunk.choices[0]?.delta?.content ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.ok(chunks >= 3, `chunks ${chunks}`);
  assert.ok(text.length > 10, `text '${text}'`);
  assert.equal(finish, 'length');
  const full = await client.chat.completions.create({
    model: models.data[0].id, messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 30, temperature: 0,
  });
  assert.equal(full.choices[0].message.content, text);
  assert.equal(full.usage.completion_tokens, 30);
});

await check('openai client: logprobs, penalties, logit_bias, max_completion_tokens', async () => {
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused' });
  const model = (await client.models.list()).data[0].id;
  const chat = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'Once upon a time' }], max_completion_tokens: 8, temperature: 0,
    logprobs: true, top_logprobs: 3, frequency_penalty: 0.5, presence_penalty: 0.25,
  });
  const entries = chat.choices[0].logprobs.content;
  assert.equal(entries.length, 8);
  assert.equal(entries.map((e) => e.token).join(''), chat.choices[0].message.content);
  for (const e of entries) {
    assert.ok(e.logprob <= 0 && e.top_logprobs.length === 3, JSON.stringify(e));
    assert.deepEqual(e.bytes, [...Buffer.from(e.token)]);
  }
  const stream = await client.completions.create({
    model, prompt: 'Once upon a time', max_tokens: 6, temperature: 0, logprobs: 2, stream: true,
  });
  const tokens = [];
  let text = '';
  for await (const chunk of stream) {
    text += chunk.choices[0]?.text ?? '';
    tokens.push(...(chunk.choices[0]?.logprobs?.tokens ?? []));
  }
  assert.equal(tokens.length, 6);
  assert.equal(tokens.join(''), text);
  // lm-evaluation-harness's loglikelihood request: token ids, echo, one alternative.
  const scored = await client.completions.create({
    model, prompt: [[1, 403, 407, 261]], max_tokens: 1, temperature: 0, logprobs: 1, echo: true, seed: 1234,
  });
  const slp = scored.choices[0].logprobs;
  assert.equal(slp.token_logprobs.length, 5);
  assert.equal(slp.token_logprobs[0], null);
  assert.ok(slp.token_logprobs.slice(1).every((v) => v < 0), JSON.stringify(slp));
  assert.ok(scored.choices[0].text.startsWith('Once upon a'), scored.choices[0].text);
  // An id past the vocabulary is a 400 the client raises (banning and forcing: openai_fields_test.cpp).
  await assert.rejects(client.completions.create({ model, prompt: 'a', logit_bias: { 100000: -100 } }), /400/);
});

await check('openai client: structured output with a JSON schema, streamed', async () => {
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused' });
  const model = (await client.models.list()).data[0].id;
  const schema = {
    type: 'object',
    properties: {
      name: { type: 'string', maxLength: 12 }, age: { type: 'integer', minimum: 1, maximum: 120 },
      pet: { enum: ['cat', 'dog'] },
    },
    required: ['name', 'age', 'pet'], additionalProperties: false,
  };
  let closed = 0;
  for (const seed of [1, 2, 3]) {
    const stream = await client.chat.completions.create({
      model, messages: [{ role: 'user', content: 'Who is Lily?' }], max_tokens: 150, seed, stream: true,
      response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } },
    });
    let text = '', finish = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    if (finish !== 'stop') continue;
    closed++;
    const v = JSON.parse(text);
    assert.deepEqual(Object.keys(v).sort(), ['age', 'name', 'pet'], text);
    assert.ok(typeof v.name === 'string' && Number.isInteger(v.age) && ['cat', 'dog'].includes(v.pet), text);
    assert.ok(v.age >= 1 && v.age <= 120, text);
  }
  assert.ok(closed >= 2, `closed ${closed} of 3`);
  // vLLM's and llama.cpp's fields ride in the body as the client sends extra ones.
  const choice = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'Yes or no?' }], max_tokens: 10, guided_choice: ['yes', 'no'],
  });
  assert.ok(['yes', 'no'].includes(choice.choices[0].message.content), JSON.stringify(choice));
  const stream = await client.completions.create({
    model, prompt: 'Tom', max_tokens: 30, seed: 4, stream: true,
    grammar: 'root ::= " was " ("happy" | "sad") "."',
  });
  let said = '';
  for await (const chunk of stream) said += chunk.choices[0]?.text ?? '';
  assert.ok([' was happy.', ' was sad.'].includes(said), said);
  const regex = await client.completions.create({ model, prompt: 'On', max_tokens: 20, guided_regex: '\\d{2}:\\d{2}' });
  assert.match(regex.choices[0].text, /^\d{2}:\d{2}$/);
  // JSON Schema's pattern (found anywhere unless anchored), as pydantic's constr writes it.
  const coded = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'A code.' }], max_tokens: 60, seed: 2,
    response_format: { type: 'json_schema', json_schema: { name: 'c', strict: true, schema: {
      type: 'object', properties: { code: { type: 'string', pattern: '^[A-Z]{2}-\\d{3}$' } },
      required: ['code'], additionalProperties: false } } },
  });
  assert.equal(coded.choices[0].finish_reason, 'stop');  // 60 tokens hold it (measured: 21)
  assert.match(JSON.parse(coded.choices[0].message.content).code, /^[A-Z]{2}-\d{3}$/);
  await assert.rejects(client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'hi' }],
    response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: 'a(?=b)' } } },
  }), /400/);
});

// One tool and one question for the tool-call checks below.
const weatherTools = [{
  type: 'function',
  function: {
    name: 'get_weather', description: 'Weather for a city',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'] },
  },
}];
const weatherQuestion = [{ role: 'user', content: 'What is the weather in Paris?' }];

await check('openai client: tool calls, whole and streamed', async () => {
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused' });
  const model = (await client.models.list()).data[0].id;
  const tools = weatherTools, messages = weatherQuestion;
  const whole = await client.chat.completions.create({ model, messages, tools, tool_choice: 'required', max_tokens: 150, seed: 1 });
  const choice = whole.choices[0];
  if (choice.finish_reason === 'tool_calls') {
    const call = choice.message.tool_calls[0];
    assert.equal(call.type, 'function');
    assert.equal(call.function.name, 'get_weather');
    assert.equal(typeof JSON.parse(call.function.arguments).city, 'string');
    // The call and its result go back as history.
    const next = await client.chat.completions.create({
      model, tools, max_tokens: 150, seed: 2,
      messages: [...messages, choice.message, { role: 'tool', tool_call_id: call.id, content: 'sunny' }],
    });
    assert.ok(['tool_calls', 'stop', 'length'].includes(next.choices[0].finish_reason), next.choices[0].finish_reason);
  } else {
    assert.equal(choice.finish_reason, 'length');
  }
  const stream = await client.chat.completions.create({ model, messages, tools, tool_choice: 'required', max_tokens: 150, seed: 3, stream: true });
  let name = '', args = '', finish = null;
  for await (const chunk of stream) {
    for (const tc of chunk.choices[0]?.delta?.tool_calls ?? []) { name += tc.function?.name ?? ''; args += tc.function?.arguments ?? ''; }
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  if (finish === 'tool_calls') {
    assert.equal(name, 'get_weather');
    assert.equal(typeof JSON.parse(args).city, 'string');
  } else {
    assert.equal(finish, 'length');
  }
});

// gpt-oss's own tool format (Harmony): stories260K under the gpt-oss
// template spells the headers as text; the answer is shaped into a call.
await check('openai client: gpt-oss tool calls in Harmony format, and their history', async () => {
  const ossBase = await startServer(['--chat-template', 'gpt-oss']);
  const client = new OpenAI({ baseURL: `${ossBase}/v1`, apiKey: 'unused' });
  const model = (await client.models.list()).data[0].id;
  const tools = weatherTools, messages = weatherQuestion;
  let calls = 0;
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.create({ model, messages, tools, tool_choice: 'required', max_tokens: 400, seed });
    const choice = r.choices[0];
    if (choice.finish_reason !== 'tool_calls') { assert.equal(choice.finish_reason, 'length'); continue; }
    calls++;
    assert.equal(choice.message.content, null);
    const call = choice.message.tool_calls[0];
    assert.equal(call.function.name, 'get_weather');
    const args = JSON.parse(call.function.arguments);
    assert.deepEqual(Object.keys(args), ['city']);
    assert.ok([...args.city].length <= 12, args.city);
    const next = await client.chat.completions.create({
      model, tools, max_tokens: 60, seed,
      messages: [...messages, choice.message, { role: 'tool', tool_call_id: call.id, content: 'sunny' }],
    });
    assert.ok(['tool_calls', 'stop', 'length'].includes(next.choices[0].finish_reason), next.choices[0].finish_reason);
  }
  console.log(`# gpt-oss: ${calls} of 3 answers were calls`);
  assert.ok(calls >= 2, `${calls} of 3 answers were calls`);
});

await check('web page streams answers and keeps its session', async () => {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  try {
    const page = await browser.newPage();
    await page.goto(base + '/');
    const sid = await page.locator('#sid').textContent();
    assert.ok(sid && sid.startsWith('web-'));
    for (const [i, msg] of ['Lily had a red ball.', 'She gave it to her friend.'].entries()) {
      await page.fill('#msg', msg);
      await page.press('#msg', 'Enter');
      await page.waitForSelector(`.assistant >> nth=${i}`);
      await page.waitForFunction((n) => document.querySelectorAll('.assistant[data-done="1"]').length > n, i, { timeout: 30000 });
      const answer = await page.locator('.assistant').nth(i).textContent();
      assert.ok(answer.length > 0, 'empty answer');
    }
    assert.equal(await page.locator('#sid').textContent(), sid);
    const res = await fetch(`${base}/v1/sessions/${sid}`);
    const s = await res.json();
    assert.equal(s.turns, 2);
    assert.ok(s.tokens_seen > 0);
    const tps = await page.locator('#tps').textContent();
    assert.ok(Number(tps) > 0, `tok/s '${tps}'`);
    await page.waitForFunction(() => Number(document.querySelector('#seen').textContent) > 0);
  } finally {
    await browser.close();
  }
});

clearTimeout(killer);
for (const p of servers) p.kill('SIGTERM');
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
