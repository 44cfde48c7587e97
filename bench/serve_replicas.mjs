#!/usr/bin/env node
// serve_replicas.mjs: aggregate completion throughput of one `kipp serve` with T threads against
// R replicas with T/R threads each, both behind HAProxy (the configuration deploy/haproxy_cfg.sh
// writes; requests carry no conversation key, so the balancer sends each to the replica with the
// fewest connections), under the same concurrent load.
//
// Per repetition and layout: fresh replicas and balancer, one unmeasured warm-up request per
// replica, then CLIENTS clients each sending ROUNDS whole (non-streaming) completions one after
// another, every prompt unique (a leading tag) so the prefix cache does not help, greedy, with the
// end-of-text tokens biased by -100 so each generates exactly MAX_TOKENS (checked). Throughput =
// all completion tokens / wall time of the load. The layouts alternate for REPS repetitions; the
// result holds every run, the medians and the ratio of the medians. Run it on a quiet machine.
// Results go to JSON (default bench/results/serve-replicas.json) with the machine facts and the
// commands.
//
// Usage: node bench/serve_replicas.mjs [options]
//   --model PATH        GGUF to serve (default build/release/models/qwen3-0.6b-bf16.gguf)
//   --kipp PATH         kipp binary (default build/release/kipp; env KIPP)
//   --haproxy PATH      HAProxy (default haproxy on PATH, else /usr/sbin/haproxy; env HAPROXY)
//   --threads T         compute threads in all (default 2)
//   --replicas R        replicas of the second layout (default 2; T/R threads each)
//   --clients N         concurrent clients (default 8)
//   --rounds N          requests per client (default 3)
//   --max-tokens N      generated tokens per request (default 64)
//   --reps N            repetitions of each layout (default 3)
//   --out PATH          result JSON (default bench/results/serve-replicas.json)
//   --help              this text
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';

import { EOS_IDS, REPO, freePort, machineFacts, median, r3, repoRelative, startServer, usage } from './server_common.mjs';

function die(msg) {
  console.error(`serve_replicas: error: ${msg}`);
  process.exit(2);
}

function parseArgs(argv) {
  const onPath = () => { try { return execFileSync('sh', ['-c', 'command -v haproxy'], { encoding: 'utf8' }).trim(); } catch { return '/usr/sbin/haproxy'; } };
  const o = { model: path.join(REPO, 'build/release/models/qwen3-0.6b-bf16.gguf'), kipp: process.env.KIPP || path.join(REPO, 'build/release/kipp'),
    haproxy: process.env.HAPROXY || onPath(), threads: 2, replicas: 2, clients: 8, rounds: 3, maxTokens: 64, reps: 3,
    out: path.join(REPO, 'bench/results/serve-replicas.json') };
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
      case '--haproxy': o.haproxy = path.resolve(val()); break;
      case '--threads': o.threads = int(); break;
      case '--replicas': o.replicas = int(); break;
      case '--clients': o.clients = int(); break;
      case '--rounds': o.rounds = int(); break;
      case '--max-tokens': o.maxTokens = int(); break;
      case '--reps': o.reps = int(); break;
      case '--out': o.out = path.resolve(val()); break;
      default: die(`unknown argument '${argv[i]}' (see --help)`);
    }
  }
  if (o.threads % o.replicas !== 0) die(`--threads ${o.threads} does not divide among --replicas ${o.replicas}`);
  return o;
}

const o = parseArgs(process.argv.slice(2));
process.setMaxListeners(0); // every replica and balancer started registers its kill-on-exit listener
const modelName = path.basename(o.model).replace(/\.gguf$/, '');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kipp-serve-replicas-'));
process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));

// One whole completion; resolves {tokens, seconds}.
function complete(target, prompt) {
  const body = JSON.stringify({ model: modelName, prompt, max_tokens: o.maxTokens, temperature: 0,
    logit_bias: Object.fromEntries(EOS_IDS.map((id) => [id, -100])) });
  const t0 = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    const req = http.request({ host: target.host, port: target.port, method: 'POST', path: '/v1/completions', agent: false,
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => {
        if (res.statusCode !== 200) return reject(new Error(`HTTP ${res.statusCode}: ${text.slice(0, 300)}`));
        const json = JSON.parse(text);
        const tokens = json.usage.completion_tokens;
        if (tokens !== o.maxTokens || json.choices[0].finish_reason !== 'length') return reject(new Error(`expected ${o.maxTokens} tokens to the length cap, got ${tokens} (${json.choices[0].finish_reason})`));
        resolve({ tokens, seconds: Number(process.hrtime.bigint() - t0) / 1e9, replica: res.headers['x-kipp-replica'] });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

// `replicas` kipp serve processes with `threads` threads each behind a fresh HAProxy.
async function startLayout(replicas, threads) {
  const args = ['-m', o.model, '--threads', String(threads), '--max-batch', String(o.clients), '--ctx', '2048'];
  const servers = await Promise.all([...Array(replicas)].map(() => startServer(o.kipp, args)));
  fs.writeFileSync(path.join(dir, 'replicas'), servers.map((s) => `127.0.0.1:${s.port}\n`).join(''));
  const port = await freePort();
  const cfg = execFileSync(path.join(REPO, 'deploy/haproxy_cfg.sh'), [path.join(dir, 'replicas'), `127.0.0.1:${port}`], { encoding: 'utf8' });
  fs.writeFileSync(path.join(dir, 'haproxy.cfg'), cfg);
  const balancer = spawn(o.haproxy, ['-db', '-f', path.join(dir, 'haproxy.cfg')], { stdio: 'ignore' });
  process.on('exit', () => { try { balancer.kill('SIGKILL'); } catch { /* gone */ } });
  const target = { host: '127.0.0.1', port };
  for (const s of servers) await complete(s, 'warm up');  // loads the weights into the page cache
  for (let tries = 0; ; tries++) {  // the balancer answers once it listens and its checks passed
    try { await complete(target, 'warm up'); break; } catch (e) { if (tries > 100) throw e; await new Promise((r) => setTimeout(r, 100)); }
  }
  const stop = async () => {
    for (const s of servers) s.proc.kill('SIGTERM');
    balancer.kill('SIGTERM');
    await Promise.all([...servers.map((s) => new Promise((r) => (s.proc.exitCode !== null ? r() : s.proc.on('exit', r)))),
      new Promise((r) => (balancer.exitCode !== null ? r() : balancer.on('exit', r)))]);
  };
  return { target, stop, serverCommand: servers[0].command };
}

async function runLoad(target, tag) {
  const loadBefore = os.loadavg()[0];
  const t0 = process.hrtime.bigint();
  const perRequest = [];
  const byReplica = {};
  await Promise.all([...Array(o.clients).keys()].map(async (c) => {
    for (let i = 0; i < o.rounds; i++) {
      const r = await complete(target, `[${tag} ${c}.${i}] Write a long story about a lighthouse keeper and the sea.`);
      perRequest.push(r);
      byReplica[r.replica] = (byReplica[r.replica] || 0) + 1;
    }
  }));
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  const tokens = perRequest.reduce((s, r) => s + r.tokens, 0);
  return { wall_s: r3(wall), generated_tokens: tokens, tokens_per_s: r3(tokens / wall), request_s_p50: r3(median(perRequest.map((r) => r.seconds))),
    requests_by_replica: Object.values(byReplica).sort((a, b) => b - a), loadavg_1min_before_after: [loadBefore, os.loadavg()[0]].map((x) => Math.round(x * 100) / 100) };
}

const layouts = [
  { name: `1x${o.threads}`, replicas: 1, threads: o.threads },
  { name: `${o.replicas}x${o.threads / o.replicas}`, replicas: o.replicas, threads: o.threads / o.replicas },
];
const machine = machineFacts();
const runs = [];
let serverCommands = {};
console.log(`serve_replicas: ${modelName}, ${o.clients} clients x ${o.rounds} requests x ${o.maxTokens} tokens, ${o.reps} repetitions`);
for (let rep = 1; rep <= o.reps; rep++) {
  for (const layout of layouts) {
    const { target, stop, serverCommand } = await startLayout(layout.replicas, layout.threads);
    serverCommands[layout.name] = serverCommand;
    try {
      const result = await runLoad(target, `${layout.name} ${rep}`);
      runs.push({ layout: layout.name, replicas: layout.replicas, threads_per_replica: layout.threads, rep, ...result });
      console.log(`  rep ${rep} ${layout.name.padEnd(5)} ${String(result.tokens_per_s).padStart(9)} tokens/s  (${result.wall_s} s, by replica ${result.requests_by_replica.join('/')}, load ${result.loadavg_1min_before_after.join(' -> ')})`);
    } finally {
      await stop();
    }
  }
}
const medians = Object.fromEntries(layouts.map((l) => [l.name, r3(median(runs.filter((r) => r.layout === l.name).map((r) => r.tokens_per_s)))]));
const [one, many] = layouts.map((l) => medians[l.name]);
const ratio = r3(many / one);
console.log(`median tokens/s: ${layouts.map((l) => `${l.name} ${medians[l.name]}`).join(', ')}; ${layouts[1].name} / ${layouts[0].name} = ${ratio}`);

const haproxyVersion = execFileSync(o.haproxy, ['-v'], { encoding: 'utf8' }).split('\n')[0];
const result = {
  benchmark: 'serve-replicas', model: repoRelative([o.model]), model_bytes: fs.statSync(o.model).size,
  settings: { threads_in_all: o.threads, layouts: layouts.map((l) => l.name), clients: o.clients, rounds_per_client: o.rounds, max_tokens: o.maxTokens,
    repetitions: o.reps, stream: false, temperature: 0, eos_logit_bias: -100, routing: 'least connections (no conversation key)' },
  medians_tokens_per_s: medians, ratio_replicas_over_one: ratio, runs,
  machine: { ...machine, haproxy: haproxyVersion },
  command: repoRelative(['node', ...process.argv.slice(1)]), server_commands: serverCommands,
  balancer_config: 'deploy/haproxy_cfg.sh', date: new Date().toISOString(),
};
fs.mkdirSync(path.dirname(o.out), { recursive: true });
fs.writeFileSync(o.out, `${JSON.stringify(result, null, 2)}\n`);
console.log(`wrote ${repoRelative([o.out])}`);
