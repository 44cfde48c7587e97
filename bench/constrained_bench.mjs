#!/usr/bin/env node
// constrained_bench.mjs: what constrained decoding costs `kipp serve`, on the random-weight
// 0.6b model (default build/release/models/qwen3-0.6b-bf16.gguf).
//
// Batch 1: requests one at a time, alternating free text / a deep nested JSON schema / a schema
// of long strings (--rounds of each), every one generating up to --max-tokens (free text with
// the end-of-text tokens biased by -100 so it runs to the cap; the deep schema ends when
// complete; the long strings, longer than the cap, run to it). The decode rate of a request is (completion tokens - 1) /
// the server's own generation time (`timings.predicted_ms`); the report gives the median rate
// of each kind and the ratios constrained / free (target: >= 0.9).
// Batched: 8 concurrent free-text requests, then 4 free-text + 4 long-strings requests at once
// (all 8 run to the cap, so both batches keep 8 rows to the end), alternating (--rounds each);
// the median decode rate of the free-text requests in the mixed batch against the all-free
// batch shows whether masks stall the batch (target: >= 0.9).
// Results go to JSON (default bench/results/grammar/constrained-<model file name>.json) with the
// machine facts and the commands. Run it on a quiet machine.
//
// Usage: node bench/constrained_bench.mjs [options]
//   --model PATH        GGUF to serve (default build/release/models/qwen3-0.6b-bf16.gguf)
//   --kipp PATH         kipp binary (default build/release/kipp; env KIPP)
//   --rounds N          requests of each kind at batch 1, and mixed/free batches (default 5)
//   --max-tokens N      tokens per request (default 64)
//   --out PATH          result JSON (default see above)
//   --help              this text
import fs from 'node:fs';
import path from 'node:path';

import { EOS_IDS, REPO, machineFacts, median, r3, startServer, usage } from './server_common.mjs';

function die(msg) {
  console.error(`constrained_bench: error: ${msg}`);
  process.exit(2);
}

function parseArgs(argv) {
  const o = { model: path.join(REPO, 'build/release/models/qwen3-0.6b-bf16.gguf'), kipp: process.env.KIPP || path.join(REPO, 'build/release/kipp'),
    rounds: 5, maxTokens: 64, out: null };
  for (let i = 0; i < argv.length; i++) {
    const val = () => (i + 1 < argv.length ? argv[++i] : die(`${argv[i]} needs a value`));
    const int = () => { const n = Number(val()); if (!Number.isInteger(n) || n < 1) die(`${argv[i - 1]} needs a positive integer`); return n; };
    switch (argv[i]) {
      case '--help': case '-h': console.log(usage(import.meta.url)); process.exit(0); break;
      case '--model': o.model = path.resolve(val()); break;
      case '--kipp': o.kipp = path.resolve(val()); break;
      case '--rounds': o.rounds = int(); break;
      case '--max-tokens': o.maxTokens = int(); break;
      case '--out': o.out = path.resolve(val()); break;
      default: die(`unknown argument '${argv[i]}' (see --help)`);
    }
  }
  if (!o.out) o.out = path.join(REPO, 'bench/results/grammar', `constrained-${path.basename(o.model).replace(/\.gguf$/, '')}.json`);
  return o;
}

// Five levels of objects in arrays in objects, with enums, bounded strings and numbers, anyOf.
const leaf = { type: 'object', properties: { id: { type: 'integer', minimum: 0, maximum: 9999 }, tag: { enum: ['alpha', 'beta', 'gamma'] },
  note: { type: 'string', maxLength: 24 }, score: { anyOf: [{ type: 'number', minimum: -10, maximum: 10 }, { type: 'null' }] } },
required: ['id', 'tag', 'note'], additionalProperties: false };
const level = (inner, key) => ({ type: 'object', properties: { name: { type: 'string', maxLength: 16 }, [key]: { type: 'array', items: inner, maxItems: 3 } },
  required: ['name', key], additionalProperties: false });
const DEEP_SCHEMA = level(level(level(level(leaf, 'items'), 'groups'), 'sections'), 'parts');
// Eight strings of 24 characters: the string state, where most of the vocabulary is allowed.
const LONG_STRINGS_SCHEMA = { type: 'object', properties: { lines: { type: 'array', minItems: 8, maxItems: 8,
  items: { type: 'string', minLength: 24, maxLength: 24 } } }, required: ['lines'], additionalProperties: false };

const KINDS = {
  free: { logit_bias: Object.fromEntries(EOS_IDS.map((id) => [id, -100])) },
  deep_schema: { response_format: { type: 'json_schema', json_schema: { name: 'deep', schema: DEEP_SCHEMA, strict: true } } },
  long_strings: { response_format: { type: 'json_schema', json_schema: { name: 'lines', schema: LONG_STRINGS_SCHEMA, strict: true } } },
};

async function chat(srv, o, kind, seed) {
  const body = { model: path.basename(o.model).replace(/\.gguf$/, ''), temperature: 1, seed, max_tokens: o.maxTokens,
    messages: [{ role: 'user', content: `Request ${seed}: describe a project plan.` }], ...KINDS[kind] };
  const res = await fetch(`http://${srv.host}:${srv.port}/v1/chat/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  const j = await res.json();
  if (res.status !== 200) throw new Error(`${kind}: HTTP ${res.status}: ${JSON.stringify(j).slice(0, 300)}`);
  const n = j.usage.completion_tokens;
  return { kind, tokens: n, rate: n > 1 ? (n - 1) / (j.timings.predicted_ms / 1000) : null, finish: j.choices[0].finish_reason };
}

const o = parseArgs(process.argv.slice(2));
if (!fs.existsSync(o.model)) die(`model not found: ${o.model}`);
if (!fs.existsSync(o.kipp)) die(`kipp binary not found: ${o.kipp}`);
const machine = machineFacts();
console.log(`constrained_bench: ${path.basename(o.model)}, ${o.rounds} rounds, max_tokens ${o.maxTokens}`);
const srv = await startServer(o.kipp, ['-m', o.model, '--max-batch', '8', '--ctx', '2048']);
console.log(`server: ${srv.command}`);
const single = { free: [], deep_schema: [], long_strings: [] };
const batched = { all_free: [], mixed_free: [], mixed_schema: [] };
let seed = 1;
try {
  await chat(srv, o, 'free', 0); // warm-up
  for (let r = 0; r < o.rounds; r++) {
    for (const kind of Object.keys(single)) single[kind].push(await chat(srv, o, kind, seed++));
  }
  for (let r = 0; r < o.rounds; r++) {
    const all = await Promise.all(Array.from({ length: 8 }, () => chat(srv, o, 'free', seed++)));
    batched.all_free.push(...all);
    const mixed = await Promise.all(Array.from({ length: 8 }, (_, i) => chat(srv, o, i % 2 ? 'long_strings' : 'free', seed++)));
    batched.mixed_free.push(...mixed.filter((x) => x.kind === 'free'));
    batched.mixed_schema.push(...mixed.filter((x) => x.kind === 'long_strings'));
  }
} finally {
  srv.proc.kill('SIGTERM');
}
const summary = (xs) => ({ requests: xs.length, median_decode_tokens_per_s: r3(median(xs.map((x) => x.rate).filter((x) => x !== null))),
  median_tokens: median(xs.map((x) => x.tokens)), finish: [...new Set(xs.map((x) => x.finish))] });
const batch1 = Object.fromEntries(Object.entries(single).map(([k, v]) => [k, summary(v)]));
const batch8 = Object.fromEntries(Object.entries(batched).map(([k, v]) => [k, summary(v)]));
const ratio = (a, b) => r3(a.median_decode_tokens_per_s / b.median_decode_tokens_per_s);
const ratios = {
  batch1_deep_schema_over_free: ratio(batch1.deep_schema, batch1.free),
  batch1_long_strings_over_free: ratio(batch1.long_strings, batch1.free),
  batch8_free_in_mixed_over_all_free: ratio(batch8.mixed_free, batch8.all_free),
};
for (const [k, v] of Object.entries({ ...batch1, ...batch8 })) console.log(`${k.padEnd(14)} ${JSON.stringify(v)}`);
for (const [k, v] of Object.entries(ratios)) console.log(`${k}: ${v}`);
const result = {
  benchmark: 'constrained_decoding',
  model: path.relative(REPO, o.model),
  settings: { rounds: o.rounds, max_tokens: o.maxTokens, temperature: 1, max_batch: 8 },
  schemas: { deep_schema: DEEP_SCHEMA, long_strings: LONG_STRINGS_SCHEMA },
  batch1,
  batch8,
  ratios,
  target: 'each ratio >= 0.9',
  machine,
  command: ['node', ...process.argv.slice(1).map((a, i) => (i === 0 ? path.relative(REPO, a) : a))].join(' '),
  server_command: srv.command,
  date: new Date().toISOString(),
};
fs.mkdirSync(path.dirname(o.out), { recursive: true });
fs.writeFileSync(o.out, `${JSON.stringify(result, null, 2)}\n`);
console.log(`wrote ${path.relative(process.cwd(), o.out)}`);
