// Shared helpers of the `kipp serve` black-box tests (tests/server/*.mjs): start and stop a
// server, HTTP over node:http (so a test can send any Host header), SSE parsing, Prometheus
// text parsing, the OpenAI error-shape check, token counts from `kipp tokenize` / `kipp render`
// (an oracle independent of the server), and a checker that collects failures and exits non-zero.
//
// Environment: KIPP (the kipp binary; default build/release/kipp), KIPP_MODELS (the folder with
// tiny-bf16.gguf and chat-tiny-base.gguf; default build/release/models).
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual } from 'node:util';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const KIPP = process.env.KIPP || path.join(REPO, 'build/release/kipp');
export const MODELS = process.env.KIPP_MODELS || path.join(REPO, 'build/release/models');
export const TINY = path.join(MODELS, 'tiny-bf16.gguf');
export const TINY_NAME = 'tiny-bf16';
export const BASE_MODEL = path.join(MODELS, 'chat-tiny-base.gguf');
export const BASE_NAME = 'chat-tiny-base';
// Token ids of the real Qwen3 tokenizer the tiny models embed (tests/CMakeLists.txt checks them).
export const TOK_HELLO = 9707; // "Hello"
export const TOK_THINK = 151667; // <think>
export const TOK_EOS = [151645, 151643]; // <|im_end|>, <|endoftext|>

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const trunc = (s, n = 300) => {
  const str = typeof s === 'string' ? s : JSON.stringify(s);
  if (str === undefined) return String(str);
  return str.length > n ? `${str.slice(0, n)}...(${str.length} chars)` : str;
};
export const fmt = (v) => trunc(JSON.stringify(v), 400);

// ---------------------------------------------------------------------------------------------
// The checker: every failed check is printed at once and counted; finish() exits 1 on any.
export class Checker {
  constructor(name) {
    this.name = name;
    this.failures = [];
    this.checks = 0;
    this.t0 = Date.now();
    this.current = '';
  }
  ok(cond, msg) {
    this.checks++;
    if (!cond) {
      const m = this.current ? `[${this.current}] ${msg}` : msg;
      this.failures.push(m);
      console.log(`FAIL: ${m}`);
    }
    return !!cond;
  }
  fail(msg) {
    return this.ok(false, msg);
  }
  eq(got, expected, msg) {
    return this.ok(isDeepStrictEqual(got, expected), `${msg}: expected ${fmt(expected)}, got ${fmt(got)}`);
  }
  info(msg) {
    console.log(`info: ${msg}`);
  }
  async section(name, fn) {
    const prev = this.current;
    this.current = name;
    const t = Date.now();
    console.log(`-- ${name}`);
    try {
      await fn();
    } catch (e) {
      this.fail(`exception: ${e && e.stack ? e.stack : e}`);
    }
    console.log(`   (${((Date.now() - t) / 1000).toFixed(1)} s)`);
    this.current = prev;
  }
  finish() {
    const s = ((Date.now() - this.t0) / 1000).toFixed(1);
    if (this.failures.length) {
      console.log(`\n${this.name}: ${this.failures.length} of ${this.checks} checks FAILED (${s} s):`);
      for (const f of this.failures) console.log(`  - ${f}`);
      process.exitCode = 1;
    } else {
      console.log(`\n${this.name}: all ${this.checks} checks passed (${s} s)`);
      process.exitCode = 0;
    }
  }
}

// Runs a test body with a Checker; stops every server still running, checks none crashed, exits.
export async function main(name, body) {
  const t = new Checker(name);
  const hard = setTimeout(() => {
    console.log(`FAIL: ${name}: the test itself hung (no finish after ${HARD_LIMIT_S} s); killing servers`);
    killAll();
    process.exit(1);
  }, HARD_LIMIT_S * 1000);
  hard.unref();
  try {
    await body(t);
  } catch (e) {
    t.fail(`exception: ${e && e.stack ? e.stack : e}`);
  }
  t.current = '';
  for (const srv of [...servers]) {
    if (srv.exited) {
      if (!srv.stopRequested) t.fail(`server ${srv.describe()} died during the test: ${srv.exitDescription()}; stderr tail:\n${srv.stderrTail()}`);
    } else {
      await srv.stop(t);
    }
  }
  t.finish();
}
const HARD_LIMIT_S = Number(process.env.KIPP_SERVER_TEST_HARD_LIMIT_S || 300);

// ---------------------------------------------------------------------------------------------
// Servers.
const servers = new Set();
function killAll() {
  for (const srv of servers) if (!srv.exited) try { srv.proc.kill('SIGKILL'); } catch { /* gone */ }
}
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => { killAll(); process.exit(130); });

export const LISTEN_RE = /^kipp serve: listening on http:\/\/(\[[^\]]+\]|[^:\s/]+):(\d+)$/;

export class Server {
  constructor(proc, args) {
    this.proc = proc;
    this.args = args;
    this.pid = proc.pid;
    this.stdoutLines = [];
    this.stderr = '';
    this.exited = false;
    this.exitCode = null;
    this.exitSignal = null;
    this.stopRequested = false;
    this.apiKey = null;
    this.exitPromise = new Promise((resolve) => {
      proc.on('exit', (code, signal) => {
        this.exited = true;
        this.exitCode = code;
        this.exitSignal = signal;
        this.exitTime = Date.now();
        servers.delete(this);
        resolve();
      });
    });
  }
  get base() {
    return `http://${this.host}:${this.port}`;
  }
  get hostHeader() {
    return `${this.host}:${this.port}`;
  }
  describe() {
    return `\`kipp ${this.args.join(' ')}\` (pid ${this.pid})`;
  }
  exitDescription() {
    return this.exitSignal ? `killed by ${this.exitSignal}` : `exit code ${this.exitCode}`;
  }
  stderrTail(n = 3000) {
    return this.stderr.length > n ? this.stderr.slice(-n) : this.stderr;
  }
  alive() {
    return !this.exited;
  }
  // SIGTERM (or `signal`), then the exit must come with code 0 within timeoutMs (checked on t).
  async stop(t, { signal = 'SIGTERM', timeoutMs = 10000 } = {}) {
    if (this.exited) return { code: this.exitCode, signal: this.exitSignal, ms: 0 };
    this.stopRequested = true;
    const t0 = Date.now();
    this.proc.kill(signal);
    let timer;
    const done = await Promise.race([this.exitPromise.then(() => true), new Promise((r) => { timer = setTimeout(() => r(false), timeoutMs); })]);
    clearTimeout(timer);
    const ms = Date.now() - t0;
    if (!done) {
      this.proc.kill('SIGKILL');
      await this.exitPromise;
      if (t) t.fail(`server ${this.describe()} did not exit within ${timeoutMs} ms of ${signal}; killed`);
      return { code: null, signal: 'SIGKILL', ms };
    }
    if (t) t.ok(this.exitCode === 0, `server ${this.describe()} exit after ${signal}: expected code 0, got ${this.exitDescription()}; stderr tail:\n${this.stderrTail()}`);
    return { code: this.exitCode, signal: this.exitSignal, ms };
  }
}

// Starts `kipp serve -m MODEL --port PORT ARGS...` (PORT 0: any free one) and waits for its listening line.
export async function startServer({ model = TINY, args = [], apiKey = null, readyTimeoutMs = 90000, host = '127.0.0.1', port = 0 } = {}) {
  const full = ['serve', '-m', model, '--host', host, '--port', String(port), ...(apiKey ? ['--api-key', apiKey] : []), ...args];
  const proc = spawn(KIPP, full, { stdio: ['ignore', 'pipe', 'pipe'] });
  const srv = new Server(proc, full);
  srv.apiKey = apiKey;
  servers.add(srv);
  proc.stderr.setEncoding('utf8');
  proc.stderr.on('data', (d) => {
    srv.stderr += d;
    if (srv.stderr.length > 200000) srv.stderr = srv.stderr.slice(-100000);
  });
  proc.stdout.setEncoding('utf8');
  let buf = '';
  const ready = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no listening line from ${srv.describe()} within ${readyTimeoutMs} ms; stdout ${fmt(srv.stdoutLines)}; stderr tail:\n${srv.stderrTail()}`)), readyTimeoutMs);
    proc.stdout.on('data', (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i).replace(/\r$/, '');
        buf = buf.slice(i + 1);
        srv.stdoutLines.push(line);
        const m = LISTEN_RE.exec(line);
        if (m && srv.port === undefined) {
          srv.host = m[1];
          srv.port = Number(m[2]);
          clearTimeout(timer);
          resolve();
        }
      }
    });
    proc.on('error', (e) => { clearTimeout(timer); reject(new Error(`cannot run ${KIPP}: ${e.message}`)); });
    srv.exitPromise.then(() => {
      clearTimeout(timer);
      reject(new Error(`${srv.describe()} exited (${srv.exitDescription()}) before its listening line; stdout ${fmt(srv.stdoutLines)}; stderr tail:\n${srv.stderrTail()}`));
    });
  });
  await ready;
  return srv;
}

// Runs `kipp serve ARGS` expecting it to exit on its own; resolves {code, signal, stdout, stderr, ms}.
export function runServeExpectExit(args, timeoutMs = 30000) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const proc = spawn(KIPP, ['serve', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (d) => {
      stdout += d;
      // It serves although it should have refused: stop it now rather than at the timeout.
      if (/listening on/.test(stdout)) proc.kill('SIGTERM');
    });
    proc.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
    proc.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, ms: Date.now() - t0, timedOut: signal === 'SIGKILL' });
    });
  });
}

// ---------------------------------------------------------------------------------------------
// HTTP.
// request(srv, METHOD, PATH, {json, body, headers, noAuth, timeoutMs}) -> {status, headers, text, json, ms}.
// The server's API key (if any) is sent as a Bearer token unless noAuth or an authorization header.
export function request(srv, method, urlPath, opts = {}) {
  const { json, timeoutMs = 120000, noAuth = false } = opts;
  let body = opts.body;
  const headers = { ...(opts.headers || {}) };
  const lower = Object.fromEntries(Object.keys(headers).map((k) => [k.toLowerCase(), k]));
  if (json !== undefined) {
    body = JSON.stringify(json);
    if (!lower['content-type']) headers['Content-Type'] = 'application/json';
  }
  if (srv.apiKey && !noAuth && !lower.authorization) headers.Authorization = `Bearer ${srv.apiKey}`;
  if (body !== undefined && !lower['content-length']) headers['Content-Length'] = Buffer.byteLength(body);
  const t0 = Date.now();
  return new Promise((resolve, reject) => {
    const req = http.request({ host: srv.host.replace(/^\[|\]$/g, ''), port: srv.port, method, path: urlPath, headers, agent: opts.agent || false }, (res) => {
      const parts = [];
      res.on('data', (d) => parts.push(d));
      res.on('end', () => {
        clearTimeout(timer);
        const text = Buffer.concat(parts).toString('utf8');
        let parsed;
        try { parsed = JSON.parse(text); } catch { parsed = undefined; }
        resolve({ status: res.statusCode, headers: res.headers, text, json: parsed, ms: Date.now() - t0 });
      });
      res.on('error', (e) => { clearTimeout(timer); reject(e); });
    });
    const timer = setTimeout(() => {
      req.destroy(new Error(`${method} ${urlPath}: no complete response within ${timeoutMs} ms`));
    }, timeoutMs);
    req.on('error', (e) => { clearTimeout(timer); reject(new Error(`${method} ${urlPath}: ${e.message}`)); });
    if (body !== undefined) req.write(body);
    req.end();
  });
}
export const post = (srv, p, json, opts = {}) => request(srv, 'POST', p, { ...opts, json });
export const get = (srv, p, opts = {}) => request(srv, 'GET', p, opts);

// Streaming POST: parses the SSE stream. onEvent(ev, state) may return 'abort' to destroy the
// connection. Resolves {status, headers, events, chunks, comments, done, afterDone, errors, text
// (error body when not 200), firstChunkMs, ms, aborted, raw}.
export function streamRequest(srv, urlPath, json, opts = {}) {
  const { timeoutMs = 120000, onEvent } = opts;
  const body = JSON.stringify(json);
  const headers = { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), Accept: 'text/event-stream', ...(opts.headers || {}) };
  if (srv.apiKey && !opts.noAuth) headers.Authorization = `Bearer ${srv.apiKey}`;
  const t0 = Date.now();
  return new Promise((resolve, reject) => {
    const st = { status: 0, headers: {}, events: [], chunks: [], comments: 0, done: false, afterDone: [], errors: [], text: '', raw: '', firstChunkMs: null, ms: 0, aborted: false, badJson: [] };
    let settled = false;
    const finish = (err) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      st.ms = Date.now() - t0;
      if (err) reject(err); else resolve(st);
    };
    const req = http.request({ host: srv.host.replace(/^\[|\]$/g, ''), port: srv.port, method: 'POST', path: urlPath, headers, agent: false }, (res) => {
      st.status = res.statusCode;
      st.headers = res.headers;
      res.setEncoding('utf8');
      let buf = '';
      res.on('data', (d) => {
        if (st.raw.length < 1_000_000) st.raw += d;
        if (st.status !== 200) { st.text += d; return; }
        buf += d;
        let m;
        while ((m = /\r?\n\r?\n/.exec(buf))) {
          const block = buf.slice(0, m.index);
          buf = buf.slice(m.index + m[0].length);
          const dataLines = [];
          for (const line of block.split(/\r?\n/)) {
            if (line.startsWith(':')) {
              st.comments++;
              if (st.firstChunkMs === null) st.commentsBeforeFirstChunk = (st.commentsBeforeFirstChunk || 0) + 1;
            }
            else if (line.startsWith('data:')) dataLines.push(line.slice(5).replace(/^ /, ''));
          }
          if (!dataLines.length) continue;
          const data = dataLines.join('\n');
          if (st.done) { st.afterDone.push(data); continue; }
          const ev = { data, json: undefined, ms: Date.now() - t0 };
          if (data === '[DONE]') st.done = true;
          else {
            try { ev.json = JSON.parse(data); } catch { st.badJson.push(data); }
            if (ev.json && ev.json.error) st.errors.push(ev.json.error);
            else if (ev.json) {
              st.chunks.push(ev.json);
              if (st.firstChunkMs === null) st.firstChunkMs = ev.ms;
            }
          }
          st.events.push(ev);
          if (onEvent && onEvent(ev, st) === 'abort') {
            st.aborted = true;
            req.destroy();
            res.destroy();
            finish();
            return;
          }
        }
      });
      res.on('end', () => { st.trailing = buf; if (st.status !== 200) { try { st.json = JSON.parse(st.text); } catch { /* not JSON */ } } finish(); });
      res.on('error', (e) => { if (st.aborted) finish(); else finish(new Error(`stream ${urlPath}: ${e.message}`)); });
      res.on('aborted', () => { st.serverAborted = true; });
    });
    const timer = setTimeout(() => {
      st.timedOut = true;
      req.destroy();
      finish(new Error(`stream ${urlPath}: not finished within ${timeoutMs} ms (${st.events.length} events so far)`));
    }, timeoutMs);
    req.on('error', (e) => { if (st.aborted) finish(); else finish(new Error(`stream ${urlPath}: ${e.message}`)); });
    req.write(body);
    req.end();
  });
}

// Concatenated text of a completions stream per choice index, and the finish reasons.
export function collectStream(st, kind) {
  const texts = new Map();
  const reasoning = new Map();
  const finish = new Map();
  const roles = new Map();
  for (const c of st.chunks) {
    for (const ch of c.choices || []) {
      const i = ch.index;
      if (kind === 'chat') {
        const d = ch.delta || {};
        if (typeof d.content === 'string') texts.set(i, (texts.get(i) || '') + d.content);
        if (typeof d.reasoning_content === 'string') reasoning.set(i, (reasoning.get(i) || '') + d.reasoning_content);
        if (d.role) roles.set(i, (roles.get(i) || []).concat(d.role));
      } else if (typeof ch.text === 'string') texts.set(i, (texts.get(i) || '') + ch.text);
      if (!texts.has(i)) texts.set(i, texts.get(i) || '');
      if (ch.finish_reason !== null && ch.finish_reason !== undefined) finish.set(i, (finish.get(i) || []).concat(ch.finish_reason));
    }
  }
  return { texts, reasoning, finish, roles };
}

// ---------------------------------------------------------------------------------------------
// Response checks.
const ERROR_KEYS = ['message', 'type', 'param', 'code'];

// The OpenAI error shape {"error":{"message","type","param","code"}} with the expected status;
// with `param`, error.param must name that field (exactly, or as its first path component).
export function checkError(t, res, status, ctx, { param, statuses } = {}) {
  const allowed = statuses || [status];
  const okStatus = t.ok(allowed.includes(res.status), `${ctx}: expected HTTP ${allowed.join(' or ')}, got ${res.status}; body ${trunc(res.text)}`);
  if (!okStatus && res.status === 200) return false;
  const e = res.json && res.json.error;
  if (!t.ok(e && typeof e === 'object' && !Array.isArray(e), `${ctx}: body is not the OpenAI error shape {"error":{...}}: ${trunc(res.text)}`)) return false;
  const missing = ERROR_KEYS.filter((k) => !(k in e));
  t.ok(missing.length === 0, `${ctx}: error object lacks ${missing.join(', ')}: ${trunc(res.text)}`);
  t.ok(typeof e.message === 'string' && e.message.length > 0, `${ctx}: error.message is not a non-empty string: ${fmt(e.message)}`);
  t.ok(typeof e.type === 'string' && e.type.length > 0, `${ctx}: error.type is not a non-empty string: ${fmt(e.type)}`);
  t.ok(e.param === null || typeof e.param === 'string', `${ctx}: error.param is neither null nor a string: ${fmt(e.param)}`);
  t.ok(e.code === null || typeof e.code === 'string' || typeof e.code === 'number', `${ctx}: error.code is neither null, a string nor a number: ${fmt(e.code)}`);
  if (param !== undefined) {
    const p = typeof e.param === 'string' ? e.param : '';
    const head = p.split(/[.[]/)[0];
    t.ok(p === param || head === param, `${ctx}: error.param should name "${param}", got ${fmt(e.param)} (message ${fmt(e.message)})`);
  }
  return okStatus;
}

// ---------------------------------------------------------------------------------------------
// Prometheus text.
export function parseMetrics(text) {
  const samples = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\d+)?$/.exec(line);
    if (!m) { samples.push({ bad: line }); continue; }
    const labels = {};
    if (m[3]) {
      const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?\s*/g;
      let lm;
      while ((lm = re.exec(m[3]))) labels[lm[1]] = lm[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
    }
    const v = m[4] === '+Inf' ? Infinity : m[4] === '-Inf' ? -Infinity : Number(m[4]);
    samples.push({ name: m[1], labels, value: v });
  }
  return samples;
}
// Sum of the samples named `name` whose labels match every (key, predicate-or-value) of `where`;
// undefined when there is none.
export function metric(samples, name, where = {}) {
  let sum;
  for (const s of samples) {
    if (s.name !== name) continue;
    let ok = true;
    for (const [k, v] of Object.entries(where)) {
      const lv = s.labels[k];
      if (typeof v === 'function' ? !v(lv) : lv !== v) { ok = false; break; }
    }
    if (ok) sum = (sum || 0) + s.value;
  }
  return sum;
}
export async function metrics(srv) {
  const r = await get(srv, '/metrics');
  if (r.status !== 200) throw new Error(`GET /metrics: HTTP ${r.status}: ${trunc(r.text)}`);
  return parseMetrics(r.text);
}
// Polls /metrics until pred(samples) holds; resolves {ok, samples, ms}.
export async function waitMetrics(srv, pred, timeoutMs = 5000, intervalMs = 25) {
  const t0 = Date.now();
  let samples = [];
  for (;;) {
    samples = await metrics(srv);
    if (pred(samples)) return { ok: true, samples, ms: Date.now() - t0 };
    if (Date.now() - t0 > timeoutMs) return { ok: false, samples, ms: Date.now() - t0 };
    await sleep(intervalMs);
  }
}

// ---------------------------------------------------------------------------------------------
// Oracles from the kipp CLI (independent of the server).
const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kipp-server-test-'));
process.on('exit', () => { try { fs.rmSync(tmpDir, { recursive: true, force: true }); } catch { /* ignore */ } });
let tmpN = 0;
export function countTokens(text, model = TINY) {
  const f = path.join(tmpDir, `t${tmpN++}.txt`);
  fs.writeFileSync(f, text);
  const out = execFileSync(KIPP, ['tokenize', '-m', model, '--no-verify', '--json', '--file', f], { encoding: 'utf8' });
  return JSON.parse(out).count;
}
export function renderChat(messages, { think = true, model = TINY, tools = null } = {}) {
  const args = ['render', '-m', model, '--no-verify', '--messages', '-', think ? '--think' : '--no-think'];
  if (tools) {
    const f = path.join(tmpDir, `t${tmpN++}.json`);
    fs.writeFileSync(f, JSON.stringify(tools));
    args.push('--tools', f);
  }
  return execFileSync(KIPP, args, { input: JSON.stringify(messages), encoding: 'utf8' });
}

// Deterministic filler text: `n` words from a fixed list, chosen by a seeded generator.
const WORDS = ('the a of and to in is was for on that with as by it at from his her an were are which this be ' +
  'river mountain city engine window garden letter winter silver market forest ocean bridge castle violin ' +
  'planet sugar pencil harbor lantern meadow thunder copper velvet signal').split(' ');
export function words(n, seed = 1) {
  let x = seed >>> 0 || 1;
  const out = [];
  for (let i = 0; i < n; i++) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    out.push(WORDS[x % WORDS.length]);
  }
  return out.join(' ');
}
export function rng(seed) {
  let x = seed >>> 0 || 1;
  return () => { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; return x / 4294967296; };
}

export function readRssKib(pid) {
  try {
    const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(s);
    return m ? Number(m[1]) : null;
  } catch { return null; }
}

export function isInt(v) {
  return typeof v === 'number' && Number.isInteger(v);
}

// ---------------------------------------------------------------------------------------------
// Response shapes: exactly the fields OpenAI clients parse, plus llama.cpp's `timings`.
const TOP_KEYS = ['id', 'object', 'created', 'model', 'system_fingerprint', 'choices', 'usage', 'timings'];
const MESSAGE_KEYS = ['role', 'content', 'reasoning_content', 'refusal', 'tool_calls', 'annotations'];
const USAGE_KEYS = ['prompt_tokens', 'completion_tokens', 'total_tokens', 'prompt_tokens_details', 'completion_tokens_details'];

export function checkUsage(t, u, ctx) {
  if (!t.ok(u && typeof u === 'object', `${ctx}: usage is not an object: ${fmt(u)}`)) return;
  const extra = Object.keys(u).filter((k) => !USAGE_KEYS.includes(k));
  t.ok(extra.length === 0, `${ctx}: usage has fields OpenAI does not define: ${extra.join(', ')}`);
  for (const k of ['prompt_tokens', 'completion_tokens', 'total_tokens']) t.ok(isInt(u[k]) && u[k] >= 0, `${ctx}: usage.${k} is not a non-negative integer: ${fmt(u[k])}`);
  t.ok(u.total_tokens === u.prompt_tokens + u.completion_tokens, `${ctx}: usage.total_tokens ${u.total_tokens} != prompt_tokens ${u.prompt_tokens} + completion_tokens ${u.completion_tokens}`);
  const d = u.prompt_tokens_details;
  if (t.ok(d && typeof d === 'object', `${ctx}: usage.prompt_tokens_details missing: ${fmt(u)}`)) {
    t.ok(isInt(d.cached_tokens) && d.cached_tokens >= 0 && d.cached_tokens <= u.prompt_tokens,
      `${ctx}: usage.prompt_tokens_details.cached_tokens should be an integer in [0, prompt_tokens=${u.prompt_tokens}], got ${fmt(d.cached_tokens)}`);
  }
}

// Checks a non-streaming response body of /v1/completions (chat=false) or /v1/chat/completions.
export function checkCompletionBody(t, body, ctx, { n = 1, model, chat = false, logprobs = false, maxTokens } = {}) {
  if (!t.ok(body && typeof body === 'object', `${ctx}: body is not a JSON object: ${fmt(body)}`)) return;
  const missing = TOP_KEYS.filter((k) => !(k in body));
  const extra = Object.keys(body).filter((k) => !TOP_KEYS.includes(k));
  t.ok(missing.length === 0, `${ctx}: response lacks ${missing.join(', ')}`);
  t.ok(extra.length === 0, `${ctx}: response has fields beyond OpenAI's + timings: ${extra.join(', ')}`);
  t.ok(typeof body.id === 'string' && body.id.length > 0, `${ctx}: id is not a non-empty string: ${fmt(body.id)}`);
  t.eq(body.object, chat ? 'chat.completion' : 'text_completion', `${ctx}: object`);
  const now = Date.now() / 1000;
  t.ok(isInt(body.created) && Math.abs(body.created - now) < 600, `${ctx}: created should be the Unix time in seconds (~${Math.round(now)}), got ${fmt(body.created)}`);
  if (model !== undefined) t.eq(body.model, model, `${ctx}: model`);
  t.ok(typeof body.system_fingerprint === 'string' && body.system_fingerprint.length > 0, `${ctx}: system_fingerprint is not a non-empty string: ${fmt(body.system_fingerprint)}`);
  t.ok(body.timings && typeof body.timings === 'object' && !Array.isArray(body.timings), `${ctx}: timings is not an object: ${fmt(body.timings)}`);
  checkUsage(t, body.usage, ctx);
  if (!t.ok(Array.isArray(body.choices) && body.choices.length === n, `${ctx}: expected ${n} choices, got ${fmt(body.choices)}`)) return;
  t.eq(body.choices.map((c) => c.index), [...Array(n).keys()], `${ctx}: choices[].index`);
  let sumTokens = 0;
  for (const c of body.choices) {
    const want = chat ? ['index', 'message', 'finish_reason', 'logprobs'] : ['index', 'text', 'finish_reason', 'logprobs'];
    const ck = Object.keys(c);
    t.ok(want.every((k) => ck.includes(k)) && ck.every((k) => want.includes(k)), `${ctx}: choice ${c.index} fields should be exactly ${want.join(', ')}, got ${ck.join(', ')}`);
    t.ok(['stop', 'length'].includes(c.finish_reason), `${ctx}: choice ${c.index} finish_reason should be "stop" or "length", got ${fmt(c.finish_reason)}`);
    if (chat) {
      const m = c.message;
      if (t.ok(m && typeof m === 'object', `${ctx}: choice ${c.index} message is not an object`)) {
        t.eq(m.role, 'assistant', `${ctx}: choice ${c.index} message.role`);
        t.ok(typeof m.content === 'string' || (m.content === null && typeof m.reasoning_content === 'string'), `${ctx}: choice ${c.index} message.content is not a string: ${fmt(m.content)}`);
        const extraM = Object.keys(m).filter((k) => !MESSAGE_KEYS.includes(k));
        t.ok(extraM.length === 0, `${ctx}: message has fields OpenAI does not define: ${extraM.join(', ')}`);
        if ('reasoning_content' in m) t.ok(m.reasoning_content === null || typeof m.reasoning_content === 'string', `${ctx}: message.reasoning_content is neither null nor a string`);
      }
    } else {
      t.ok(typeof c.text === 'string', `${ctx}: choice ${c.index} text is not a string: ${fmt(c.text)}`);
    }
    if (!logprobs) t.ok(c.logprobs === null, `${ctx}: choice ${c.index} logprobs should be null when not requested, got ${fmt(c.logprobs)}`);
  }
  if (body.usage && isInt(body.usage.completion_tokens) && maxTokens !== undefined) {
    sumTokens = body.usage.completion_tokens;
    t.ok(sumTokens <= n * maxTokens, `${ctx}: usage.completion_tokens ${sumTokens} exceeds n x max_tokens = ${n * maxTokens}`);
    if (n === 1) {
      const fr = body.choices[0].finish_reason;
      if (fr === 'length') t.ok(sumTokens === maxTokens, `${ctx}: finish_reason "length" but completion_tokens ${sumTokens} != max_tokens ${maxTokens}`);
      if (fr === 'stop') t.ok(sumTokens < maxTokens || sumTokens === maxTokens, `${ctx}: finish_reason "stop" with ${sumTokens} tokens`);
    }
  }
}

// Checks the framing of a successful SSE response: 200, text/event-stream, every data line JSON of
// the chunk shape with one id, ends with [DONE] and nothing after it, one finish_reason per choice
// in the last chunk for that choice, the usage-only chunk exactly when include_usage is set.
export function checkStream(t, st, ctx, { chat = false, n = 1, includeUsage = false, model } = {}) {
  if (!t.ok(st.status === 200, `${ctx}: expected HTTP 200, got ${st.status}: ${trunc(st.text)}`)) return;
  t.ok(/^text\/event-stream/.test(st.headers['content-type'] || ''), `${ctx}: content-type should be text/event-stream, got ${fmt(st.headers['content-type'])}`);
  t.ok(st.badJson.length === 0, `${ctx}: data lines that are not JSON: ${fmt(st.badJson)}`);
  t.ok(st.errors.length === 0, `${ctx}: error events in the stream: ${fmt(st.errors)}`);
  t.ok(st.done, `${ctx}: stream did not end with data: [DONE] (last events ${fmt(st.events.slice(-2).map((e) => e.data))})`);
  t.ok(st.afterDone.length === 0, `${ctx}: data after [DONE]: ${fmt(st.afterDone)}`);
  const ids = new Set(st.chunks.map((c) => c.id));
  t.ok(ids.size === 1 && typeof [...ids][0] === 'string', `${ctx}: chunks should share one string id, got ${fmt([...ids])}`);
  const obj = chat ? 'chat.completion.chunk' : 'text_completion';
  const badObj = st.chunks.filter((c) => c.object !== obj);
  t.ok(badObj.length === 0, `${ctx}: every chunk's object should be "${obj}", got ${fmt(badObj.map((c) => c.object))}`);
  if (model !== undefined) {
    const badModel = st.chunks.filter((c) => c.model !== model);
    t.ok(badModel.length === 0, `${ctx}: every chunk's model should be ${fmt(model)}, got ${fmt(badModel.slice(0, 2).map((c) => c.model))}`);
  }
  const now = Date.now() / 1000;
  t.ok(st.chunks.every((c) => isInt(c.created) && Math.abs(c.created - now) < 600), `${ctx}: chunk created is not the Unix time in seconds`);
  const usageChunks = st.chunks.filter((c) => Array.isArray(c.choices) && c.choices.length === 0);
  if (includeUsage) {
    if (t.ok(usageChunks.length === 1, `${ctx}: with include_usage expected one usage chunk with choices: [], got ${usageChunks.length}`)) {
      t.ok(st.chunks[st.chunks.length - 1] === usageChunks[0], `${ctx}: the usage chunk should be the last before [DONE]`);
      checkUsage(t, usageChunks[0].usage, `${ctx} (usage chunk)`);
    }
    const others = st.chunks.filter((c) => c !== usageChunks[0]);
    t.ok(others.every((c) => c.usage === undefined || c.usage === null), `${ctx}: chunks before the usage chunk should have no usage (or null)`);
  } else {
    t.ok(usageChunks.length === 0, `${ctx}: usage-only chunk (choices: []) sent without stream_options.include_usage`);
  }
  const perIndex = new Map();
  st.chunks.forEach((c, ci) => {
    for (const ch of c.choices || []) {
      if (!perIndex.has(ch.index)) perIndex.set(ch.index, []);
      perIndex.get(ch.index).push({ ch, ci });
    }
  });
  t.eq([...perIndex.keys()].sort((a, b) => a - b), [...Array(n).keys()], `${ctx}: choice indices seen in the chunks`);
  for (const [i, list] of perIndex) {
    const fin = list.filter((x) => x.ch.finish_reason !== null && x.ch.finish_reason !== undefined);
    if (t.ok(fin.length === 1, `${ctx}: choice ${i}: expected exactly one chunk with a finish_reason, got ${fin.length}`)) {
      t.ok(['stop', 'length'].includes(fin[0].ch.finish_reason), `${ctx}: choice ${i} finish_reason ${fmt(fin[0].ch.finish_reason)}`);
      t.ok(fin[0] === list[list.length - 1], `${ctx}: choice ${i}: the finish_reason chunk is not its last chunk`);
    }
    for (const { ch } of list) {
      if (chat) t.ok(ch.delta && typeof ch.delta === 'object', `${ctx}: chat chunk without a delta object: ${fmt(ch)}`);
      else t.ok(typeof ch.text === 'string', `${ctx}: completion chunk without a text string: ${fmt(ch)}`);
    }
    if (chat && list.length) t.ok(list[0].ch.delta && list[0].ch.delta.role === 'assistant', `${ctx}: choice ${i}: the first delta should carry role "assistant", got ${fmt(list[0].ch.delta)}`);
  }
}

// A request promise that resolves to a pseudo-response instead of rejecting (the failure shows up
// in the status of the check that follows).
export const safe = (p) => p.catch((e) => ({ status: `no response (${e.message})`, headers: {}, text: '', json: undefined }));

// Token ids of `text` from `kipp tokenize` (the oracle outside the server).
export function tokenIds(text, model = TINY) {
  const f = path.join(tmpDir, `t${tmpN++}.txt`);
  fs.writeFileSync(f, text);
  const out = execFileSync(KIPP, ['tokenize', '-m', model, '--no-verify', '--json', '--file', f], { encoding: 'utf8' });
  return JSON.parse(out).ids;
}
