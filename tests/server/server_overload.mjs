// (e) Overload and KV-cache exhaustion.
//  - --max-batch 1 --max-queue 2 and 12 requests at once: some are refused with 503 + Retry-After
//    (in the OpenAI error shape), the rest succeed; nothing else 5xx, no hang; afterwards the
//    queue is empty and the server serves.
//  - --kv-pool-mib 2 (256 tokens of the tiny model's 8 KiB per token): a prompt longer than the
//    pool, and concurrent prompts that together exceed it, get a clean 200/400/503 - never a 500,
//    never a hang (each request has REQ_TIMEOUT_MS) - and a short request still works afterwards.
//
// Usage: node tests/server/server_overload.mjs   (env KIPP, KIPP_MODELS; see lib.mjs)
import { main, startServer, get, post, checkError, metrics, metric, waitMetrics, words, fmt, trunc, TINY_NAME, TOK_EOS } from './lib.mjs';

const REQ_TIMEOUT_MS = 60000;
const NO_EOS = Object.fromEntries(TOK_EOS.map((id) => [id, -100]));

function tally(results) {
  const m = {};
  for (const r of results) {
    const k = r instanceof Error ? 'error' : String(r.status);
    m[k] = (m[k] || 0) + 1;
  }
  return m;
}

function checkRetryAfter(t, r, ctx) {
  const ra = r.headers['retry-after'];
  t.ok(typeof ra === 'string' && (/^\d+$/.test(ra.trim()) || !Number.isNaN(Date.parse(ra))), `${ctx}: 503 without a valid Retry-After header (got ${fmt(ra)})`);
}

await main('server_overload', async (t) => {
  await t.section('full queue -> 503 with Retry-After', async () => {
    const srv = await startServer({ args: ['--max-batch', '1', '--max-queue', '2'] });
    const body = (i) => ({ model: TINY_NAME, prompt: `Queue test ${i}`, max_tokens: 48, temperature: 0, logit_bias: NO_EOS });
    const results = await Promise.all([...Array(12).keys()].map((i) => post(srv, '/v1/completions', body(i), { timeoutMs: REQ_TIMEOUT_MS }).catch((e) => e)));
    const counts = tally(results);
    t.info(`12 requests, --max-batch 1 --max-queue 2: ${fmt(counts)}`);
    t.ok(!counts.error, `some requests got no response: ${fmt(results.filter((r) => r instanceof Error).map((e) => e.message))}`);
    t.ok((counts['503'] || 0) >= 1, `no 503 although 12 requests met 1 slot and a queue of 2: ${fmt(counts)}`);
    t.ok((counts['200'] || 0) >= 1, `no request succeeded: ${fmt(counts)}`);
    const others = Object.keys(counts).filter((k) => k !== '200' && k !== '503');
    t.ok(others.length === 0, `statuses other than 200/503 under overload: ${fmt(counts)}; e.g. ${trunc(results.find((r) => !(r instanceof Error) && r.status !== 200 && r.status !== 503)?.text)}`);
    t.ok((counts['200'] || 0) <= 12 - (counts['503'] || 0), 'tally');
    for (const r of results) {
      if (r instanceof Error || r.status !== 503) continue;
      checkRetryAfter(t, r, 'overloaded completion');
      checkError(t, r, 503, 'overloaded completion (error shape)');
      break;
    }
    // Streaming requests refused by a full queue get the 503 before any event.
    const streams = await Promise.all([...Array(8).keys()].map((i) => post(srv, '/v1/chat/completions',
      { model: TINY_NAME, messages: [{ role: 'user', content: `q${i}` }], max_tokens: 16, stream: true, logit_bias: NO_EOS }, { timeoutMs: REQ_TIMEOUT_MS }).catch((e) => e)));
    const sc = tally(streams);
    t.info(`8 streaming chats at once: ${fmt(sc)}`);
    t.ok(Object.keys(sc).every((k) => k === '200' || k === '503'), `streaming overload: statuses other than 200/503: ${fmt(sc)}`);
    const s503 = streams.find((r) => !(r instanceof Error) && r.status === 503);
    if (s503) checkRetryAfter(t, s503, 'overloaded streaming chat');
    const okStreams = streams.filter((r) => !(r instanceof Error) && r.status === 200);
    t.ok(okStreams.every((r) => /data: \[DONE\]/.test(r.text)), 'an accepted stream under overload did not end with [DONE]');
    const w = await waitMetrics(srv, (s) => metric(s, 'kipp_queue_depth') === 0 && metric(s, 'kipp_batch_occupancy') === 0, 5000);
    t.ok(w.ok, `queue/batch not empty after the overload: queue ${metric(w.samples, 'kipp_queue_depth')}, batch ${metric(w.samples, 'kipp_batch_occupancy')}`);
    const after = await post(srv, '/v1/completions', body(99));
    t.ok(after.status === 200, `a request after the overload: ${after.status} ${trunc(after.text)}`);
    const s = await metrics(srv);
    t.ok((metric(s, 'kipp_requests_total', { status: '503' }) || 0) >= (counts['503'] || 0), 'kipp_requests_total{status="503"} does not count the refusals');
    await srv.stop(t);
  });

  await t.section('tiny KV pool (--kv-pool-mib 2): clean 400/503 for long prompts, never a hang', async () => {
    let srv;
    try {
      srv = await startServer({ args: ['--kv-pool-mib', '2', '--max-batch', '4'] });
    } catch (e) {
      t.fail(`kipp serve --kv-pool-mib 2 did not start: ${e.message}`);
      return;
    }
    const s0 = await metrics(srv);
    t.info(`kipp_kv_pool_blocks_total with --kv-pool-mib 2: ${metric(s0, 'kipp_kv_pool_blocks_total')}`);
    const longPrompt = `Longtest ${words(600, 77)}`; // ~600+ tokens > 256 tokens of pool
    const r = await post(srv, '/v1/completions', { model: TINY_NAME, prompt: longPrompt, max_tokens: 4 }, { timeoutMs: REQ_TIMEOUT_MS }).catch((e) => e);
    if (t.ok(!(r instanceof Error), `a prompt longer than the KV pool: no response (${r.message})`)) {
      t.ok([400, 503].includes(r.status), `a prompt longer than the KV pool: expected 400 or 503, got ${r.status} ${trunc(r.text)}`);
      if ([400, 503].includes(r.status)) checkError(t, r, r.status, 'a prompt longer than the KV pool');
    }
    const st = await post(srv, '/v1/completions', { model: TINY_NAME, prompt: longPrompt, max_tokens: 4, stream: true }, { timeoutMs: REQ_TIMEOUT_MS }).catch((e) => e);
    if (t.ok(!(st instanceof Error), `streaming prompt longer than the KV pool: no response (${st.message})`)) {
      t.ok([400, 503].includes(st.status) || (st.status === 200 && /data: \{"error"/.test(st.text) && /data: \[DONE\]/.test(st.text)),
        `streaming prompt longer than the KV pool: expected 400/503 (or an error event + [DONE]), got ${st.status} ${trunc(st.text)}`);
    }
    // Six ~100-token prompts generating 64 tokens each: together ~1000 tokens, 4x the pool.
    const many = await Promise.all([...Array(6).keys()].map((i) => post(srv, '/v1/completions',
      { model: TINY_NAME, prompt: `Pool${i} ${words(90, 300 + i)}`, max_tokens: 64, temperature: 0, logit_bias: NO_EOS }, { timeoutMs: REQ_TIMEOUT_MS }).catch((e) => e)));
    const counts = tally(many);
    t.info(`6 concurrent requests of ~160 tokens each on a 256-token pool: ${fmt(counts)}`);
    t.ok(!counts.error, `requests that never finished on the exhausted pool: ${fmt(many.filter((x) => x instanceof Error).map((e) => e.message))}`);
    t.ok(Object.keys(counts).every((k) => ['200', '400', '503'].includes(k)), `statuses other than 200/400/503 on the exhausted pool: ${fmt(counts)} ${trunc(many.find((x) => !(x instanceof Error) && ![200, 400, 503].includes(x.status))?.text)}`);
    for (const x of many) {
      if (x instanceof Error || x.status !== 200) continue;
      const c = x.json.choices[0];
      t.ok(['length', 'stop'].includes(c.finish_reason), `an accepted request on the exhausted pool has finish_reason ${fmt(c.finish_reason)}`);
    }
    const w = await waitMetrics(srv, (s) => metric(s, 'kipp_batch_occupancy') === 0 && metric(s, 'kipp_queue_depth') === 0, 5000);
    t.ok(w.ok, 'batch/queue not empty after the pool exhaustion');
    const h = await get(srv, '/health');
    t.ok(h.status === 200, `/health after the pool exhaustion: ${h.status}`);
    const small = await post(srv, '/v1/completions', { model: TINY_NAME, prompt: 'Hi', max_tokens: 4 });
    t.ok(small.status === 200, `a short request after the pool exhaustion: ${small.status} ${trunc(small.text)}`);
    await srv.stop(t);
  });
});
