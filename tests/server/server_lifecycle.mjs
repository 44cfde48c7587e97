// `kipp serve` as a process: --help documents every option, --port 0 picks a free port and prints
// exactly one `kipp serve: listening on http://HOST:PORT` line, the default model name is the file
// name without .gguf, SIGTERM / SIGINT end it with exit 0 quickly (idle, and with a stream in
// flight when SIGINT or --drain-timeout 0 skips draining; server_drain.mjs tests draining), and bad invocations (missing model, port in use, invalid limits) fail without listening.
//
// Usage: node tests/server/server_lifecycle.mjs   (env KIPP, KIPP_MODELS; see lib.mjs)
import { execFileSync, spawn } from 'node:child_process';
import path from 'node:path';
import {
  main, startServer, runServeExpectExit, streamRequest, get, post, sleep, fmt, trunc, KIPP, TINY, TINY_NAME, MODELS, LISTEN_RE, TOK_EOS,
} from './lib.mjs';

const QUICK_MS = 5000;

await main('server_lifecycle', async (t) => {
  await t.section('kipp serve --help', async () => {
    let out = '';
    try {
      out = execFileSync(KIPP, ['serve', '--help'], { encoding: 'utf8' });
    } catch (e) {
      t.fail(`kipp serve --help failed: ${e.message}`);
      return;
    }
    for (const opt of ['--model', '--host', '--port', '--api-key', '--alias', '--max-batch', '--ctx', '--kv-pool-mib', '--threads', '--max-queue', '--max-body-kib', '--timeout-s', '--drain-timeout', '--cors-origin']) {
      t.ok(out.includes(opt), `kipp serve --help does not mention ${opt}`);
    }
  });

  await t.section('listening line, default model name, SIGTERM when idle', async () => {
    const srv = await startServer();
    const lines = srv.stdoutLines.filter((l) => LISTEN_RE.test(l));
    t.eq(lines.length, 1, 'listening lines on stdout');
    t.eq(srv.host, '127.0.0.1', 'listening line host (default --host 127.0.0.1 given explicitly)');
    t.ok(srv.port > 0 && srv.port < 65536, `--port 0: listening line port ${srv.port}`);
    const m = await get(srv, '/v1/models');
    t.ok(m.json && m.json.data && m.json.data.some((x) => x.id === TINY_NAME), `GET /v1/models: default model name ${TINY_NAME} not listed: ${trunc(m.text)}`);
    const c = await post(srv, '/v1/completions', { model: TINY_NAME, prompt: 'Hi', max_tokens: 1 });
    t.eq(c.json && c.json.model, TINY_NAME, 'completion model without --alias');
    const r = await srv.stop(t, { timeoutMs: QUICK_MS });
    t.info(`SIGTERM -> exit in ${r.ms} ms`);
    t.eq(srv.stdoutLines.filter((l) => l.trim() !== '').length, 1, `non-empty stdout lines (only the listening line expected; got ${fmt(srv.stdoutLines)})`);
  });

  await t.section('without --host: 127.0.0.1 by default', async () => {
    const proc = spawn(KIPP, ['serve', '-m', TINY, '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    proc.stdout.on('data', (d) => (out += d));
    const t0 = Date.now();
    while (!/\n/.test(out) && Date.now() - t0 < 60000 && proc.exitCode === null) await sleep(50);
    t.ok(/^kipp serve: listening on http:\/\/127\.0\.0\.1:\d+\n/.test(out), `kipp serve without --host: expected a listening line on 127.0.0.1, got ${fmt(out)}`);
    proc.kill('SIGINT');
    const t1 = Date.now();
    while (proc.exitCode === null && proc.signalCode === null && Date.now() - t1 < QUICK_MS) await sleep(20);
    t.ok(proc.exitCode === 0, `SIGINT: expected exit 0 within ${QUICK_MS} ms, got ${proc.exitCode ?? proc.signalCode ?? 'still running'}`);
    if (proc.exitCode === null) proc.kill('SIGKILL');
  });

  await t.section('SIGTERM --drain-timeout 0 with a stream in flight', async () => {
    const srv = await startServer({ args: ['--drain-timeout', '0'] });
    const noEos = Object.fromEntries(TOK_EOS.map((id) => [id, -100]));
    let first;
    const seen = new Promise((r) => { first = r; });
    const st = streamRequest(srv, '/v1/completions', { model: TINY_NAME, prompt: 'Go on', max_tokens: 4000, stream: true, logit_bias: noEos },
      { onEvent: (ev, s) => { if (s.chunks.length === 1) first(); }, timeoutMs: 30000 }).catch((e) => e);
    await Promise.race([seen, new Promise((r) => setTimeout(r, 20000).unref())]);
    const r = await srv.stop(t, { timeoutMs: QUICK_MS });
    t.info(`SIGTERM with a stream in flight -> exit in ${r.ms} ms`);
    const res = await st;
    t.ok(!(res instanceof Error) || !/not finished within/.test(res.message), 'the in-flight stream stayed open after the server exited');
  });

  await t.section('SIGINT with a non-streaming request in flight', async () => {
    const srv = await startServer();
    const noEos = Object.fromEntries(TOK_EOS.map((id) => [id, -100]));
    const p = post(srv, '/v1/completions', { model: TINY_NAME, prompt: 'Go on', max_tokens: 4000, logit_bias: noEos }, { timeoutMs: 30000 }).catch((e) => e);
    await sleep(500);
    const r = await srv.stop(t, { signal: 'SIGINT', timeoutMs: QUICK_MS });
    t.info(`SIGINT with a request in flight -> exit in ${r.ms} ms`);
    await p;
  });

  await t.section('bad invocations fail without listening', async () => {
    const cases = [
      ['missing model file', ['-m', path.join(MODELS, 'no-such-model.gguf'), '--port', '0']],
      ['--max-batch 0', ['-m', TINY, '--port', '0', '--max-batch', '0']],
      ['--port 70000', ['-m', TINY, '--port', '70000']],
      ['--port abc', ['-m', TINY, '--port', 'abc']],
      ['--kv-pool-mib 0', ['-m', TINY, '--port', '0', '--kv-pool-mib', '0']],
      ['--max-queue -1', ['-m', TINY, '--port', '0', '--max-queue', '-1']],
    ];
    for (const [name, args] of cases) {
      const r = await runServeExpectExit(args, 30000);
      t.ok(!r.timedOut && r.code !== 0 && r.code !== null, `kipp serve ${name}: expected a non-zero exit, got ${r.timedOut ? 'still running after 30 s' : r.signal || r.code}`);
      t.ok(!/listening on/.test(r.stdout), `kipp serve ${name}: printed a listening line`);
      t.ok(r.stderr.trim().length > 0, `kipp serve ${name}: no error message on stderr`);
    }
    const srv = await startServer();
    const r = await runServeExpectExit(['-m', TINY, '--port', String(srv.port)], 30000);
    t.ok(!r.timedOut && r.code !== 0, `kipp serve on a port in use (${srv.port}): expected a non-zero exit, got ${r.timedOut ? 'still running' : r.code}`);
    t.ok(!/listening on/.test(r.stdout), 'kipp serve on a port in use printed a listening line');
    const h = await get(srv, '/health');
    t.ok(h.status === 200, `the first server after the port clash: /health ${h.status}`);
    await srv.stop(t);
  });
});
