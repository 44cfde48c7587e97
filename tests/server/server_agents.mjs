// Agents and structured output against `kipp serve` on a random-weight model, driven by the
// clients people use (pinned in tests/clients/package-lock.json, installed by fetch_clients.sh):
//   - json_schema response formats: 10 schemas x 10 requests (half of them streamed), every
//     answer validated by ajv (+ ajv-formats), an independent JSON Schema validator;
//   - json_object: answers that parse, ended in time by the token budget;
//   - the official openai client: chat.completions.parse with a zod schema, a runTools loop
//     with a forced tool, streamed tool-call deltas (index, id, type and name first);
//   - the Vercel AI SDK (ai + @ai-sdk/openai-compatible): a two-tool agent loop that completes,
//     the tools forced step by step (random weights never call a tool by themselves).
// Random weights make the model's choices arbitrary; only the grammar keeps them valid.
//
// Usage: node tests/server/server_agents.mjs [MODEL_FILE]   (env KIPP, KIPP_MODELS;
//        MODEL_FILE defaults to tiny-bf16.gguf; KIPP_CLIENT_NODE_MODULES overrides the clients)
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { main, startServer, fmt, MODELS } from './lib.mjs';
import { SCHEMAS, closed, str } from '../clients/schemas.mjs';

const here = path.dirname(new URL(import.meta.url).pathname);
const modules = process.env.KIPP_CLIENT_NODE_MODULES ||
  execFileSync(path.join(here, '..', 'clients', 'fetch_clients.sh'), { encoding: 'utf8' }).trim().split('\n').pop();
const load = (name, file) => import(pathToFileURL(path.join(modules, name, file)).href);
const { default: OpenAI } = await load('openai', 'index.mjs');
const { zodResponseFormat } = await load('openai', 'helpers/zod.mjs');
const { z } = await load('zod', 'index.js');
const { default: Ajv2020 } = await load('ajv', 'dist/2020.js');
const { default: addFormats } = await load('ajv-formats', 'dist/index.js');
const ai = await load('ai', 'dist/index.mjs');
const { createOpenAICompatible } = await load('@ai-sdk/openai-compatible', 'dist/index.mjs');

const modelFile = process.argv[2] || 'tiny-bf16.gguf';
const modelName = path.basename(modelFile, '.gguf');

function collectStream(chunks) {
  let content = '';
  let finish = null;
  for (const c of chunks) {
    const choice = c.choices && c.choices[0];
    if (!choice) continue;
    if (choice.delta && typeof choice.delta.content === 'string') content += choice.delta.content;
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  return { content, finish };
}

await main('server_agents', async (t) => {
  const srv = await startServer({ model: path.join(MODELS, modelFile), args: ['--max-batch', '8'] });
  const client = new OpenAI({ apiKey: 'unused', baseURL: `${srv.base}/v1`, maxRetries: 0, timeout: 240000 });
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);

  await t.section('json_schema: 10 schemas x 10 requests, ajv-validated', async () => {
    const jobs = [];
    for (const [name, schema] of Object.entries(SCHEMAS)) {
      const validate = ajv.compile(schema);
      for (let i = 0; i < 10; i++) {
        const stream = i % 2 === 1;
        const body = {
          model: modelName, temperature: 1, seed: 1000 + i, max_tokens: 160, stream,
          messages: [{ role: 'user', content: `Give me a ${name} as JSON.` }],
          response_format: { type: 'json_schema', json_schema: { name, schema, strict: true } },
        };
        jobs.push(async () => {
          let content, finish;
          if (stream) {
            const chunks = [];
            for await (const c of await client.chat.completions.create(body)) chunks.push(c);
            ({ content, finish } = collectStream(chunks));
          } else {
            const r = await client.chat.completions.create(body);
            content = r.choices[0].message.content;
            finish = r.choices[0].finish_reason;
          }
          let value;
          try {
            value = JSON.parse(content);
          } catch (e) {
            return t.fail(`${name} #${i}${stream ? ' (stream)' : ''}: not JSON (${e.message}): ${fmt(content)}`);
          }
          t.ok(validate(value), `${name} #${i}${stream ? ' (stream)' : ''}: ${fmt(content)} fails the schema: ${fmt(validate.errors)}`);
          t.eq(finish, 'stop', `${name} #${i}: finish_reason`);
          t.ok(!/\s/.test(content.replace(/"(?:[^"\\]|\\.)*"/g, '""')), `${name} #${i}: whitespace outside strings: ${fmt(content)}`);
        });
      }
    }
    // As many in flight as the server batches (--max-batch 8); the rest wait their turn here.
    let next = 0;
    await Promise.all(Array.from({ length: 8 }, async () => { while (next < jobs.length) await jobs[next++](); }));
    t.info(`${jobs.length} json_schema requests validated`);
  });

  await t.section('json_object ends complete within max_tokens', async () => {
    for (let i = 0; i < 6; i++) {
      const r = await client.chat.completions.create({
        model: modelName, temperature: 1, seed: i, max_tokens: 24 + 8 * i,
        messages: [{ role: 'user', content: 'Any JSON object.' }], response_format: { type: 'json_object' },
      });
      const content = r.choices[0].message.content;
      let value;
      try { value = JSON.parse(content); } catch (e) { t.fail(`json_object #${i}: not JSON: ${fmt(content)}`); continue; }
      t.ok(value !== null && typeof value === 'object' && !Array.isArray(value), `json_object #${i}: not an object: ${fmt(content)}`);
      t.ok(r.usage.completion_tokens <= 24 + 8 * i, `json_object #${i}: ${r.usage.completion_tokens} tokens exceed max_tokens`);
    }
  });

  await t.section('constraints compose with n and logprobs; bad grammars are a 400 naming the keyword', async () => {
    const schema = SCHEMAS.palette;
    const validate = ajv.compile(schema);
    const r = await client.chat.completions.create({
      model: modelName, temperature: 1, seed: 77, n: 3, logprobs: true, top_logprobs: 2, max_tokens: 60,
      messages: [{ role: 'user', content: 'A palette.' }], response_format: { type: 'json_schema', json_schema: { name: 'palette', schema } },
    });
    t.eq(r.choices.length, 3, 'n=3: three choices');
    for (const c of r.choices) {
      let value = null;
      try { value = JSON.parse(c.message.content); } catch { /* reported below */ }
      t.ok(value !== null && validate(value), `n=3 choice ${c.index}: ${fmt(c.message.content)}`);
      const lp = c.logprobs && c.logprobs.content;
      t.ok(Array.isArray(lp) && lp.length > 0 && lp.every((x) => Number.isFinite(x.logprob) && x.top_logprobs.every((a) => Number.isFinite(a.logprob))),
        `n=3 choice ${c.index}: finite logprobs of the allowed tokens: ${fmt(lp)}`);
    }
    const bad = [
      [{ type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', patternProperties: { '^a': {} } } } }, 'response_format', /patternProperties/],
      [{ type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: '(a)\\1' } } }, 'response_format', /pattern|backreference/i],
    ];
    for (const [format, param, re] of bad) {
      try {
        await client.chat.completions.create({ model: modelName, max_tokens: 4, messages: [{ role: 'user', content: 'x' }], response_format: format });
        t.fail(`${fmt(format)}: accepted`);
      } catch (e) {
        t.eq(e.status, 400, `${fmt(format)}: status`);
        t.eq(e.param, param, `${fmt(format)}: param`);
        t.ok(re.test(e.message), `${fmt(format)}: message names the keyword: ${e.message}`);
      }
    }
    try {
      await client.chat.completions.create({ model: modelName, max_tokens: 4, messages: [{ role: 'user', content: 'x' }], grammar: 'root ::= "a" undefined_rule' });
      t.fail('GBNF with an undefined rule: accepted');
    } catch (e) {
      t.ok(e.status === 400 && e.param === 'grammar' && /undefined_rule/.test(e.message), `GBNF with an undefined rule: ${e.status} ${e.param} ${e.message}`);
    }
  });

  await t.section('openai: chat.completions.parse with zod', async () => {
    // zod counts string lengths in UTF-16 units, JSON Schema in characters: no string bounds here.
    const Event = z.object({ title: z.string(), attendees: z.array(z.enum(['ann', 'bo', 'cy'])).max(3), day: z.enum(['mon', 'tue', 'wed']), hours: z.number().int().min(1).max(8) });
    for (let i = 0; i < 3; i++) {
      const r = await client.chat.completions.parse({
        model: modelName, temperature: 1, seed: 40 + i, max_tokens: 120,
        messages: [{ role: 'user', content: 'Plan an event.' }], response_format: zodResponseFormat(Event, 'event'),
      });
      const parsed = r.choices[0].message.parsed;
      t.ok(parsed && Event.safeParse(parsed).success, `parse #${i}: ${fmt(r.choices[0].message)}`);
    }
  });

  const weatherParams = closed({ city: str(12, { minLength: 1 }), unit: { enum: ['c', 'f'] } });
  const convertParams = closed({ celsius: { type: 'integer', minimum: -50, maximum: 50 } });

  await t.section('openai: streamed forced tool call', async () => {
    const stream = await client.chat.completions.create({
      model: modelName, temperature: 1, seed: 7, max_tokens: 100, stream: true,
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: [{ type: 'function', function: { name: 'get_weather', parameters: weatherParams } }],
      tool_choice: 'required', parallel_tool_calls: false,
    });
    const calls = [];
    let finish = null;
    let firstDelta = null;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (!choice) continue;
      if (choice.finish_reason) finish = choice.finish_reason;
      for (const d of (choice.delta && choice.delta.tool_calls) || []) {
        if (!calls[d.index]) {
          firstDelta = firstDelta || d;
          calls[d.index] = { id: d.id, name: d.function && d.function.name, arguments: '' };
        }
        if (d.function && d.function.arguments) calls[d.index].arguments += d.function.arguments;
      }
    }
    t.eq(finish, 'tool_calls', 'stream: finish_reason');
    t.eq(calls.length, 1, 'stream: one call (parallel_tool_calls false)');
    t.ok(firstDelta && typeof firstDelta.id === 'string' && firstDelta.type === 'function' && firstDelta.function.name === 'get_weather',
      `stream: the first delta carries id, type and name: ${fmt(firstDelta)}`);
    if (calls[0]) {
      const validate = ajv.compile(weatherParams);
      let args = null;
      try { args = JSON.parse(calls[0].arguments); } catch { /* reported below */ }
      t.ok(args !== null && validate(args), `stream: arguments ${fmt(calls[0].arguments)} fail the schema`);
    }
  });

  await t.section('openai: runTools with a forced tool', async () => {
    const seen = [];
    const runner = client.chat.completions.runTools({
      model: modelName, temperature: 1, seed: 11, max_tokens: 80,
      messages: [{ role: 'user', content: 'Weather in Oslo?' }],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      tools: [{
        type: 'function',
        function: { name: 'get_weather', parameters: weatherParams, parse: JSON.parse,
          function: (args) => { seen.push(args); return { temperature_c: 4 }; } },
      }],
    });
    const final = await runner.finalChatCompletion();
    t.eq(seen.length, 1, 'runTools: the tool ran once');
    const validate = ajv.compile(weatherParams);
    t.ok(seen[0] && validate(seen[0]), `runTools: arguments ${fmt(seen[0])} fail the schema`);
    const messages = runner.messages;
    t.ok(messages.some((m) => m.role === 'tool'), `runTools: no tool message in ${fmt(messages)}`);
    t.ok(final && final.choices && final.choices.length === 1, `runTools: final completion ${fmt(final)}`);
  });

  await t.section('Vercel AI SDK: two-tool agent loop', async () => {
    const provider = createOpenAICompatible({ name: 'kipp', baseURL: `${srv.base}/v1` });
    const calls = [];
    const result = await ai.generateText({
      model: provider.chatModel(modelName),
      temperature: 1, seed: 5, maxOutputTokens: 60,
      prompt: 'What is the weather in Rome, in Fahrenheit?',
      tools: {
        get_weather: ai.tool({ description: 'Current weather of a city', inputSchema: ai.jsonSchema(weatherParams),
          execute: async (input) => { calls.push(['get_weather', input]); return { celsius: 21 }; } }),
        to_fahrenheit: ai.tool({ description: 'Celsius to Fahrenheit', inputSchema: ai.jsonSchema(convertParams),
          execute: async (input) => { calls.push(['to_fahrenheit', input]); return { fahrenheit: input.celsius * 9 / 5 + 32 }; } }),
      },
      // The loop: weather first, then the conversion, then an answer in text.
      prepareStep: ({ stepNumber }) => ({
        toolChoice: stepNumber === 0 ? { type: 'tool', toolName: 'get_weather' }
          : stepNumber === 1 ? { type: 'tool', toolName: 'to_fahrenheit' } : 'none',
      }),
      stopWhen: ai.stepCountIs(4),
    });
    t.eq(calls.map((c) => c[0]), ['get_weather', 'to_fahrenheit'], 'AI SDK: tools called in order');
    t.ok(calls[0] && ajv.validate(weatherParams, calls[0][1]), `AI SDK: get_weather input ${fmt(calls[0] && calls[0][1])}`);
    t.ok(calls[1] && ajv.validate(convertParams, calls[1][1]), `AI SDK: to_fahrenheit input ${fmt(calls[1] && calls[1][1])}`);
    t.eq(result.steps.length, 3, 'AI SDK: three steps (two tool steps and the answer)');
    t.ok(typeof result.text === 'string', `AI SDK: final text ${fmt(result.text)}`);
    t.ok(['stop', 'length'].includes(result.finishReason), `AI SDK: finishReason ${result.finishReason}`);
  });
});
