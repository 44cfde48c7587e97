// Draining on SIGTERM: the server stops admitting (/health answers 503 {"status":"draining"}, a
// new request 503 shutting_down with Connection: close, also one whose headers came before the
// signal and its body after), the requests in flight (a stream and a whole response) finish in
// full, then it exits 0. --drain-timeout bounds the wait (the rest are cancelled, exit 0) and a
// second signal stops at once. stderr says what happens.
//
// The in-flight requests ask for LONG tokens with the end-of-text tokens biased away, so they
// run for seconds and end with finish_reason "length" and exactly LONG completion tokens.
//
// Usage: node tests/server/server_drain.mjs   (env KIPP, KIPP_MODELS; see lib.mjs)
import http from 'node:http';
import net from 'node:net';
import {
  main, startServer, get, post, streamRequest, checkError, checkStream, collectStream, sleep, trunc, TINY_NAME, TOK_EOS,
} from './lib.mjs';

const LONG = 600;
const NO_EOS = Object.fromEntries(TOK_EOS.map((id) => [id, -100]));
const QUICK_MS = 4000; // a stop that should not wait for generation

// Resolves once `srv` has exited (true) or after `ms` (false).
const exitedWithin = (srv, ms) => Promise.race([srv.exitPromise.then(() => true), sleep(ms).then(() => false)]);

// A stream of LONG tokens; resolves {first, done}: first once its first chunk came, done with the result.
function longStream(srv, maxTokens = LONG) {
  let seen;
  const first = new Promise((r) => { seen = r; });
  const done = streamRequest(srv, '/v1/completions', { model: TINY_NAME, prompt: 'Go on', max_tokens: maxTokens, temperature: 0, logit_bias: NO_EOS, stream: true, stream_options: { include_usage: true } },
    { onEvent: (ev, s) => { if (s.chunks.length === 1) seen(); }, timeoutMs: 60000 }).catch((e) => e);
  return { first: Promise.race([first, sleep(20000)]), done };
}

// Headers of a POST now, its body when the returned function is called; resolves the raw response.
function splitPost(srv, body) {
  const sock = net.connect(srv.port, srv.host);
  let raw = '';
  sock.setEncoding('utf8');
  sock.on('data', (d) => (raw += d));
  const closed = new Promise((r) => { sock.on('close', r); sock.on('error', r); });
  sock.write(`POST /v1/completions HTTP/1.1\r\nHost: ${srv.hostHeader}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`);
  return async () => {
    sock.write(body);
    await Promise.race([closed, sleep(10000)]);
    sock.destroy();
    return raw;
  };
}

await main('server_drain', async (t) => {
  await t.section('SIGTERM drains: refuses new work, finishes a stream and a whole response', async () => {
    const srv = await startServer({ args: ['--max-batch', '4'] });
    const whole = post(srv, '/v1/completions', { model: TINY_NAME, prompt: 'Keep going', max_tokens: LONG, temperature: 0, logit_bias: NO_EOS }, { timeoutMs: 60000 }).catch((e) => e);
    const stream = longStream(srv);
    await stream.first;
    const late = splitPost(srv, JSON.stringify({ model: TINY_NAME, prompt: 'Hi', max_tokens: 2 }));
    await sleep(200);
    srv.stopRequested = true;
    srv.proc.kill('SIGTERM');
    await sleep(300);
    t.ok(srv.alive(), 'the server exited at once although two requests were in flight');

    const h = await get(srv, '/health');
    t.eq([h.status, h.json], [503, { status: 'draining' }], 'GET /health while draining');
    const m = await get(srv, '/metrics');
    t.eq(m.status, 200, 'GET /metrics while draining');
    const keepAlive = new http.Agent({ keepAlive: true });
    const fresh = await post(srv, '/v1/completions', { model: TINY_NAME, prompt: 'Hi', max_tokens: 2 }, { agent: keepAlive });
    keepAlive.destroy();
    checkError(t, fresh, 503, 'a new completion while draining');
    t.eq(fresh.json && fresh.json.error && fresh.json.error.code, 'shutting_down', 'error.code of a new completion while draining');
    t.eq(fresh.headers.connection, 'close', 'Connection header of the refusal');
    const models = await get(srv, '/v1/models');
    t.eq(models.status, 503, 'GET /v1/models while draining');
    const lateRaw = await late();
    t.ok(/^HTTP\/1\.1 503 /.test(lateRaw) && lateRaw.includes('"shutting_down"'), `a request whose body came after SIGTERM: expected 503 shutting_down, got ${trunc(lateRaw)}`);

    const st = await stream.done;
    if (t.ok(!(st instanceof Error), `the stream in flight failed: ${st && st.message}`)) {
      checkStream(t, st, 'stream in flight at SIGTERM', { includeUsage: true, model: TINY_NAME });
      const { finish } = collectStream(st, 'completion');
      t.eq(finish.get(0), ['length'], 'finish_reason of the drained stream');
      const usage = st.chunks.at(-1) && st.chunks.at(-1).usage;
      t.eq(usage && usage.completion_tokens, LONG, 'completion_tokens of the drained stream');
    }
    const w = await whole;
    if (t.ok(!(w instanceof Error) && w.status === 200, `the whole response in flight: ${w instanceof Error ? w.message : `${w.status} ${trunc(w.text)}`}`)) {
      t.eq(w.json.choices[0].finish_reason, 'length', 'finish_reason of the drained whole response');
      t.eq(w.json.usage.completion_tokens, LONG, 'completion_tokens of the drained whole response');
    }
    t.ok(await exitedWithin(srv, QUICK_MS), `the server did not exit within ${QUICK_MS} ms of its last request`);
    t.eq(srv.exitCode, 0, 'exit code after draining');
    const drainLine = /draining: (\d+) requests in flight/.exec(srv.stderr);
    t.eq(drainLine && Number(drainLine[1]), 2, `stderr "draining: N requests in flight" (stderr ${trunc(srv.stderr, 600)})`);
    t.ok(/drained, stopping/.test(srv.stderr), `stderr does not say "drained, stopping": ${trunc(srv.stderr, 600)}`);
  });

  await t.section('--drain-timeout 1 cancels what is still running', async () => {
    const srv = await startServer({ args: ['--drain-timeout', '1'] });
    const stream = longStream(srv, 30000);
    await stream.first;
    const t0 = Date.now();
    srv.stopRequested = true;
    srv.proc.kill('SIGTERM');
    t.ok(await exitedWithin(srv, 1000 + QUICK_MS), `no exit within ${1000 + QUICK_MS} ms of SIGTERM with --drain-timeout 1`);
    const ms = Date.now() - t0;
    t.ok(ms >= 900, `exit after ${ms} ms: before --drain-timeout 1 passed`);
    t.eq(srv.exitCode, 0, 'exit code after the drain timeout');
    t.ok(/drain timeout: cancelling 1 requests in flight/.test(srv.stderr), `stderr does not name the drain timeout: ${trunc(srv.stderr, 600)}`);
    const st = await stream.done;
    t.ok(st instanceof Error || !st.done || st.errors.length > 0 || (st.chunks.at(-1) && st.chunks.at(-1).usage.completion_tokens < 30000),
      'the stream cancelled by the drain timeout looks complete');
  });

  await t.section('a second signal stops at once', async () => {
    for (const second of ['SIGTERM', 'SIGINT']) {
      const srv = await startServer();
      const stream = longStream(srv, 30000);
      await stream.first;
      srv.stopRequested = true;
      srv.proc.kill('SIGTERM');
      await sleep(300);
      t.ok(srv.alive(), `${second}: the server exited before the second signal`);
      srv.proc.kill(second);
      t.ok(await exitedWithin(srv, QUICK_MS), `${second}: no exit within ${QUICK_MS} ms of the second signal`);
      t.eq(srv.exitCode, 0, `${second}: exit code after the second signal`);
      t.ok(/second signal: cancelling 1 requests in flight/.test(srv.stderr), `${second}: stderr does not name the second signal: ${trunc(srv.stderr, 600)}`);
      await stream.done;
    }
  });

  await t.section('SIGINT stops at once without draining', async () => {
    const srv = await startServer();
    const stream = longStream(srv, 30000);
    await stream.first;
    srv.stopRequested = true;
    srv.proc.kill('SIGINT');
    t.ok(await exitedWithin(srv, QUICK_MS), `no exit within ${QUICK_MS} ms of SIGINT`);
    t.eq(srv.exitCode, 0, 'exit code after SIGINT');
    t.ok(!/draining/.test(srv.stderr), `SIGINT drained: ${trunc(srv.stderr, 600)}`);
    await stream.done;
  });
});
