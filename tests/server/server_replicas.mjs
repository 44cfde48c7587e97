// Two `kipp serve` replicas behind HAProxy with the configuration deploy/haproxy_cfg.sh writes,
// all on loopback. The replicas are set up as on separate hosts (deploy/README.md): bound to the
// wildcard address with an API key, which the balancer passes through with the client's Host.
// (a) conversation affinity: the second turn of a conversation with a prompt_cache_key (or an
//     X-Session-Id header) lands on the replica of the first (X-Kipp-Replica names it) and reports
//     cached_tokens > 0, while the same turn sent straight to the other replica reports 0;
//     conversations spread over both replicas;
// (b) SIGKILL of one replica under concurrent load (streams and whole responses, with and without
//     a key): every request sent after the kill succeeds, failures are only requests already under
//     way, the balancer marks the replica down within DOWN_MS and then sends it nothing (its
//     session count in `show stat` stays put);
// (c) SIGTERM of one replica under the same load: draining loses no request at all, every
//     response complete, and the replica exits 0.
//
// Usage: node tests/server/server_replicas.mjs   (env KIPP, KIPP_MODELS, HAPROXY; see lib.mjs)
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import {
  main, startServer, post, streamRequest, collectStream, sleep, trunc, words, REPO, TINY, TINY_NAME, TOK_EOS,
} from './lib.mjs';

// HAProxy: $HAPROXY, else the one on PATH, else Debian's (in /usr/sbin, often not on a user's PATH).
const HAPROXY = process.env.HAPROXY || (() => {
  try { return execFileSync('sh', ['-c', 'command -v haproxy'], { encoding: 'utf8' }).trim(); } catch { return '/usr/sbin/haproxy'; }
})();
const REPLICA = { host: '0.0.0.0', apiKey: `key-${process.pid}`, args: ['--threads', '1', '--max-batch', '8'] };
const NO_EOS = Object.fromEntries(TOK_EOS.map((id) => [id, -100]));
const DOWN_MS = 3000; // health checks: 1 s, then 250 ms once failing; 2 failures mark a replica down
const LOAD_CLIENTS = 6;
const LOAD_TOKENS = 24;

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kipp-replicas-test-'));
process.on('exit', () => { try { fs.rmSync(dir, { recursive: true, force: true }); } catch { /* ignore */ } });

async function freePort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

// The balancer: HAProxy in the foreground on the configuration of deploy/haproxy_cfg.sh.
async function startBalancer(replicas) {
  fs.writeFileSync(path.join(dir, 'replicas'), replicas.map((r) => `127.0.0.1:${r.port}\n`).join(''));
  const port = await freePort();
  const socket = path.join(dir, 'haproxy.sock');
  const cfg = execFileSync(path.join(REPO, 'deploy/haproxy_cfg.sh'), [path.join(dir, 'replicas'), `127.0.0.1:${port}`, socket], { encoding: 'utf8' });
  fs.writeFileSync(path.join(dir, 'haproxy.cfg'), cfg);
  const proc = spawn(HAPROXY, ['-db', '-f', path.join(dir, 'haproxy.cfg')], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  proc.stdout.on('data', (d) => (log += d));
  proc.stderr.on('data', (d) => (log += d));
  const exited = new Promise((r) => proc.on('exit', r));
  process.on('exit', () => { try { proc.kill('SIGKILL'); } catch { /* gone */ } });
  return { proc, exited, host: '127.0.0.1', port, socket, apiKey: REPLICA.apiKey, log: () => log };
}

// `show stat` of the admin socket: {"backend/server": {status, stot}}.
async function showStat(balancer) {
  const text = await new Promise((resolve, reject) => {
    const c = net.connect(balancer.socket);
    let out = '';
    c.setEncoding('utf8');
    c.on('data', (d) => (out += d));
    c.on('end', () => resolve(out));
    c.on('error', reject);
    c.write('show stat\n');
  });
  const lines = text.trim().split('\n');
  const head = lines[0].replace(/^# /, '').split(',');
  const stats = {};
  for (const line of lines.slice(1)) {
    const f = Object.fromEntries(line.split(',').map((v, i) => [head[i], v]));
    stats[`${f.pxname}/${f.svname}`] = { status: f.status, stot: Number(f.stot) };
  }
  return stats;
}
// A replica's state in the balancer: 'UP' or 'DOWN' (the first word of the conversation
// backend's status), and its sessions in both backends.
async function replicaStat(balancer, replica) {
  const stats = await showStat(balancer);
  const name = `127.0.0.1:${replica.port}`;
  const a = stats[`kipp_by_conversation/${name}`];
  const b = stats[`kipp_least_connections/${name}`];
  return { status: a ? a.status.split(' ')[0] : 'missing', sessions: (a ? a.stot : 0) + (b ? b.stot : 0) };
}
async function waitStatus(balancer, replica, status, timeoutMs) {
  const t0 = Date.now();
  for (;;) {
    const s = await replicaStat(balancer, replica).catch(() => ({ status: 'no answer' })); // not started yet
    if (s.status === status) return Date.now() - t0;
    if (Date.now() - t0 > timeoutMs) return null;
    await sleep(50);
  }
}

// A chat turn through `target` (the balancer or a replica); {status, replica, cached, reply, text}.
async function turn(target, messages, { key, header } = {}) {
  const body = { model: TINY_NAME, messages, max_tokens: 4, temperature: 0 };
  if (key) body.prompt_cache_key = key;
  const r = await post(target, '/v1/chat/completions', body, { headers: header ? { 'X-Session-Id': header } : {} });
  const ok = r.status === 200 && r.json;
  return {
    status: r.status, replica: r.headers['x-kipp-replica'], text: r.text,
    cached: ok ? r.json.usage.prompt_tokens_details.cached_tokens : null,
    reply: ok ? r.json.choices[0].message.content || '' : null,
  };
}
const firstMessages = (seed) => [{ role: 'system', content: `You are assistant ${seed}. ${words(120, seed)}` }, { role: 'user', content: words(30, seed + 1000) }];
const secondMessages = (seed, reply) => [...firstMessages(seed), { role: 'assistant', content: reply }, { role: 'user', content: 'And then?' }];

// Clients sending requests one after another until stopped: streams and whole responses, half
// with a conversation key. Each record: {started, ended, ok, stream, replica, what}.
function startLoad(balancer) {
  const records = [];
  let running = true;
  const client = async (c) => {
    for (let i = 0; running; i++) {
      const stream = i % 2 === 1;
      const body = { model: TINY_NAME, prompt: `${c} ${i} ${words(20, c * 100 + i)}`, max_tokens: LOAD_TOKENS, temperature: 0, logit_bias: NO_EOS };
      if (c % 2 === 0) body.prompt_cache_key = `load-${c}`;
      const rec = { started: Date.now(), stream, ok: false };
      try {
        if (stream) {
          const st = await streamRequest(balancer, '/v1/completions', { ...body, stream: true, stream_options: { include_usage: true } }, { timeoutMs: 60000 });
          rec.replica = st.headers['x-kipp-replica'];
          const usage = st.chunks.length ? st.chunks.at(-1).usage : null;
          rec.ok = st.status === 200 && st.done && st.errors.length === 0 && usage && usage.completion_tokens === LOAD_TOKENS &&
            collectStream(st, 'completion').finish.get(0)?.[0] === 'length';
          rec.what = `stream ${st.status} done=${st.done} errors ${trunc(st.errors)} ${trunc(st.text)}`;
        } else {
          const r = await post(balancer, '/v1/completions', body, { timeoutMs: 60000 });
          rec.replica = r.headers['x-kipp-replica'];
          rec.ok = r.status === 200 && r.json.usage.completion_tokens === LOAD_TOKENS && r.json.choices[0].finish_reason === 'length';
          rec.what = `${r.status} ${trunc(r.text, 200)}`;
        }
      } catch (e) {
        rec.what = e.message;
      }
      rec.ended = Date.now();
      records.push(rec);
    }
  };
  const done = Promise.all([...Array(LOAD_CLIENTS).keys()].map(client));
  return { records, stop: async () => { running = false; await done; return records; } };
}
const countBy = (records, f) => records.reduce((m, r) => { const k = f(r); m[k] = (m[k] || 0) + 1; return m; }, {});

await main('server_replicas', async (t) => {
  if (!t.ok(fs.existsSync(HAPROXY), `no HAProxy at ${HAPROXY} (set HAPROXY; scripts/setup.sh installs it)`)) return;
  const replicas = await Promise.all([startServer(REPLICA), startServer(REPLICA)]);
  const name = (r) => `127.0.0.1:${r.port}`;
  const balancer = await startBalancer(replicas);
  try {
    for (const r of replicas) t.ok((await waitStatus(balancer, r, 'UP', 10000)) !== null, `replica ${name(r)} not UP in the balancer within 10 s: ${balancer.log()}`);

    await t.section('the API key and a Host header naming the balancer pass through', async () => {
      const body = { model: TINY_NAME, prompt: 'Hi', max_tokens: 1 };
      const named = await post(balancer, '/v1/completions', body, { headers: { Host: 'kipp.example:8000' } });
      t.eq(named.status, 200, `a completion with Host kipp.example:8000 through the balancer (${trunc(named.text)})`);
      const keyless = await post(balancer, '/v1/completions', body, { noAuth: true });
      t.eq(keyless.status, 401, 'a completion without the API key through the balancer');
    });

    await t.section('(a) a conversation stays on the replica that holds its prefix', async () => {
      const seen = new Set();
      for (let k = 0; k < 24 && (k < 4 || seen.size < 2); k++) {
        const key = `conversation-${k}`;
        const first = await turn(balancer, firstMessages(k), { key });
        if (!t.ok(first.status === 200, `${key} turn 1: ${first.status} ${trunc(first.text)}`)) return;
        seen.add(first.replica);
        const second = await turn(balancer, secondMessages(k, first.reply), { key });
        t.eq(second.replica, first.replica, `${key}: replica of turn 2 (turn 1 went to ${first.replica})`);
        t.ok(second.cached > 0, `${key} turn 2 through the balancer: cached_tokens ${second.cached}, expected > 0`);
        if (k === 0) {
          const other = replicas.find((r) => name(r) !== first.replica);
          const direct = await turn(other, secondMessages(k, first.reply));
          t.eq(direct.cached, 0, `${key} turn 2 sent straight to the other replica ${name(other)}: cached_tokens`);
          t.info(`${key}: turn 2 cached ${second.cached} tokens on ${second.replica}, ${direct.cached} on the other replica`);
        }
      }
      t.eq([...seen].sort(), replicas.map(name).sort(), 'replicas the conversations landed on');
      const first = await turn(balancer, firstMessages(99), { header: 'session-99' });
      const second = await turn(balancer, secondMessages(99, first.reply || ''), { header: 'session-99' });
      t.ok(first.status === 200 && second.replica === first.replica && second.cached > 0,
        `X-Session-Id: turn 2 on ${second.replica} (turn 1 ${first.replica}) with cached_tokens ${second.cached}`);
    });

    await t.section('(b) SIGKILL of a replica under load', async () => {
      const [victim, survivor] = replicas;
      const load = startLoad(balancer);
      await sleep(1500);
      const killedAt = Date.now();
      victim.stopRequested = true;
      victim.proc.kill('SIGKILL');
      const downMs = await waitStatus(balancer, victim, 'DOWN', 10000);
      t.ok(downMs !== null && downMs <= DOWN_MS, `the killed replica marked DOWN after ${downMs} ms (at most ${DOWN_MS} expected)`);
      const sessionsAtDown = (await replicaStat(balancer, victim)).sessions;
      const downAt = Date.now();
      await sleep(2000);
      const records = await load.stop();
      t.eq((await replicaStat(balancer, victim)).sessions, sessionsAtDown, 'sessions the balancer sent to the killed replica after it was marked DOWN');
      const failed = records.filter((r) => !r.ok);
      const lateFailures = failed.filter((r) => r.started >= killedAt);
      t.ok(lateFailures.length === 0, `requests sent after the kill failed: ${trunc(lateFailures.map((r) => r.what))}`);
      t.ok(failed.length <= LOAD_CLIENTS, `${failed.length} failures, more than the ${LOAD_CLIENTS} requests under way at the kill`);
      const afterDown = records.filter((r) => r.started >= downAt);
      t.ok(afterDown.length > 0 && afterDown.every((r) => r.replica === name(survivor)), `requests after the DOWN mark went to ${trunc(countBy(afterDown, (r) => r.replica))}, expected only ${name(survivor)}`);
      t.ok(records.some((r) => r.replica === name(victim) && r.ended < killedAt), 'the killed replica served nothing before the kill: the load did not reach it');
      t.info(`${records.length} requests, ${failed.length} failed (under way at the kill: ${trunc(failed.map((r) => `${r.stream ? 'stream' : 'whole'}: ${r.what}`))}); DOWN ${downMs} ms after the kill; by replica ${JSON.stringify(countBy(records, (r) => r.replica))}`);
    });

    await t.section('(c) SIGTERM of a replica under load: draining loses nothing', async () => {
      const restarted = await startServer({ ...REPLICA, port: replicas[0].port });
      t.eq(restarted.port, replicas[0].port, 'port of the restarted replica');
      t.ok((await waitStatus(balancer, restarted, 'UP', 10000)) !== null, 'the restarted replica is not UP in the balancer within 10 s');
      const load = startLoad(balancer);
      await sleep(1500);
      const termAt = Date.now();
      restarted.stopRequested = true;
      restarted.proc.kill('SIGTERM');
      const downMs = await waitStatus(balancer, restarted, 'DOWN', 10000);
      t.ok(downMs !== null && downMs <= DOWN_MS, `the draining replica marked DOWN after ${downMs} ms (at most ${DOWN_MS} expected)`);
      await Promise.race([restarted.exitPromise, sleep(15000)]);
      t.eq(restarted.exitCode, 0, `exit code of the drained replica (stderr ${trunc(restarted.stderrTail(), 600)})`);
      await sleep(1000);
      const records = await load.stop();
      const failed = records.filter((r) => !r.ok);
      t.ok(failed.length === 0, `${failed.length} of ${records.length} requests failed while a replica drained: ${trunc(failed.map((r) => r.what), 800)}`);
      const drainedThere = records.filter((r) => r.replica === name(restarted) && r.started < termAt && r.ended > termAt);
      t.info(`${records.length} requests, none lost; ${drainedThere.length} finished on the draining replica after SIGTERM; DOWN ${downMs} ms after SIGTERM; by replica ${JSON.stringify(countBy(records, (r) => r.replica))}`);
      t.info(`drained replica: ${(/draining: .*|drained, stopping/.exec(restarted.stderr) || [''])[0]}`);
    });
  } finally {
    balancer.proc.kill('SIGTERM');
    await Promise.race([balancer.exited, sleep(5000)]);
  }
});
