// (a) The schema of every endpoint and every error status of `kipp serve`.
//
// Servers: the tiny instruct model with two aliases and --ctx 512 (so a too-long prompt is cheap),
// and the base model (no chat template -> chat is a 400). Prompt token counts come from
// `kipp tokenize` / `kipp render`, not from the server. A large logit_bias on "Hello" (id 9707)
// makes the generated text known: greedy output is "Hello" repeated.
//
// Usage: node tests/server/server_schema.mjs   (env KIPP, KIPP_MODELS; see lib.mjs)
import {
  main, startServer, get, post, request, streamRequest, checkError, checkCompletionBody, checkStream,
  collectStream, metrics, metric, parseMetrics, countTokens, renderChat, words, fmt, trunc, isInt,
  TINY_NAME, BASE_MODEL, BASE_NAME, TOK_HELLO, TOK_THINK,
} from './lib.mjs';

const CTX = 512;
const ALIAS = 'tiny-alias';
const HELLO_BIAS = { [TOK_HELLO]: 100 };

await main('server_schema', async (t) => {
  const srv = await startServer({ args: ['--alias', ALIAS, '--alias', 'other-name', '--ctx', String(CTX)] });
  const C = (json) => post(srv, '/v1/completions', { model: TINY_NAME, temperature: 0, ...json });
  const CH = (json) => post(srv, '/v1/chat/completions', { model: TINY_NAME, temperature: 0, ...json });
  const msgs = [{ role: 'user', content: 'Hello' }];

  await t.section('GET /health', async () => {
    const r = await get(srv, '/health');
    t.ok(r.status === 200, `GET /health: expected 200, got ${r.status} ${trunc(r.text)}`);
  });

  await t.section('GET /v1/models', async () => {
    const r = await get(srv, '/v1/models');
    t.ok(r.status === 200, `GET /v1/models: expected 200, got ${r.status} ${trunc(r.text)}`);
    t.ok(/^application\/json/.test(r.headers['content-type'] || ''), `GET /v1/models: content-type should be application/json, got ${fmt(r.headers['content-type'])}`);
    const b = r.json;
    t.eq(b && b.object, 'list', 'GET /v1/models: object');
    if (t.ok(b && Array.isArray(b.data) && b.data.length >= 1, `GET /v1/models: data should be a non-empty array: ${trunc(r.text)}`)) {
      for (const m of b.data) {
        t.eq(m.object, 'model', `GET /v1/models: data[].object for ${fmt(m.id)}`);
        t.ok(typeof m.id === 'string' && m.id.length > 0, `GET /v1/models: data[].id is not a string: ${fmt(m)}`);
        t.ok(isInt(m.created), `GET /v1/models: data[].created is not an integer: ${fmt(m)}`);
        t.ok(typeof m.owned_by === 'string', `GET /v1/models: data[].owned_by is not a string: ${fmt(m)}`);
      }
      t.ok(b.data.some((m) => m.id === ALIAS), `GET /v1/models: the first alias ${ALIAS} should be listed, got ids ${fmt(b.data.map((m) => m.id))}`);
    }
  });

  let greedyText;
  await t.section('POST /v1/completions: shape, usage against kipp tokenize, alias echo', async () => {
    const prompt = 'The quick brown fox';
    const r = await C({ prompt, max_tokens: 4 });
    t.ok(r.status === 200, `POST /v1/completions ${fmt({ prompt, max_tokens: 4 })}: expected 200, got ${r.status} ${trunc(r.text)}`);
    t.ok(/^application\/json/.test(r.headers['content-type'] || ''), `POST /v1/completions: content-type should be application/json, got ${fmt(r.headers['content-type'])}`);
    checkCompletionBody(t, r.json, 'POST /v1/completions', { model: ALIAS, maxTokens: 4 });
    if (r.json && r.json.usage) t.eq(r.json.usage.prompt_tokens, countTokens(prompt), `POST /v1/completions: usage.prompt_tokens vs kipp tokenize of ${fmt(prompt)}`);
    greedyText = r.json && r.json.choices && r.json.choices[0].text;
    for (const name of [ALIAS, 'other-name']) {
      const r2 = await post(srv, '/v1/completions', { model: name, prompt, max_tokens: 4, temperature: 0 });
      t.ok(r2.status === 200, `POST /v1/completions model=${name}: expected 200, got ${r2.status} ${trunc(r2.text)}`);
      if (r2.json && r2.json.choices) {
        t.eq(r2.json.model, ALIAS, `POST /v1/completions model=${name}: echoed model`);
        t.eq(r2.json.choices[0].text, greedyText, `POST /v1/completions model=${name}: greedy text equals the one for model=${TINY_NAME}`);
      }
    }
  });

  await t.section('logit_bias, max_tokens cap -> "length", stop string and list -> "stop"', async () => {
    let r = await C({ prompt: 'Hi', max_tokens: 3, logit_bias: HELLO_BIAS });
    checkCompletionBody(t, r.json, 'completions logit_bias', { model: ALIAS, maxTokens: 3 });
    const c = r.json && r.json.choices && r.json.choices[0];
    t.eq(c && c.text, 'HelloHelloHello', `completions logit_bias {9707:100} max_tokens 3: text`);
    t.eq(c && c.finish_reason, 'length', 'completions hitting max_tokens: finish_reason');
    t.eq(r.json && r.json.usage && r.json.usage.completion_tokens, 3, 'completions hitting max_tokens: usage.completion_tokens');
    r = await C({ prompt: 'Hi', max_tokens: 8, logit_bias: HELLO_BIAS, stop: 'oHe' });
    t.eq(r.json && r.json.choices && [r.json.choices[0].text, r.json.choices[0].finish_reason], ['Hell', 'stop'], `completions stop "oHe" on HelloHello...: [text, finish_reason]`);
    r = await C({ prompt: 'Hi', max_tokens: 8, logit_bias: HELLO_BIAS, stop: ['zzz', 'lloH'] });
    t.eq(r.json && r.json.choices && [r.json.choices[0].text, r.json.choices[0].finish_reason], ['He', 'stop'], `completions stop ["zzz","lloH"]: [text, finish_reason]`);
    // OpenAI's legacy completions API has no max_completion_tokens: honoured as the alias, or refused naming it.
    r = await C({ prompt: 'Hi', max_tokens: 2, max_completion_tokens: 4, logit_bias: HELLO_BIAS });
    if (r.status === 200) t.eq(r.json.choices[0].text, 'HelloHelloHelloHello', 'completions max_tokens 2 + max_completion_tokens 4 (the newer wins): text');
    else checkError(t, r, 400, 'completions max_tokens 2 + max_completion_tokens 4', { param: 'max_completion_tokens' });
    r = await C({ prompt: 'Hi', max_completion_tokens: 2, logit_bias: HELLO_BIAS });
    if (r.status === 200) t.eq([r.json.choices[0].text, r.json.choices[0].finish_reason], ['HelloHello', 'length'], 'completions max_completion_tokens 2 alone');
    else checkError(t, r, 400, 'completions max_completion_tokens 2 alone', { param: 'max_completion_tokens' });
    r = await CH({ messages: msgs, max_tokens: 5, max_completion_tokens: 2, logit_bias: HELLO_BIAS });
    checkCompletionBody(t, r.json, 'chat max_tokens 5 + max_completion_tokens 2', { model: ALIAS, chat: true, maxTokens: 2 });
    t.eq(r.json && r.json.choices && [r.json.choices[0].message.content, r.json.choices[0].finish_reason], ['HelloHello', 'length'], 'chat max_tokens 5 + max_completion_tokens 2 (the newer wins): [content, finish_reason]');
    r = await CH({ messages: msgs, max_tokens: 3, logit_bias: HELLO_BIAS });
    t.eq(r.json && r.json.usage && r.json.usage.completion_tokens, 3, 'chat max_tokens 3 alone: completion_tokens');
  });

  await t.section('n', async () => {
    const r = await C({ prompt: 'Hi', max_tokens: 3, n: 2, logit_bias: HELLO_BIAS });
    checkCompletionBody(t, r.json, 'completions n=2', { n: 2, model: ALIAS, maxTokens: 3 });
    t.eq(r.json && r.json.usage && r.json.usage.completion_tokens, 6, 'completions n=2 x 3 tokens: usage.completion_tokens counts every choice');
    const rc = await CH({ messages: msgs, max_tokens: 2, n: 3 });
    checkCompletionBody(t, rc.json, 'chat n=3', { n: 3, model: ALIAS, chat: true, maxTokens: 2 });
    for (const n of [0, 9, -1]) checkError(t, await C({ prompt: 'Hi', max_tokens: 2, n }), 400, `completions n=${n}`, { param: 'n' });
    checkError(t, await CH({ messages: msgs, max_tokens: 2, n: 9 }), 400, 'chat n=9', { param: 'n' });
  });

  await t.section('legacy logprobs (completions)', async () => {
    const r = await C({ prompt: 'Hi', max_tokens: 3, logprobs: 2, logit_bias: HELLO_BIAS });
    checkCompletionBody(t, r.json, 'completions logprobs=2', { model: ALIAS, logprobs: true, maxTokens: 3 });
    const lp = r.json && r.json.choices && r.json.choices[0].logprobs;
    if (t.ok(lp && typeof lp === 'object', `completions logprobs=2: choices[0].logprobs should be an object, got ${fmt(lp)}`)) {
      t.eq(lp.tokens, ['Hello', 'Hello', 'Hello'], 'completions logprobs=2: logprobs.tokens');
      t.ok(Array.isArray(lp.token_logprobs) && lp.token_logprobs.length === 3 && lp.token_logprobs.every((x) => typeof x === 'number' && x <= 0),
        `completions logprobs=2: token_logprobs should be 3 numbers <= 0, got ${fmt(lp.token_logprobs)}`);
      t.ok(Array.isArray(lp.top_logprobs) && lp.top_logprobs.length === 3 && lp.top_logprobs.every((o) => o && typeof o === 'object' && !Array.isArray(o) &&
        Object.keys(o).length >= 1 && Object.keys(o).length <= 3 && Object.values(o).every((x) => typeof x === 'number' && x <= 0)),
        `completions logprobs=2: top_logprobs should be 3 objects token -> logprob with up to 2 (+ the sampled) entries, got ${fmt(lp.top_logprobs)}`);
      // Offsets count from the completion's start, or (as OpenAI does) from the prompt's: "Hi" is 2 long.
      const off = lp.text_offset;
      t.ok(Array.isArray(off) && off.length === 3 && [0, 2].includes(off[0]) && off[1] - off[0] === 5 && off[2] - off[1] === 5,
        `completions logprobs=2: text_offset of HelloHelloHello should be [0,5,10] (or [2,7,12] counting the prompt "Hi"), got ${fmt(off)}`);
    }
    for (const bad of [6, -1]) checkError(t, await C({ prompt: 'Hi', max_tokens: 2, logprobs: bad }), 400, `completions logprobs=${bad}`, { param: 'logprobs' });
  });

  await t.section('chat: shape, usage against kipp render + tokenize, enable_thinking, logprobs, reasoning_content', async () => {
    const messages = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Name a colour.' }, { role: 'assistant', content: 'Blue.' }, { role: 'user', content: 'Another one.' }];
    let r = await CH({ messages, max_tokens: 4, user: 'someone' });
    t.ok(r.status === 200, `chat: expected 200, got ${r.status} ${trunc(r.text)}`);
    checkCompletionBody(t, r.json, 'chat', { model: ALIAS, chat: true, maxTokens: 4 });
    const thinkTokens = countTokens(renderChat(messages, { think: true }));
    const noThinkTokens = countTokens(renderChat(messages, { think: false }));
    t.eq(r.json && r.json.usage && r.json.usage.prompt_tokens, thinkTokens, 'chat: usage.prompt_tokens vs kipp render | kipp tokenize (thinking on, the default)');
    r = await CH({ messages, max_tokens: 4, chat_template_kwargs: { enable_thinking: false } });
    t.eq(r.json && r.json.usage && r.json.usage.prompt_tokens, noThinkTokens, 'chat enable_thinking=false: usage.prompt_tokens vs kipp render --no-think | kipp tokenize');

    r = await CH({ messages: msgs, max_tokens: 3, logprobs: true, top_logprobs: 2 });
    checkCompletionBody(t, r.json, 'chat logprobs', { model: ALIAS, chat: true, logprobs: true, maxTokens: 3 });
    const lp = r.json && r.json.choices && r.json.choices[0].logprobs;
    if (t.ok(lp && Array.isArray(lp.content), `chat logprobs=true: choices[0].logprobs.content should be an array, got ${fmt(lp)}`)) {
      t.eq(lp.content.length, r.json.usage.completion_tokens, 'chat logprobs: one logprobs.content entry per generated token');
      for (const e of lp.content) {
        const okEntry = (x) => x && typeof x.token === 'string' && typeof x.logprob === 'number' && x.logprob <= 0 && (x.bytes === null || (Array.isArray(x.bytes) && x.bytes.every((b) => isInt(b) && b >= 0 && b < 256)));
        t.ok(okEntry(e), `chat logprobs: entry should be {token, logprob <= 0, bytes}, got ${fmt(e)}`);
        t.ok(Array.isArray(e.top_logprobs) && e.top_logprobs.length === 2 && e.top_logprobs.every(okEntry), `chat logprobs: top_logprobs should be 2 {token, logprob, bytes}, got ${fmt(e.top_logprobs)}`);
        const decoded = Array.isArray(e.bytes) ? Buffer.from(e.bytes).toString('utf8') : null;
        if (decoded !== null && !decoded.includes('\ufffd')) t.eq(decoded, e.token, 'chat logprobs: bytes decode to the token');
      }
    }
    checkError(t, await CH({ messages: msgs, max_tokens: 2, logprobs: true, top_logprobs: 21 }), 400, 'chat top_logprobs=21', { param: 'top_logprobs' });

    // <think> forced: the reasoning goes to reasoning_content, never into content.
    r = await CH({ messages: msgs, max_tokens: 3, logit_bias: { [TOK_THINK]: 100 } });
    const m = r.json && r.json.choices && r.json.choices[0].message;
    if (t.ok(m, `chat with <think> forced: no message: ${trunc(r.text)}`)) {
      t.ok(!String(m.content ?? '').includes('<think>'), `chat with <think> forced: message.content should not carry <think>, got ${fmt(m.content)}`);
      t.ok(typeof m.reasoning_content === 'string', `chat with <think> forced: message.reasoning_content should be a string, got ${fmt(m.reasoning_content)}`);
    }
    const st = await streamRequest(srv, '/v1/chat/completions', { model: TINY_NAME, messages: msgs, max_tokens: 3, temperature: 0, stream: true, logit_bias: { [TOK_THINK]: 100 } });
    checkStream(t, st, 'chat stream with <think> forced', { chat: true, model: ALIAS });
    const col = collectStream(st, 'chat');
    t.ok(!(col.texts.get(0) || '').includes('<think>'), `chat stream with <think> forced: delta.content should not carry <think>, got ${fmt(col.texts.get(0))}`);
    t.ok(col.reasoning.has(0), 'chat stream with <think> forced: no delta.reasoning_content at all');
  });

  await t.section('fields not honoured, or that cannot hold -> 400 naming the field', async () => {
    const tool = { type: 'function', function: { name: 'get_weather', description: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } };
    const cases = [
      // "auto"/"none" without tools change nothing; these force a call with nothing to call.
      ['tool_choice', { tool_choice: 'required' }],
      ['tool_choice', { tool_choice: { type: 'function', function: { name: 'get_weather' } } }],
      ['response_format.type', { response_format: { type: 'yaml' } }],
      ['functions', { functions: [tool.function] }],
      ['function_call', { function_call: { name: 'get_weather' } }],
      ['logits_processors', { logits_processors: ['x'] }],
    ];
    for (const [param, extra] of cases) {
      checkError(t, await CH({ messages: msgs, max_tokens: 2, ...extra }), 400, `chat with ${fmt(extra)}`, { param });
    }
    // Completions fields that are either honoured (then visibly) or refused naming the field.
    let r = await C({ prompt: 'Hi there', max_tokens: 2, echo: true });
    if (r.status === 200) t.ok(r.json.choices[0].text.startsWith('Hi there'), `completions echo=true answered 200 but the text does not start with the prompt: ${fmt(r.json.choices[0].text)}`);
    else checkError(t, r, 400, 'completions echo=true', { param: 'echo' });
    for (const [param, extra] of [['suffix', { suffix: ' the end' }], ['best_of', { best_of: 3 }]]) {
      r = await C({ prompt: 'Hi there', max_tokens: 2, ...extra });
      if (r.status === 200) t.info(`completions ${fmt(extra)} answered 200 (honoured?)`);
      else checkError(t, r, 400, `completions ${fmt(extra)}`, { param });
    }
  });

  await t.section('fields that do not change the output are accepted', async () => {
    const r = await CH({ messages: msgs, max_tokens: 2, user: 'u-1', metadata: { k: 'v' }, store: false, service_tier: 'auto', seed: 7 });
    t.ok(r.status === 200, `chat with user/metadata/store/service_tier/seed: expected 200, got ${r.status} ${trunc(r.text)}`);
    const r2 = await C({ prompt: 'Hi', max_tokens: 2, user: 'u-1' });
    t.ok(r2.status === 200, `completions with user: expected 200, got ${r2.status} ${trunc(r2.text)}`);
  });

  await t.section('prompt forms: token-id array and string list supported or clearly refused', async () => {
    let r = await C({ prompt: [9707, 1879], max_tokens: 2 });
    if (r.status === 200) {
      checkCompletionBody(t, r.json, 'completions prompt=[9707,1879]', { model: ALIAS, maxTokens: 2 });
      t.eq(r.json.usage && r.json.usage.prompt_tokens, 2, 'completions prompt=[9707,1879]: usage.prompt_tokens');
    } else checkError(t, r, 400, 'completions prompt=[9707,1879]', { param: 'prompt' });
    r = await C({ prompt: ['Hello', 'Hello world'], max_tokens: 2 });
    if (r.status === 200) {
      checkCompletionBody(t, r.json, 'completions prompt=["Hello","Hello world"]', { n: 2, model: ALIAS, maxTokens: 2 });
    } else checkError(t, r, 400, 'completions prompt=["Hello","Hello world"]', { param: 'prompt' });
    checkError(t, await C({ max_tokens: 2 }), 400, 'completions without prompt', { param: 'prompt' });
    checkError(t, await CH({ max_tokens: 2 }), 400, 'chat without messages', { param: 'messages' });
    checkError(t, await CH({ messages: [], max_tokens: 2 }), 400, 'chat with messages=[]', { param: 'messages' });
  });

  await t.section('streaming completions: chunk shape, text equals non-streaming, include_usage, n=2', async () => {
    const prompt = 'The quick brown fox';
    let st = await streamRequest(srv, '/v1/completions', { model: TINY_NAME, prompt, max_tokens: 4, temperature: 0, stream: true });
    checkStream(t, st, 'completions stream', { model: ALIAS });
    t.eq(collectStream(st, 'text').texts.get(0), greedyText, 'completions stream: concatenated text vs the non-streaming greedy text');
    st = await streamRequest(srv, '/v1/completions', { model: TINY_NAME, prompt, max_tokens: 4, temperature: 0, stream: true, stream_options: { include_usage: true } });
    checkStream(t, st, 'completions stream include_usage', { includeUsage: true, model: ALIAS });
    const u = st.chunks.length && st.chunks[st.chunks.length - 1].usage;
    if (u) {
      t.eq(u.prompt_tokens, countTokens(prompt), 'completions stream include_usage: usage.prompt_tokens');
      t.ok(u.completion_tokens >= 1 && u.completion_tokens <= 4, `completions stream include_usage: completion_tokens ${u.completion_tokens} not in 1..4`);
    }
    st = await streamRequest(srv, '/v1/completions', { model: TINY_NAME, prompt: 'Hi', max_tokens: 3, temperature: 0, stream: true, n: 2, logit_bias: HELLO_BIAS });
    checkStream(t, st, 'completions stream n=2', { n: 2, model: ALIAS });
    const col = collectStream(st, 'text');
    t.eq([col.texts.get(0), col.texts.get(1)], ['HelloHelloHello', 'HelloHelloHello'], 'completions stream n=2: text per choice index');
    t.eq([col.finish.get(0), col.finish.get(1)], [['length'], ['length']], 'completions stream n=2: finish_reason per choice index');
    st = await streamRequest(srv, '/v1/completions', { model: TINY_NAME, prompt: 'Hi', max_tokens: 8, temperature: 0, stream: true, logit_bias: HELLO_BIAS, stop: 'oHe' });
    t.eq([collectStream(st, 'text').texts.get(0), collectStream(st, 'text').finish.get(0)], ['Hell', ['stop']], 'completions stream stop "oHe": [text, finish_reason]');
    st = await streamRequest(srv, '/v1/completions', { model: TINY_NAME, prompt: 'Hi', max_tokens: 3, temperature: 0, stream: true, logprobs: 1, logit_bias: HELLO_BIAS });
    checkStream(t, st, 'completions stream logprobs=1', { model: ALIAS });
    const toks = st.chunks.flatMap((c) => (c.choices || []).flatMap((ch) => (ch.logprobs && ch.logprobs.tokens) || []));
    t.eq(toks, ['Hello', 'Hello', 'Hello'], 'completions stream logprobs=1: logprobs.tokens over the chunks');
  });

  await t.section('streaming chat: chunk shape, content equals non-streaming, include_usage', async () => {
    const r = await CH({ messages: msgs, max_tokens: 5 });
    const want = r.json && r.json.choices && r.json.choices[0].message.content;
    let st = await streamRequest(srv, '/v1/chat/completions', { model: TINY_NAME, messages: msgs, max_tokens: 5, temperature: 0, stream: true });
    checkStream(t, st, 'chat stream', { chat: true, model: ALIAS });
    t.eq(collectStream(st, 'chat').texts.get(0), want, 'chat stream: concatenated delta.content vs non-streaming message.content');
    st = await streamRequest(srv, '/v1/chat/completions', { model: TINY_NAME, messages: msgs, max_tokens: 5, temperature: 0, stream: true, stream_options: { include_usage: true } });
    checkStream(t, st, 'chat stream include_usage', { chat: true, includeUsage: true, model: ALIAS });
    const u = st.chunks.length && st.chunks[st.chunks.length - 1].usage;
    if (u && r.json && r.json.usage) t.eq([u.prompt_tokens, u.completion_tokens], [r.json.usage.prompt_tokens, r.json.usage.completion_tokens], 'chat stream include_usage: usage vs the non-streaming request');
    st = await streamRequest(srv, '/v1/chat/completions', { model: TINY_NAME, messages: msgs, max_tokens: 3, temperature: 0, stream: true, n: 2, logprobs: true, top_logprobs: 1 });
    checkStream(t, st, 'chat stream n=2 logprobs', { chat: true, n: 2, model: ALIAS });
  });

  await t.section('404 unknown model and route, 405/404 wrong method', async () => {
    checkError(t, await post(srv, '/v1/completions', { model: 'no-such-model', prompt: 'Hi', max_tokens: 1 }), 404, 'completions model=no-such-model');
    checkError(t, await post(srv, '/v1/chat/completions', { model: 'no-such-model', messages: msgs, max_tokens: 1 }), 404, 'chat model=no-such-model');
    const st = await streamRequest(srv, '/v1/completions', { model: 'no-such-model', prompt: 'Hi', max_tokens: 1, stream: true });
    checkError(t, { status: st.status, text: st.text, json: st.json }, 404, 'streaming completions model=no-such-model (before any chunk)');
    for (const [m, p] of [['GET', '/v1/nope'], ['POST', '/v1/embeddings'], ['GET', '/assets/nope.js'], ['GET', '/v1/completions/extra'], ['POST', '/v2/completions']]) {
      checkError(t, await request(srv, m, p, m === 'POST' ? { json: { model: TINY_NAME, input: 'x' } } : {}), 404, `${m} ${p}`);
    }
    for (const [m, p] of [['GET', '/v1/completions'], ['GET', '/v1/chat/completions'], ['POST', '/v1/models'], ['DELETE', '/v1/models'], ['PUT', '/v1/completions']]) {
      const r = await request(srv, m, p, m === 'GET' || m === 'DELETE' ? {} : { json: {} });
      t.ok([404, 405].includes(r.status), `${m} ${p}: expected 405 (or 404), got ${r.status} ${trunc(r.text)}`);
      if (r.status === 405) t.ok(typeof r.headers.allow === 'string', `${m} ${p}: 405 without an Allow header`);
    }
  });

  await t.section('413 body too large (default --max-body-kib 1024)', async () => {
    const big = 'a'.repeat(1100 * 1024);
    let r;
    try {
      r = await post(srv, '/v1/completions', { model: TINY_NAME, prompt: big, max_tokens: 1 });
    } catch (e) {
      t.fail(`POST /v1/completions with a 1.1 MiB body: no response (${e.message}); expected 413`);
    }
    if (r) checkError(t, r, 413, 'POST /v1/completions with a 1.1 MiB body');
    const ok = await post(srv, '/v1/completions', { model: TINY_NAME, prompt: 'a'.repeat(200), max_tokens: 1 });
    t.ok(ok.status === 200, `a small request after the 413: expected 200, got ${ok.status}`);
  });

  await t.section(`400 prompt over the context (--ctx ${CTX}) with the token counts`, async () => {
    const long = words(900, 3);
    const n = countTokens(long);
    t.ok(n > CTX, `test setup: the long prompt has only ${n} tokens`);
    let r = await C({ prompt: long, max_tokens: 4 });
    if (checkError(t, r, 400, `completions with a ${n}-token prompt, --ctx ${CTX}`)) {
      const msg = r.json.error.message;
      t.ok(msg.includes(String(n)) && msg.includes(String(CTX)), `completions too long: error.message should state the prompt tokens ${n} and the context ${CTX}, got ${fmt(msg)}`);
    }
    const cm = [{ role: 'user', content: long }];
    const cn = countTokens(renderChat(cm));
    r = await CH({ messages: cm, max_tokens: 4 });
    if (checkError(t, r, 400, `chat with a ${cn}-token prompt, --ctx ${CTX}`)) {
      const msg = r.json.error.message;
      t.ok(msg.includes(String(cn)) && msg.includes(String(CTX)), `chat too long: error.message should state the prompt tokens ${cn} and the context ${CTX}, got ${fmt(msg)}`);
    }
    const st = await streamRequest(srv, '/v1/completions', { model: TINY_NAME, prompt: long, max_tokens: 4, stream: true });
    checkError(t, { status: st.status, text: st.text, json: st.json }, 400, 'streaming completions with a too-long prompt (before any chunk)');
    // A prompt that fits but leaves less room than max_tokens: refused, or cut at the context.
    const near = words(420, 5);
    const nn = countTokens(near);
    r = await C({ prompt: near, max_tokens: 200 });
    if (r.status === 200) {
      const u = r.json.usage;
      t.ok(u.prompt_tokens + u.completion_tokens <= CTX, `completions ${nn}-token prompt + max_tokens 200 > ctx ${CTX}: answered 200 with ${u.prompt_tokens}+${u.completion_tokens} tokens, past the context`);
      if (u.prompt_tokens + u.completion_tokens >= CTX) t.eq(r.json.choices[0].finish_reason, 'length', 'completions cut at the context: finish_reason');
    } else checkError(t, r, 400, `completions ${nn}-token prompt + max_tokens 200 > ctx ${CTX}`);
  });

  await t.section('GET /metrics: names, types, counters move with the requests', async () => {
    const r = await get(srv, '/metrics');
    t.ok(r.status === 200, `GET /metrics: expected 200, got ${r.status}`);
    t.ok(/^text\/plain/.test(r.headers['content-type'] || ''), `GET /metrics: content-type should be text/plain (Prometheus text), got ${fmt(r.headers['content-type'])}`);
    const names = ['kipp_requests_total', 'kipp_prompt_tokens_total', 'kipp_generated_tokens_total', 'kipp_queue_depth', 'kipp_batch_occupancy',
      'kipp_batch_capacity', 'kipp_kv_pool_blocks_used', 'kipp_kv_pool_blocks_total', 'kipp_prefix_reuse_hits_total', 'kipp_prefix_cached_tokens_total'];
    const types = { kipp_requests_total: 'counter', kipp_prompt_tokens_total: 'counter', kipp_generated_tokens_total: 'counter', kipp_queue_depth: 'gauge', kipp_batch_occupancy: 'gauge',
      kipp_batch_capacity: 'gauge', kipp_kv_pool_blocks_used: 'gauge', kipp_kv_pool_blocks_total: 'gauge', kipp_prefix_reuse_hits_total: 'counter', kipp_prefix_cached_tokens_total: 'counter',
      kipp_time_to_first_token_seconds: 'histogram', kipp_request_duration_seconds: 'histogram' };
    for (const [name, type] of Object.entries(types)) {
      t.ok(new RegExp(`^# TYPE ${name} ${type}$`, 'm').test(r.text), `GET /metrics: no "# TYPE ${name} ${type}" line`);
    }
    const s0 = parseMetrics(r.text);
    t.ok(s0.every((x) => !x.bad), `GET /metrics: lines that are not Prometheus samples: ${fmt(s0.filter((x) => x.bad).map((x) => x.bad))}`);
    for (const n of names) t.ok(metric(s0, n) !== undefined, `GET /metrics: no sample of ${n}`);
    t.eq(metric(s0, 'kipp_batch_capacity'), 16, 'kipp_batch_capacity (default --max-batch 16, docs/SERVER.md)');
    t.eq(metric(s0, 'kipp_batch_occupancy'), 0, 'kipp_batch_occupancy when idle');
    t.eq(metric(s0, 'kipp_queue_depth'), 0, 'kipp_queue_depth when idle');
    const total = metric(s0, 'kipp_kv_pool_blocks_total');
    const used = metric(s0, 'kipp_kv_pool_blocks_used');
    t.ok(total > 0 && used >= 0 && used <= total, `kv pool gauges: used ${used} should be within [0, total ${total}], total > 0`);
    for (const h of ['kipp_time_to_first_token_seconds', 'kipp_request_duration_seconds']) {
      const buckets = s0.filter((x) => x.name === `${h}_bucket`);
      t.ok(buckets.length >= 2, `${h}: no _bucket samples`);
      const les = buckets.map((b) => (b.labels.le === '+Inf' ? Infinity : Number(b.labels.le)));
      t.ok(les.every((v, i) => i === 0 || v > les[i - 1]) && les[les.length - 1] === Infinity, `${h}: le should increase to +Inf, got ${fmt(buckets.map((b) => b.labels.le))}`);
      t.ok(buckets.every((b, i) => i === 0 || b.value >= buckets[i - 1].value), `${h}: bucket counts should be cumulative`);
      t.eq(buckets.length ? buckets[buckets.length - 1].value : undefined, metric(s0, `${h}_count`), `${h}: the +Inf bucket vs _count`);
      t.ok(metric(s0, `${h}_sum`) !== undefined, `${h}: no _sum`);
    }
    // Three completions and one 404: the counters move by exactly what the responses report.
    const isCompl = (e) => typeof e === 'string' && /completions/.test(e) && !/chat/.test(e);
    const before = await metrics(srv);
    let prompt = 0;
    let gen = 0;
    let cached = 0;
    for (const p of ['alpha beta gamma', 'delta epsilon', 'zeta eta theta iota']) {
      const x = await C({ prompt: p, max_tokens: 3 });
      prompt += x.json.usage.prompt_tokens;
      gen += x.json.usage.completion_tokens;
      cached += x.json.usage.prompt_tokens_details ? x.json.usage.prompt_tokens_details.cached_tokens : 0;
    }
    await post(srv, '/v1/completions', { model: 'no-such-model', prompt: 'Hi', max_tokens: 1 });
    const after = await metrics(srv);
    const d = (name, where) => (metric(after, name, where) || 0) - (metric(before, name, where) || 0);
    t.eq(d('kipp_requests_total', { endpoint: isCompl, status: '200' }), 3, 'kipp_requests_total{endpoint=~completions,status="200"} delta after 3 completions');
    t.eq(d('kipp_requests_total', { endpoint: isCompl, status: '404' }), 1, 'kipp_requests_total{endpoint=~completions,status="404"} delta after 1 unknown model');
    t.eq(d('kipp_generated_tokens_total'), gen, 'kipp_generated_tokens_total delta vs the sum of usage.completion_tokens');
    const dp = d('kipp_prompt_tokens_total');
    t.ok(dp >= prompt - cached && dp <= prompt, `kipp_prompt_tokens_total delta ${dp} should be the sum of usage.prompt_tokens ${prompt} (less cached ${cached} at most)`);
    t.eq(d('kipp_time_to_first_token_seconds_count'), 3, 'kipp_time_to_first_token_seconds_count delta after 3 completions');
    t.ok(d('kipp_request_duration_seconds_count') >= 3, `kipp_request_duration_seconds_count delta should be >= 3, got ${d('kipp_request_duration_seconds_count')}`);
  });

  await srv.stop(t);

  await t.section('base model (no chat template): chat 400, completions 200, default model name', async () => {
    const base = await startServer({ model: BASE_MODEL });
    const r = await post(base, '/v1/chat/completions', { model: BASE_NAME, messages: msgs, max_tokens: 2 });
    checkError(t, r, 400, `chat on the base model ${BASE_NAME}`);
    const c = await post(base, '/v1/completions', { model: BASE_NAME, prompt: 'Hi', max_tokens: 2 });
    t.ok(c.status === 200, `completions on the base model: expected 200, got ${c.status} ${trunc(c.text)}`);
    checkCompletionBody(t, c.json, 'completions on the base model', { model: BASE_NAME, maxTokens: 2 });
    // A long prompt: ":" comment pings keep the stream alive while it is prefilled.
    const longPrompt = words(2200, 11);
    const st = await streamRequest(base, '/v1/completions', { model: BASE_NAME, prompt: longPrompt, max_tokens: 2, stream: true }, { timeoutMs: 120000 });
    checkStream(t, st, 'streaming completion of a ~2200-token prompt', { model: BASE_NAME });
    const pings = st.commentsBeforeFirstChunk || 0;
    t.info(`~2200-token prompt: first chunk after ${st.firstChunkMs} ms, ${pings} comment lines before it`);
    if (st.firstChunkMs > 3000) t.ok(pings >= 1, `streaming a long prompt: no ":" comment ping in the ${st.firstChunkMs} ms before the first chunk`);
    else t.info('the prefill was too quick (< 3 s) to require a ping: the ping check did not run');
    const m = await get(base, '/v1/models');
    t.ok(m.json && Array.isArray(m.json.data) && m.json.data.some((x) => x.id === BASE_NAME), `GET /v1/models without --alias should list ${BASE_NAME}, got ${trunc(m.text)}`);
    await base.stop(t);
  });
});
