// (d) A client that disconnects is cancelled and its slot freed: abort a streaming request after a
// few chunks (and a non-streaming one while it generates, and 6 streams at once); /metrics must
// show kipp_batch_occupancy back at 0 within FREE_MS (a fresh server per case), kipp_generated_tokens_total must stop
// moving, and the server must still serve (a completion and /health afterwards).
//
// The aborted requests ask for MAX_TOK tokens with the end-of-text tokens biased away, far more
// than the tiny model generates in the time the test waits, so only cancellation can stop them.
//
// Usage: node tests/server/server_disconnect.mjs   (env KIPP, KIPP_MODELS; see lib.mjs)
import http from 'node:http';
import {
  main, startServer, get, post, streamRequest, metrics, metric, waitMetrics, sleep, fmt, trunc, TINY_NAME, TOK_EOS,
} from './lib.mjs';

const MAX_TOK = 4000;
const FREE_MS = 3000; // "within one step" on the server; generous for a loaded 2-core machine
const NO_EOS = Object.fromEntries(TOK_EOS.map((id) => [id, -100]));

async function stillServes(t, srv, ctx) {
  const h = await get(srv, '/health');
  t.ok(h.status === 200, `${ctx}: GET /health afterwards: ${h.status}`);
  const r = await post(srv, '/v1/completions', { model: TINY_NAME, prompt: 'Hi', max_tokens: 3, temperature: 0 });
  t.ok(r.status === 200 && r.json.choices[0].finish_reason, `${ctx}: a completion afterwards: ${r.status} ${trunc(r.text)}`);
}

async function expectFreed(t, srv, ctx) {
  const w = await waitMetrics(srv, (s) => metric(s, 'kipp_batch_occupancy') === 0 && metric(s, 'kipp_queue_depth') === 0, FREE_MS);
  t.ok(w.ok, `${ctx}: kipp_batch_occupancy/kipp_queue_depth not back to 0 within ${FREE_MS} ms of the disconnect (now ${metric(w.samples, 'kipp_batch_occupancy')}/${metric(w.samples, 'kipp_queue_depth')})`);
  if (w.ok) t.info(`${ctx}: slot freed ${w.ms} ms after the disconnect`);
  const g1 = metric(await metrics(srv), 'kipp_generated_tokens_total');
  await sleep(500);
  const g2 = metric(await metrics(srv), 'kipp_generated_tokens_total');
  t.ok(g1 === g2, `${ctx}: kipp_generated_tokens_total still moving after the disconnect (${g1} -> ${g2} in 500 ms): generation not cancelled`);
}

await main('server_disconnect', async (t) => {
  // A fresh server per case, so a request one case fails to cancel cannot blame the next.
  let srv;
  const fresh = async () => {
    if (srv) await srv.stop(t);
    srv = await startServer({ args: ['--max-batch', '4'] });
  };
  const long = (prompt) => ({ model: TINY_NAME, prompt, max_tokens: MAX_TOK, temperature: 0, logit_bias: NO_EOS });

  await t.section('abort a streaming completion after 3 chunks', async () => {
    await fresh();
    const st = await streamRequest(srv, '/v1/completions', { ...long('Tell me everything'), stream: true }, { onEvent: (ev, s) => (s.chunks.length >= 3 ? 'abort' : undefined) });
    t.ok(st.aborted && !st.done, `streaming request was not aborted mid-stream (done=${st.done}, chunks ${st.chunks.length}): the test could not disconnect in time`);
    await expectFreed(t, srv, 'streaming abort');
    await stillServes(t, srv, 'streaming abort');
  });

  await t.section('abort a streaming chat after 1 chunk', async () => {
    await fresh();
    const st = await streamRequest(srv, '/v1/chat/completions', { model: TINY_NAME, messages: [{ role: 'user', content: 'Talk forever.' }], max_tokens: MAX_TOK, temperature: 0.7, logit_bias: NO_EOS, stream: true }, { onEvent: (ev, s) => (s.chunks.length >= 1 ? 'abort' : undefined) });
    t.ok(st.aborted && !st.done, `streaming chat was not aborted mid-stream (done=${st.done})`);
    await expectFreed(t, srv, 'streaming chat abort');
  });

  await t.section('abort a non-streaming completion while it generates', async () => {
    await fresh();
    const body = JSON.stringify(long('Write a very long essay'));
    const req = http.request({ host: srv.host, port: srv.port, method: 'POST', path: '/v1/completions', agent: false,
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } });
    let gotResponse = null;
    req.on('response', (res) => { gotResponse = res.statusCode; res.resume(); });
    req.on('error', () => { /* the abort */ });
    req.end(body);
    const w = await waitMetrics(srv, (s) => metric(s, 'kipp_batch_occupancy') >= 1, 10000, 20);
    t.ok(w.ok, 'non-streaming request never showed up in kipp_batch_occupancy');
    await sleep(300);
    t.ok(gotResponse === null, `non-streaming request answered (${gotResponse}) before the abort: the test could not disconnect in time`);
    req.destroy();
    await expectFreed(t, srv, 'non-streaming abort');
    await stillServes(t, srv, 'non-streaming abort');
  });

  await t.section('6 streams (more than --max-batch 4) aborted at once', async () => {
    await fresh();
    let started = 0;
    const all = [];
    for (let i = 0; i < 6; i++) {
      all.push(streamRequest(srv, '/v1/completions', { ...long(`Stream ${i} says`), stream: true }, {
        onEvent: (ev, s) => { if (s.chunks.length === 1) started++; return undefined; },
        timeoutMs: 1500 + i * 10,
      }).catch((e) => e));
    }
    // Each stream gives up (destroys its connection) at its timeout, queued ones included.
    const res = await Promise.all(all);
    t.ok(res.every((x) => x instanceof Error && /not finished within/.test(x.message)), `some of the 6 long streams ended on their own: ${fmt(res.map((x) => (x instanceof Error ? 'aborted' : `done=${x.done} status=${x.status}`)))}`);
    t.info(`${started} of 6 streams had produced a chunk when the clients disconnected`);
    await expectFreed(t, srv, '6 streams aborted');
    await stillServes(t, srv, '6 streams aborted');
  });

  await t.section('kv blocks are returned', async () => {
    const s = await metrics(srv);
    const used = metric(s, 'kipp_kv_pool_blocks_used');
    const total = metric(s, 'kipp_kv_pool_blocks_total');
    t.info(`kipp_kv_pool_blocks_used ${used} of ${total} after the aborts`);
    t.ok(used < total, `kv pool still full after every request was cancelled: ${used} of ${total}`);
  });
});
