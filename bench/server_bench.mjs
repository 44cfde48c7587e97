#!/usr/bin/env node
// server_bench.mjs: throughput and time to first token of `kipp serve` under 1, 4 and 16
// concurrent streaming clients.
//
// Starts `kipp serve` on the model (default the synthetic 0.6b, build/release/models/
// qwen3-0.6b-bf16.gguf, --max-batch = the highest level), then for each concurrency level C runs
// C clients that each send ROUNDS streaming completions one after another (a fixed prompt set,
// 30-200 tokens, each prompt made unique by a leading tag so the prefix cache does not skew the
// levels; greedy; max_tokens MAX_TOKENS with the end-of-text tokens biased by -100 so every request
// generates to the cap - each finish_reason is checked to be "length" and the count recorded).
// One unmeasured warm-up request precedes each level. Per level it reports the aggregate
// generated tokens/s (all completion tokens / wall time of the level), the time to first token
// (request sent -> first chunk with text) p50/p90/p99, and the per-request decode rate; then the
// ratio of the aggregate throughput at the highest level to that at concurrency 1.
// Results go to JSON (default bench/results/server-0.6b.json for the default model, else
// bench/results/server-<model file name>.json) with the machine facts and the commands.
// Run it on a quiet machine; it prints a table as it goes.
//
// Usage: node bench/server_bench.mjs [options]
//   --model PATH        GGUF to serve (default build/release/models/qwen3-0.6b-bf16.gguf)
//   --kipp PATH         kipp binary (default build/release/kipp; env KIPP)
//   --levels LIST       concurrency levels, comma-separated (default 1,4,16)
//   --rounds N          requests per client per level (default 3)
//   --max-tokens N      generated tokens per request (default 64)
//   --threads N         passed to kipp serve --threads (default: the server's default)
//   --ctx N             passed to kipp serve --ctx (default 2048)
//   --server-arg ARG    an extra kipp serve argument (repeatable), e.g. --server-arg=--kv-pool-mib=1024
//   --out PATH          result JSON (default see above)
//   --help              this text
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

import { EOS_IDS, REPO, machineFacts, r3, startServer, usage } from './server_common.mjs';

function parseArgs(argv) {
  const o = { model: path.join(REPO, 'build/release/models/qwen3-0.6b-bf16.gguf'), kipp: process.env.KIPP || path.join(REPO, 'build/release/kipp'),
    levels: [1, 4, 16], rounds: 3, maxTokens: 64, threads: null, ctx: 2048, serverArgs: [], out: null };
  for (let i = 0; i < argv.length; i++) {
    let a = argv[i];
    let v;
    const eq = a.indexOf('=');
    if (a.startsWith('--') && eq > 0) { v = a.slice(eq + 1); a = a.slice(0, eq); }
    const val = () => { if (v === undefined) v = argv[++i]; if (v === undefined) die(`${a} needs a value`); return v; };
    const int = () => { const n = Number(val()); if (!Number.isInteger(n) || n < 1) die(`${a}: '${v}' is not a positive integer`); return n; };
    switch (a) {
      case '--help': case '-h': console.log(usage(import.meta.url)); process.exit(0); break;
      case '--model': o.model = path.resolve(val()); break;
      case '--kipp': o.kipp = path.resolve(val()); break;
      case '--levels': o.levels = val().split(',').map((x) => { const n = Number(x); if (!Number.isInteger(n) || n < 1) die(`--levels: '${x}' is not a positive integer`); return n; }); break;
      case '--rounds': o.rounds = int(); break;
      case '--max-tokens': o.maxTokens = int(); break;
      case '--threads': o.threads = int(); break;
      case '--ctx': o.ctx = int(); break;
      case '--server-arg': o.serverArgs.push(...val().split('=')); break;
      case '--out': o.out = path.resolve(val()); break;
      default: die(`unknown argument '${argv[i]}' (see --help)`);
    }
  }
  const stem = path.basename(o.model).replace(/\.gguf$/, '');
  if (!o.out) o.out = path.join(REPO, 'bench/results', stem === 'qwen3-0.6b-bf16' ? 'server-0.6b.json' : `server-${stem}.json`);
  return o;
}

function die(msg) {
  console.error(`server_bench: error: ${msg}`);
  process.exit(2);
}

// The fixed prompt set: 8 passages of different lengths.
const PASSAGES = [
  'Explain how a bicycle stays upright while it is moving.',
  'Write a short story about a lighthouse keeper who finds a message in a bottle. The story should have a beginning, a middle and an end, and the keeper should make a decision at the end.',
  'Summarize the following notes: the meeting began at nine; the budget for the new library wing was approved; the committee asked for three more quotes for the roof; the opening is planned for the spring; volunteers are needed for the book sale; the next meeting is in two weeks.',
  'def merge_sort(xs):\n    if len(xs) <= 1:\n        return xs\n    mid = len(xs) // 2\n    left = merge_sort(xs[:mid])\n    right = merge_sort(xs[mid:])\n    # merge the two sorted halves\n',
  'List ten uses of copper in everyday life and say briefly why copper is chosen for each.',
  `Translate into French, sentence by sentence: ${'The weather was cold and the roads were icy, so the school stayed closed for the whole week while the town cleared the snow. '.repeat(4)}`,
  'What are the differences between a comet, an asteroid and a meteor? Give one famous example of each.',
  `Continue the list: ${Array.from({ length: 40 }, (_, i) => `item ${i + 1}`).join(', ')},`,
];

function startKipp(o) {
  const maxBatch = Math.max(...o.levels);
  return startServer(o.kipp, ['-m', o.model, '--max-batch', String(maxBatch), '--max-queue', String(Math.max(64, maxBatch * 2)),
    '--ctx', String(o.ctx), ...(o.threads ? ['--threads', String(o.threads)] : []), ...o.serverArgs]);
}

// One streaming completion; resolves {ttft_s, total_s, tokens, finish}.
function streamOne(srv, prompt, o) {
  const body = JSON.stringify({ model: path.basename(o.model).replace(/\.gguf$/, ''), prompt, max_tokens: o.maxTokens, temperature: 0, stream: true,
    stream_options: { include_usage: true }, logit_bias: Object.fromEntries(EOS_IDS.map((id) => [id, -100])) });
  const t0 = process.hrtime.bigint();
  const secs = () => Number(process.hrtime.bigint() - t0) / 1e9;
  return new Promise((resolve, reject) => {
    const req = http.request({ host: srv.host, port: srv.port, method: 'POST', path: '/v1/completions', agent: false,
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } }, (res) => {
      if (res.statusCode !== 200) {
        let t = '';
        res.on('data', (d) => (t += d));
        res.on('end', () => reject(new Error(`HTTP ${res.statusCode}: ${t.slice(0, 300)}`)));
        return;
      }
      res.setEncoding('utf8');
      let buf = '';
      let ttft = null;
      let tokens = null;
      let finish = null;
      let done = false;
      res.on('data', (d) => {
        buf += d;
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const ev = buf.slice(0, i);
          buf = buf.slice(i + 2);
          for (const line of ev.split('\n')) {
            if (!line.startsWith('data:')) continue;
            const data = line.slice(5).trim();
            if (data === '[DONE]') { done = true; continue; }
            const j = JSON.parse(data);
            if (j.error) { reject(new Error(`error event: ${JSON.stringify(j.error)}`)); return; }
            for (const c of j.choices || []) {
              if (ttft === null && c.text) ttft = secs();
              if (c.finish_reason) finish = c.finish_reason;
            }
            if (j.usage) tokens = j.usage.completion_tokens;
          }
        }
      });
      res.on('end', () => {
        if (!done) reject(new Error('stream ended without [DONE]'));
        else resolve({ ttft_s: ttft, total_s: secs(), tokens, finish });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

const pct = (sorted, p) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] : null);

async function runLevel(srv, c, o, levelIndex) {
  await streamOne(srv, `[warmup ${c}] ${PASSAGES[0]}`, o);
  const results = [];
  const errors = [];
  const t0 = process.hrtime.bigint();
  await Promise.all(Array.from({ length: c }, async (_, client) => {
    for (let r = 0; r < o.rounds; r++) {
      const k = client * o.rounds + r;
      const prompt = `[L${levelIndex} C${client} R${r}] ${PASSAGES[k % PASSAGES.length]}`;
      try { results.push(await streamOne(srv, prompt, o)); } catch (e) { errors.push(e.message); }
    }
  }));
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  const tokens = results.reduce((s, x) => s + (x.tokens || 0), 0);
  const ttfts = results.map((x) => x.ttft_s).filter((x) => x !== null).sort((a, b) => a - b);
  const decode = results.filter((x) => x.ttft_s !== null && x.tokens > 1).map((x) => (x.tokens - 1) / (x.total_s - x.ttft_s));
  return {
    concurrency: c,
    requests: results.length,
    errors: errors.length,
    error_examples: errors.slice(0, 3),
    finish_length: results.filter((x) => x.finish === 'length').length,
    finish_other: results.filter((x) => x.finish !== 'length').map((x) => x.finish),
    generated_tokens: tokens,
    wall_s: r3(wall),
    tokens_per_s: r3(tokens / wall),
    ttft_s: { p50: r3(pct(ttfts, 0.5)), p90: r3(pct(ttfts, 0.9)), p99: r3(pct(ttfts, 0.99)), max: r3(ttfts[ttfts.length - 1]) },
    decode_tokens_per_s_per_request_mean: r3(decode.length ? decode.reduce((a, b) => a + b, 0) / decode.length : null),
  };
}

const o = parseArgs(process.argv.slice(2));
if (!fs.existsSync(o.model)) die(`model not found: ${o.model}`);
if (!fs.existsSync(o.kipp)) die(`kipp binary not found: ${o.kipp}`);
const machine = machineFacts();
console.log(`server_bench: ${path.basename(o.model)}, levels ${o.levels.join(',')}, ${o.rounds} requests per client, max_tokens ${o.maxTokens}`);
console.log(`machine: ${machine.cpu}, ${machine.cores} cores, ${machine.memory_gib} GiB, load ${machine.loadavg_at_start.join(' ')}`);
const srv = await startKipp(o);
console.log(`server: ${srv.command}`);
console.log('concurrency  requests  tokens   wall s   tokens/s   TTFT p50   p90      p99      finish=length');
const levels = [];
try {
  for (const [i, c] of o.levels.entries()) {
    const L = await runLevel(srv, c, o, i);
    levels.push(L);
    const f = (x) => (x === null ? '-' : x.toFixed(3));
    console.log(`${String(c).padStart(11)}  ${String(L.requests).padStart(8)}  ${String(L.generated_tokens).padStart(6)}  ${L.wall_s.toFixed(2).padStart(7)}  ${L.tokens_per_s.toFixed(2).padStart(9)}  ${f(L.ttft_s.p50).padStart(9)}  ${f(L.ttft_s.p90).padStart(7)}  ${f(L.ttft_s.p99).padStart(7)}  ${L.finish_length}/${L.requests}${L.errors ? `  ${L.errors} ERRORS: ${L.error_examples[0]}` : ''}`);
  }
} finally {
  srv.proc.kill('SIGTERM');
}
const lo = levels.find((l) => l.concurrency === Math.min(...o.levels));
const hi = levels.find((l) => l.concurrency === Math.max(...o.levels));
const ratio = lo && hi && lo.tokens_per_s ? r3(hi.tokens_per_s / lo.tokens_per_s) : null;
console.log(`throughput c${hi.concurrency}/c${lo.concurrency}: ${ratio}`);
const warnings = [];
for (const l of levels) {
  if (l.errors) warnings.push(`concurrency ${l.concurrency}: ${l.errors} requests failed`);
  if (l.finish_length !== l.requests) warnings.push(`concurrency ${l.concurrency}: ${l.requests - l.finish_length} requests did not generate to max_tokens (finish ${JSON.stringify(l.finish_other)})`);
}
for (const w of warnings) console.log(`warning: ${w}`);
const result = {
  benchmark: 'server',
  model: path.relative(REPO, o.model),
  model_bytes: fs.statSync(o.model).size,
  settings: { levels: o.levels, rounds_per_client: o.rounds, max_tokens: o.maxTokens, temperature: 0, stream: true, eos_logit_bias: -100, prompts: PASSAGES.length, ctx: o.ctx, threads: o.threads, kernels: process.env.KIPP_KERNELS || null },
  levels,
  [`ratio_c${hi.concurrency}_c${lo.concurrency}`]: ratio,
  warnings,
  machine,
  command: ['node', ...process.argv.slice(1).map((a, i) => (i === 0 ? path.relative(REPO, a) : a))].join(' '),
  server_command: srv.command,
  date: new Date().toISOString(),
};
fs.mkdirSync(path.dirname(o.out), { recursive: true });
fs.writeFileSync(o.out, `${JSON.stringify(result, null, 2)}\n`);
console.log(`wrote ${path.relative(process.cwd(), o.out)}`);
process.exitCode = warnings.length ? 1 : 0;
