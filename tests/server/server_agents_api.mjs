// What agent frameworks and the newer OpenAI clients send and call: tools, tool_choice,
// reasoning_effort, response_format, the fields accepted and ignored, the 400s for fields still
// refused, POST /tokenize and /detokenize, GET /v1/models/{id}, the CORS preflight with the
// official clients' x-stainless-* headers, --reasoning-field, and POST /v1/responses driven by
// the official OpenAI Node client (non-streaming and streaming). Prompt token counts come from
// `kipp render` / `kipp tokenize`, not from the server.
//
// The random tiny model never calls a tool by itself; a forced call (tool_choice required or
// named) yields a function_call only with constrained decoding, so those checks look at the shape
// of whatever call comes back and say when none did.
//
// Usage: node tests/server/server_agents_api.mjs   (env KIPP, KIPP_MODELS; fetches the openai
//        client via fetch_openai.sh like server_openai.mjs; OPENAI_NODE_MODULES overrides it)
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import {
  main, startServer, get, post, request, streamRequest, checkError, countTokens, renderChat, tokenIds, fmt, trunc,
  isInt, TINY_NAME, TOK_HELLO, TOK_THINK,
} from './lib.mjs';

const here = path.dirname(new URL(import.meta.url).pathname);
const modules = process.env.OPENAI_NODE_MODULES ||
  execFileSync(path.join(here, 'fetch_openai.sh'), { encoding: 'utf8' }).trim().split('\n').pop();
const { default: OpenAI } = await import(pathToFileURL(path.join(modules, 'openai', 'index.mjs')).href);

const WEATHER = {
  type: 'function',
  function: {
    name: 'get_weather', description: 'Current weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
  },
};
const TIME = { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {} } } };
const msgs = [{ role: 'user', content: 'Hello' }];

await main('server_agents_api', async (t) => {
  const srv = await startServer();
  const CH = (json) => post(srv, '/v1/chat/completions', { model: TINY_NAME, temperature: 0, ...json });

  await t.section('POST /tokenize and /detokenize', async () => {
    const text = 'Hello world, <think> ünïcode';
    const oracle = tokenIds(text);
    let r = await post(srv, '/tokenize', { content: text });
    t.eq(r.status, 200, 'tokenize: status');
    t.eq(r.json && r.json.tokens, oracle, 'tokenize: ids (kipp tokenize parses special tokens too)');
    r = await post(srv, '/tokenize', { content: text, with_pieces: true, add_special: true });
    const pieces = r.json && r.json.tokens;
    t.ok(Array.isArray(pieces) && pieces.every((p) => isInt(p.id) && (typeof p.piece === 'string' || Array.isArray(p.piece))), `tokenize with_pieces: ${fmt(pieces)}`);
    if (Array.isArray(pieces)) {
      t.eq(pieces.map((p) => p.id), oracle, 'tokenize with_pieces: ids');
      const bytes = Buffer.concat(pieces.map((p) => (Array.isArray(p.piece) ? Buffer.from(p.piece) : Buffer.from(p.piece, 'utf8'))));
      t.eq(bytes.toString('utf8'), text, 'tokenize with_pieces: the pieces concatenate to the text');
      t.ok(pieces.some((p) => p.id === TOK_THINK && p.piece === '<think>'), 'tokenize with_pieces: <think> is one special token');
    }
    r = await post(srv, '/tokenize', { content: '<think>', parse_special: false });
    t.ok(r.json && Array.isArray(r.json.tokens) && !r.json.tokens.includes(TOK_THINK) && r.json.tokens.length > 1, `tokenize parse_special=false: ${fmt(r.json)}`);
    r = await post(srv, '/detokenize', { tokens: oracle });
    t.eq(r.json && r.json.content, text, 'detokenize: round trip');
    checkError(t, await post(srv, '/tokenize', { content: 5 }), 400, 'tokenize content=5', { param: 'content' });
    checkError(t, await post(srv, '/tokenize', { text: 'x' }), 400, 'tokenize with an unknown field', { param: 'text' });
    checkError(t, await post(srv, '/detokenize', { tokens: [TOK_HELLO, 999999] }), 400, 'detokenize with an id outside the vocabulary', { param: 'tokens' });
    checkError(t, await post(srv, '/detokenize', { tokens: 'x' }), 400, 'detokenize tokens="x"', { param: 'tokens' });
  });

  await t.section('GET /v1/models/{id}', async () => {
    const list = await get(srv, '/v1/models');
    const r = await get(srv, `/v1/models/${TINY_NAME}`);
    t.eq(r.status, 200, 'GET /v1/models/{id}: status');
    t.eq(r.json, list.json && list.json.data.find((m) => m.id === TINY_NAME), 'GET /v1/models/{id}: the entry of the list');
    checkError(t, await get(srv, '/v1/models/no-such-model'), 404, 'GET /v1/models/no-such-model', { param: 'model' });
    const client = new OpenAI({ apiKey: 'x', baseURL: `${srv.base}/v1`, maxRetries: 0 });
    const m = await client.models.retrieve(TINY_NAME);
    t.eq(m.id, TINY_NAME, 'client.models.retrieve: id');
  });

  await t.section('CORS preflight echoes the headers the official clients send', async () => {
    const asked = 'x-stainless-os, x-stainless-lang, x-stainless-package-version, x-stainless-runtime, x-stainless-arch, x-stainless-retry-count, x-stainless-timeout, authorization, content-type';
    for (const p of ['/v1/chat/completions', '/v1/responses']) {
      const r = await request(srv, 'OPTIONS', p, {
        headers: { Origin: 'http://localhost:5173', 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': asked },
      });
      t.ok(r.status >= 200 && r.status < 300, `preflight ${p}: expected 2xx, got ${r.status}`);
      t.eq(r.headers['access-control-allow-origin'], 'http://localhost:5173', `preflight ${p}: Access-Control-Allow-Origin`);
      const allowed = (r.headers['access-control-allow-headers'] || '').toLowerCase().split(',').map((h) => h.trim());
      for (const h of asked.split(',').map((x) => x.trim())) t.ok(allowed.includes(h), `preflight ${p}: ${h} not allowed: ${fmt(r.headers['access-control-allow-headers'])}`);
    }
    const foreign = await request(srv, 'OPTIONS', '/v1/responses', {
      headers: { Origin: 'https://evil.example', 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': asked },
    });
    t.eq(foreign.headers['access-control-allow-origin'], undefined, 'preflight from a foreign origin: no Access-Control-Allow-Origin');
  });

  await t.section('fields that change nothing are accepted', async () => {
    const ignored = { user: 'u', metadata: { k: 'v' }, store: false, service_tier: 'auto', prompt_cache_key: 'k', safety_identifier: 's', verbosity: 'low', parallel_tool_calls: true };
    const base = await CH({ messages: msgs, max_tokens: 4 });
    const r = await CH({ messages: msgs, max_tokens: 4, ...ignored });
    t.eq(r.status, 200, `chat with ${fmt(ignored)}: status (${trunc(r.text)})`);
    t.eq(r.json && r.json.choices[0].message.content, base.json && base.json.choices[0].message.content, 'ignored fields: the same greedy text');
    const c = await post(srv, '/v1/completions', { prompt: 'Hi', max_tokens: 2, ...ignored });
    t.eq(c.status, 200, `completions with the ignored fields: status (${trunc(c.text)})`);
  });

  await t.section('fields still refused -> 400 naming the field', async () => {
    const cases = [
      ['functions', { functions: [WEATHER.function] }],
      ['function_call', { function_call: { name: 'get_weather' } }],
      ['logits_processors', { logits_processors: ['x'] }],
      ['guided_json', { guided_json: { type: 'object' } }],
      ['prediction', { prediction: { type: 'content', content: 'x' } }],
      ['tool_choice', { tools: [WEATHER], tool_choice: { type: 'function', function: { name: 'nope' } } }],
      ['tool_choice', { tool_choice: 'required' }],
      ['tools[0].function.name', { tools: [{ type: 'function', function: { name: 'bad name' } }] }],
      ['reasoning_effort', { reasoning_effort: 'extreme' }],
      ['reasoning_effort', { reasoning_effort: 'high', chat_template_kwargs: { enable_thinking: false } }],
      ['grammar', { response_format: { type: 'json_object' }, grammar: 'root ::= "a"' }],
      ['messages[0].tool_calls', { messages: [{ role: 'user', content: 'x', tool_calls: [] }] }],
      ['frobnicate', { frobnicate: 1 }],
    ];
    for (const [param, extra] of cases) checkError(t, await CH({ messages: msgs, max_tokens: 2, ...extra }), 400, `chat with ${fmt(extra)}`, { param });
    checkError(t, await post(srv, '/v1/responses', { input: 'x', previous_response_id: 'resp_1' }), 400, 'responses with previous_response_id', { param: 'previous_response_id' });
  });

  await t.section('tools go to the template; reasoning_effort none is enable_thinking false', async () => {
    let r = await CH({ messages: msgs, max_tokens: 3, tools: [WEATHER, TIME], tool_choice: 'auto' });
    t.eq(r.status, 200, `chat with tools: status (${trunc(r.text)})`);
    t.eq(r.json && r.json.usage.prompt_tokens, countTokens(renderChat(msgs, { tools: [WEATHER, TIME] })), 'chat with tools: prompt_tokens vs kipp render --tools');
    const m = r.json && r.json.choices[0].message;
    t.ok(m && (typeof m.content === 'string' || Array.isArray(m.tool_calls)), `chat with tools: message ${fmt(m)}`);
    r = await CH({ messages: msgs, max_tokens: 3, tools: [WEATHER], tool_choice: 'none' });
    t.eq(r.json && r.json.usage.prompt_tokens, countTokens(renderChat(msgs)), 'tool_choice none: the tools are not rendered');
    r = await CH({ messages: msgs, max_tokens: 3, reasoning_effort: 'none' });
    t.eq(r.json && r.json.usage.prompt_tokens, countTokens(renderChat(msgs, { think: false })), 'reasoning_effort none: prompt_tokens vs kipp render --no-think');
    r = await CH({ messages: msgs, max_tokens: 3, reasoning_effort: 'high' });
    t.eq(r.json && r.json.usage.prompt_tokens, countTokens(renderChat(msgs)), 'reasoning_effort high: prompt_tokens vs kipp render --think');
    // An earlier turn with its reasoning given as `reasoning`.
    const history = [...msgs, { role: 'assistant', content: 'Hi!', reasoning: 'greet back' }, { role: 'user', content: 'Bye' }];
    r = await CH({ messages: history, max_tokens: 2 });
    t.eq(r.json && r.json.usage.prompt_tokens, countTokens(renderChat([...msgs, { role: 'assistant', content: 'Hi!', reasoning_content: 'greet back' }, { role: 'user', content: 'Bye' }])), 'assistant reasoning: kept as reasoning_content');
    for (const format of [{ type: 'json_object' }, { type: 'json_schema', json_schema: { name: 'w', schema: { type: 'object' }, strict: true } }]) {
      r = await CH({ messages: msgs, max_tokens: 2, response_format: format });
      t.eq(r.status, 200, `response_format ${fmt(format)}: accepted (${trunc(r.text)})`);
    }
  });

  await t.section('forced tool calls (constrained decoding)', async () => {
    for (const choice of ['required', { type: 'function', function: { name: 'get_weather' } }]) {
      const r = await CH({ messages: msgs, max_tokens: 48, tools: [WEATHER, TIME], tool_choice: choice, parallel_tool_calls: false });
      t.eq(r.status, 200, `tool_choice ${fmt(choice)}: status (${trunc(r.text)})`);
      const c = r.json && r.json.choices[0];
      const calls = (c && c.message.tool_calls) || [];
      t.ok(calls.length > 0, `tool_choice ${fmt(choice)}: no call came back: ${fmt(c)}`);
      t.eq(c.finish_reason, 'tool_calls', `tool_choice ${fmt(choice)}: finish_reason`);
      t.eq(calls.length, 1, `tool_choice ${fmt(choice)} with parallel_tool_calls false: one call`);
      for (const call of calls) {
        t.ok(typeof call.id === 'string' && call.id.length > 0 && call.type === 'function', `forced call: id/type ${fmt(call)}`);
        t.ok(choice === 'required' ? ['get_weather', 'get_time'].includes(call.function.name) : call.function.name === 'get_weather', `forced call: name ${fmt(call)}`);
        let args;
        try { args = JSON.parse(call.function.arguments); } catch { args = undefined; }
        t.ok(args && typeof args === 'object', `forced call: arguments are a JSON object: ${fmt(call.function.arguments)}`);
      }
    }
  });

  await t.section('chat streaming with tools: deltas in OpenAI shape', async () => {
    const st = await streamRequest(srv, '/v1/chat/completions', { model: TINY_NAME, messages: msgs, max_tokens: 6, temperature: 0, stream: true, tools: [WEATHER] });
    t.eq(st.status, 200, 'stream with tools: status');
    for (const chunk of st.chunks || []) {
      for (const c of chunk.choices || []) {
        for (const call of (c.delta && c.delta.tool_calls) || []) {
          t.ok(isInt(call.index) && call.function && typeof call.function.arguments === 'string', `stream tool_calls delta: ${fmt(call)}`);
          if (call.id !== undefined) t.ok(call.type === 'function' && typeof call.function.name === 'string', `stream first tool_calls delta: ${fmt(call)}`);
        }
      }
    }
  });

  await t.section('POST /v1/responses with the official client', async () => {
    const client = new OpenAI({ apiKey: 'x', baseURL: `${srv.base}/v1`, maxRetries: 0, timeout: 60000 });
    const chat = await CH({ messages: [{ role: 'system', content: 'Be brief.' }, ...msgs], max_tokens: 5 });
    const r = await client.responses.create({ model: TINY_NAME, instructions: 'Be brief.', input: 'Hello', max_output_tokens: 5, temperature: 0, store: false, metadata: { k: 'v' } });
    t.eq(r.object, 'response', 'responses.create: object');
    t.ok(/^resp_/.test(r.id), `responses.create: id ${fmt(r.id)}`);
    t.ok(['completed', 'incomplete'].includes(r.status), `responses.create: status ${fmt(r.status)}`);
    if (r.status === 'incomplete') t.eq(r.incomplete_details, { reason: 'max_output_tokens' }, 'responses.create: incomplete_details');
    const expected = chat.json.choices[0].message;
    t.eq(r.output_text, expected.content, 'responses.create: output_text vs the same chat completion');
    const message = r.output.find((i) => i.type === 'message');
    t.ok(message && message.role === 'assistant' && message.content[0].type === 'output_text' && Array.isArray(message.content[0].annotations), `responses.create: message item ${fmt(message)}`);
    t.eq(r.usage && r.usage.input_tokens, chat.json.usage.prompt_tokens, 'responses.create: usage.input_tokens vs chat prompt_tokens');
    t.eq(r.usage && r.usage.output_tokens, chat.json.usage.completion_tokens, 'responses.create: usage.output_tokens');
    t.eq(r.usage && r.usage.total_tokens, r.usage && r.usage.input_tokens + r.usage.output_tokens, 'responses.create: usage.total_tokens');
    t.ok(r.usage && isInt(r.usage.input_tokens_details.cached_tokens) && r.usage.output_tokens_details.reasoning_tokens === 0, `responses.create: usage details ${fmt(r.usage)}`);
    t.eq(r.instructions, 'Be brief.', 'responses.create: instructions echoed');
    t.eq(r.metadata, { k: 'v' }, 'responses.create: metadata echoed');

    // Reasoning forced by a bias on <think>: a reasoning item with reasoning_text content.
    const thinking = await client.responses.create({ model: TINY_NAME, input: 'Hello', max_output_tokens: 3, temperature: 0, logit_bias: { [TOK_THINK]: 100 } });
    const reasoning = thinking.output.find((i) => i.type === 'reasoning');
    t.ok(reasoning && Array.isArray(reasoning.summary) && reasoning.content && reasoning.content[0].type === 'reasoning_text', `responses with <think> forced: reasoning item ${fmt(thinking.output)}`);

    // Streaming: the client's own accumulation must agree with the final response and with the
    // non-streaming call.
    const stream = client.responses.stream({ model: TINY_NAME, instructions: 'Be brief.', input: 'Hello', max_output_tokens: 5, temperature: 0 });
    let text = '';
    const types = [];
    let seq = -1;
    let ordered = true;
    for await (const event of stream) {
      types.push(event.type);
      if (event.sequence_number !== seq + 1) ordered = false;
      seq = event.sequence_number;
      if (event.type === 'response.output_text.delta') text += event.delta;
    }
    const final = await stream.finalResponse();
    t.ok(ordered, `responses stream: sequence numbers 0, 1, 2, ...: ${fmt(types)}`);
    t.eq(types[0], 'response.created', 'responses stream: first event');
    t.ok(['response.completed', 'response.incomplete'].includes(types[types.length - 1]), `responses stream: last event ${fmt(types[types.length - 1])}`);
    for (const needed of ['response.in_progress', 'response.output_item.added', 'response.content_part.added', 'response.output_text.done', 'response.content_part.done', 'response.output_item.done'])
      t.ok(types.includes(needed), `responses stream: no ${needed} in ${fmt(types)}`);
    t.eq(text, r.output_text, 'responses stream: deltas vs non-streaming output_text');
    t.eq(final.output_text, r.output_text, 'responses stream: finalResponse().output_text');
    t.eq(final.usage && final.usage.output_tokens, r.usage.output_tokens, 'responses stream: usage.output_tokens');

    // Tools in the flat Responses shape; the forced call comes out of constrained decoding.
    const tools = [{ type: 'function', name: 'get_weather', description: 'Current weather of a city', parameters: WEATHER.function.parameters, strict: true }];
    const auto = await client.responses.create({ model: TINY_NAME, input: 'Hello', tools, max_output_tokens: 4, temperature: 0 });
    t.eq(auto.tools && auto.tools[0].name, 'get_weather', 'responses with tools: tools echoed');
    // The template sees each tool in the chat shape, its fields in the client's order.
    const chatTools = tools.map(({ type, ...fields }) => ({ type, function: fields }));
    t.eq(auto.usage.input_tokens, countTokens(renderChat(msgs, { tools: chatTools })), 'responses with tools: input_tokens vs kipp render --tools');
    const forced = await client.responses.create({ model: TINY_NAME, input: 'Weather in Paris?', tools, tool_choice: 'required', max_output_tokens: 48, temperature: 0 });
    const calls = forced.output.filter((i) => i.type === 'function_call');
    t.eq(calls.length, 1, `responses tool_choice required: one function_call in ${fmt(forced.output)}`);
    for (const call of calls) {
      t.ok(/^fc_/.test(call.id) && typeof call.call_id === 'string' && call.name === 'get_weather' && call.status === 'completed', `responses function_call item: ${fmt(call)}`);
      let args;
      try { args = JSON.parse(call.arguments); } catch { args = undefined; }
      t.ok(args && typeof args.city === 'string', `responses function_call arguments: ${fmt(call.arguments)}`);
    }
    // A tool round trip as input items: the call and its output go back as chat turns.
    const round = await client.responses.create({
      model: TINY_NAME, tools, max_output_tokens: 3, temperature: 0,
      input: [{ role: 'user', content: 'Weather in Paris?' },
        { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
        { type: 'function_call_output', call_id: 'call_1', output: 'sunny' }],
    });
    t.ok(['completed', 'incomplete'].includes(round.status), `responses with a tool round trip: ${fmt(round.status)}`);
  });

  await t.section('--reasoning-field both', async () => {
    const both = await startServer({ args: ['--reasoning-field', 'both'] });
    const r = await post(both, '/v1/chat/completions', { messages: msgs, max_tokens: 3, temperature: 0, logit_bias: { [TOK_THINK]: 100 } });
    const m = r.json && r.json.choices[0].message;
    t.ok(m && typeof m.reasoning === 'string' && m.reasoning === m.reasoning_content, `--reasoning-field both: ${fmt(m)}`);
    const st = await streamRequest(both, '/v1/chat/completions', { messages: msgs, max_tokens: 3, temperature: 0, stream: true, logit_bias: { [TOK_THINK]: 100 } });
    const deltas = (st.chunks || []).flatMap((c) => c.choices || []).map((c) => c.delta).filter((d) => d && d.reasoning !== undefined);
    t.ok(deltas.length > 0 && deltas.every((d) => d.reasoning === d.reasoning_content), `--reasoning-field both, streaming: ${fmt(deltas)}`);
    await both.stop(t);
  });
});
