// (f) The official OpenAI Node client (npm openai, pinned and verified by fetch_openai.sh) against
// `kipp serve --api-key`: models.list, completions, chat, streaming (for await), n=2, logprobs,
// stream_options.include_usage, and proper APIError subclasses (status, error.param) for bad
// requests, an unknown model and a wrong key.
//
// Usage: node tests/server/server_openai.mjs   (env KIPP, KIPP_MODELS; fetches via fetch_openai.sh
//        into ${KIPP_CACHE_DIR:-~/.cache/kipp} when needed; OPENAI_NODE_MODULES overrides the folder)
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { main, startServer, fmt, TINY_NAME, TOK_HELLO } from './lib.mjs';

const here = path.dirname(new URL(import.meta.url).pathname);
const modules = process.env.OPENAI_NODE_MODULES ||
  execFileSync(path.join(here, 'fetch_openai.sh'), { encoding: 'utf8' }).trim().split('\n').pop();
const { default: OpenAI } = await import(pathToFileURL(path.join(modules, 'openai', 'index.mjs')).href);
const KEY = 'sk-kipp-test-key';

async function expectApiError(t, ctx, fn, { cls, status, param }) {
  try {
    const r = await fn();
    t.fail(`${ctx}: expected ${cls} (HTTP ${status}), the call succeeded: ${fmt(r)}`);
  } catch (e) {
    t.ok(e instanceof OpenAI.APIError, `${ctx}: expected an OpenAI.APIError, got ${e && e.constructor && e.constructor.name}: ${e && e.message}`);
    t.ok(e instanceof OpenAI[cls], `${ctx}: expected OpenAI.${cls}, got ${e && e.constructor && e.constructor.name}: ${e && e.message}`);
    t.eq(e.status, status, `${ctx}: APIError.status`);
    t.ok(e.error && typeof e.error.message === 'string' && e.error.message.length > 0, `${ctx}: APIError.error.message missing: ${fmt(e.error)}`);
    if (param !== undefined) {
      t.eq(e.param, param, `${ctx}: APIError.param`);
      t.eq(e.error && e.error.param, param, `${ctx}: APIError.error.param`);
    }
  }
}

await main('server_openai', async (t) => {
  const srv = await startServer({ apiKey: KEY });
  const client = new OpenAI({ apiKey: KEY, baseURL: `${srv.base}/v1`, maxRetries: 0, timeout: 60000 });

  await t.section('models.list', async () => {
    const ids = [];
    for await (const m of client.models.list()) ids.push(m.id);
    t.ok(ids.includes(TINY_NAME), `models.list: ${TINY_NAME} not among ${fmt(ids)}`);
  });

  await t.section('completions.create', async () => {
    const r = await client.completions.create({ model: TINY_NAME, prompt: 'Hi', max_tokens: 3, temperature: 0, logit_bias: { [TOK_HELLO]: 100 } });
    t.eq(r.choices[0].text, 'HelloHelloHello', 'completions.create: text');
    t.eq(r.choices[0].finish_reason, 'length', 'completions.create: finish_reason');
    t.eq(r.usage && r.usage.completion_tokens, 3, 'completions.create: usage.completion_tokens');
    t.eq(r.object, 'text_completion', 'completions.create: object');
    const r2 = await client.completions.create({ model: TINY_NAME, prompt: 'Hi', max_tokens: 3, temperature: 0, n: 2, logprobs: 2, logit_bias: { [TOK_HELLO]: 100 } });
    t.eq(r2.choices.map((c) => c.index), [0, 1], 'completions.create n=2: indices');
    t.eq(r2.choices[1].logprobs && r2.choices[1].logprobs.tokens, ['Hello', 'Hello', 'Hello'], 'completions.create logprobs=2: tokens');
  });

  await t.section('chat.completions.create', async () => {
    const r = await client.chat.completions.create({ model: TINY_NAME, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello' }], max_completion_tokens: 4, temperature: 0 });
    t.eq(r.object, 'chat.completion', 'chat.completions.create: object');
    t.eq(r.choices[0].message.role, 'assistant', 'chat.completions.create: role');
    t.ok(typeof r.choices[0].message.content === 'string', `chat.completions.create: content ${fmt(r.choices[0].message.content)}`);
    t.ok(r.usage && r.usage.completion_tokens <= 4, `chat.completions.create: usage ${fmt(r.usage)}`);
    const lp = await client.chat.completions.create({ model: TINY_NAME, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 3, temperature: 0, n: 2, logprobs: true, top_logprobs: 3 });
    t.eq(lp.choices.length, 2, 'chat n=2: choices');
    const content = lp.choices[0].logprobs && lp.choices[0].logprobs.content;
    t.ok(Array.isArray(content) && content.length >= 1 && content.every((e) => e.top_logprobs.length === 3), `chat logprobs top_logprobs=3: ${fmt(content)}`);
    // with_response: the raw Response is reachable and JSON.
    const { data, response } = await client.chat.completions.create({ model: TINY_NAME, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 }).withResponse();
    t.eq(response.status, 200, 'withResponse: status');
    t.ok(typeof data.id === 'string', 'withResponse: data.id');
  });

  await t.section('streaming with for await', async () => {
    const stream = await client.chat.completions.create({ model: TINY_NAME, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 6, temperature: 0, stream: true, stream_options: { include_usage: true } });
    let content = '';
    let finish = null;
    let usage = null;
    let n = 0;
    for await (const chunk of stream) {
      n++;
      t.eq(chunk.object, 'chat.completion.chunk', 'stream chunk object');
      for (const c of chunk.choices) {
        content += c.delta.content || '';
        if (c.finish_reason) finish = c.finish_reason;
      }
      if (chunk.usage) usage = chunk.usage;
    }
    const whole = await client.chat.completions.create({ model: TINY_NAME, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 6, temperature: 0 });
    t.eq(content, whole.choices[0].message.content, 'chat stream: concatenated deltas vs non-streaming content');
    t.eq(finish, whole.choices[0].finish_reason, 'chat stream: finish_reason');
    t.eq(usage && usage.completion_tokens, whole.usage.completion_tokens, 'chat stream include_usage: usage.completion_tokens');
    t.ok(n >= 2, `chat stream: only ${n} chunks`);

    const cs = await client.completions.create({ model: TINY_NAME, prompt: 'Hi', max_tokens: 3, temperature: 0, n: 2, stream: true, logit_bias: { [TOK_HELLO]: 100 } });
    const texts = ['', ''];
    for await (const chunk of cs) for (const c of chunk.choices) texts[c.index] += c.text;
    t.eq(texts, ['HelloHelloHello', 'HelloHelloHello'], 'completions stream n=2: text per index');

    // Abort mid-stream from the client side; the server keeps serving.
    const ab = await client.completions.create({ model: TINY_NAME, prompt: 'Go', max_tokens: 2000, temperature: 0, stream: true });
    let got = 0;
    for await (const chunk of ab) { if (chunk.choices.length) got++; if (got >= 2) { ab.controller.abort(); break; } }
    const after = await client.completions.create({ model: TINY_NAME, prompt: 'Hi', max_tokens: 2 });
    t.ok(after.choices.length === 1, 'a request after a client-side abort');
  });

  await t.section('errors are APIError subclasses with status and param', async () => {
    const msgs = [{ role: 'user', content: 'Hello' }];
    await expectApiError(t, 'chat with a bad tool name', () => client.chat.completions.create({ model: TINY_NAME, messages: msgs, max_tokens: 2,
      tools: [{ type: 'function', function: { name: 'not valid', parameters: { type: 'object', properties: {} } } }] }), { cls: 'BadRequestError', status: 400, param: 'tools[0].function.name' });
    await expectApiError(t, 'chat with legacy functions', () => client.chat.completions.create({ model: TINY_NAME, messages: msgs, max_tokens: 2, functions: [{ name: 'f' }] }),
      { cls: 'BadRequestError', status: 400, param: 'functions' });
    await expectApiError(t, 'completions n=9', () => client.completions.create({ model: TINY_NAME, prompt: 'Hi', max_tokens: 2, n: 9 }), { cls: 'BadRequestError', status: 400, param: 'n' });
    await expectApiError(t, 'chat top_logprobs=21', () => client.chat.completions.create({ model: TINY_NAME, messages: msgs, max_tokens: 2, logprobs: true, top_logprobs: 21 }),
      { cls: 'BadRequestError', status: 400, param: 'top_logprobs' });
    await expectApiError(t, 'unknown model', () => client.completions.create({ model: 'no-such-model', prompt: 'Hi', max_tokens: 2 }), { cls: 'NotFoundError', status: 404 });
    await expectApiError(t, 'streaming with an unknown model', async () => {
      const s = await client.chat.completions.create({ model: 'no-such-model', messages: msgs, max_tokens: 2, stream: true });
      for await (const c of s) void c;
      return 'stream ended';
    }, { cls: 'NotFoundError', status: 404 });
    const wrong = new OpenAI({ apiKey: 'sk-wrong', baseURL: `${srv.base}/v1`, maxRetries: 0 });
    await expectApiError(t, 'wrong API key', () => wrong.models.list(), { cls: 'AuthenticationError', status: 401 });
    await expectApiError(t, 'wrong API key on chat', () => wrong.chat.completions.create({ model: TINY_NAME, messages: msgs, max_tokens: 2 }), { cls: 'AuthenticationError', status: 401 });
  });
});
