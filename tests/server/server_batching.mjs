// (b) Continuous batching changes nothing: concurrent mixed-length greedy requests (temperature 0)
// give exactly the text, finish reasons, token counts and log-probabilities of the same requests
// run one at a time. Also the prefix cache: a repeated prompt is served partly from the cache
// (usage.prompt_tokens_details.cached_tokens > 0, kipp_prefix_* counters move) with the same output.
//
// Server: tiny model, --max-batch 4 (10 requests at once: some wait in the queue, some join a
// running batch). /metrics is polled while the concurrent phase runs: kipp_batch_occupancy must
// exceed 1 at some point, otherwise the phase did not exercise batching and the test fails.
//
// Usage: node tests/server/server_batching.mjs   (env KIPP, KIPP_MODELS; see lib.mjs)
import {
  main, startServer, post, streamRequest, checkStream, collectStream, metrics, metric, words, fmt, trunc, sleep, TINY_NAME,
} from './lib.mjs';

const MAX_BATCH = 4;

// Mixed lengths: prompts of ~1 to ~300 tokens, 3 to 24 generated tokens, completions and chat,
// n=2, streaming, logprobs. Each prompt starts with its own word so no two share a cache block.
function requests() {
  const p = (i, n) => `Request${i} ${words(n, 100 + i)}`;
  return [
    { kind: 'completions', body: { prompt: 'Hi', max_tokens: 16, logprobs: 2 } },
    { kind: 'completions', body: { prompt: p(1, 300), max_tokens: 6, logprobs: 1 } },
    { kind: 'completions', body: { prompt: p(2, 40), max_tokens: 24 } },
    { kind: 'chat', body: { messages: [{ role: 'user', content: p(3, 20) }], max_tokens: 12, logprobs: true, top_logprobs: 2 } },
    { kind: 'completions', body: { prompt: p(4, 150), max_tokens: 10, n: 2 } },
    { kind: 'chat', body: { messages: [{ role: 'system', content: p(5, 80) }, { role: 'user', content: 'Go on.' }], max_tokens: 20 } },
    { kind: 'completions-stream', body: { prompt: p(6, 60), max_tokens: 14 } },
    { kind: 'completions', body: { prompt: p(7, 5), max_tokens: 3 } },
    { kind: 'chat-stream', body: { messages: [{ role: 'user', content: p(8, 200) }], max_tokens: 8 } },
    { kind: 'completions', body: { prompt: p(9, 100), max_tokens: 18, logprobs: 2 } },
  ];
}

// One request -> a comparable record (texts, finish reasons, token logprobs, completion tokens).
async function run(srv, r) {
  const body = { model: TINY_NAME, temperature: 0, ...r.body };
  if (r.kind === 'completions' || r.kind === 'chat') {
    const res = await post(srv, r.kind === 'chat' ? '/v1/chat/completions' : '/v1/completions', body);
    if (res.status !== 200) return { error: `HTTP ${res.status} ${trunc(res.text)}` };
    const ch = res.json.choices;
    return {
      texts: ch.map((c) => (r.kind === 'chat' ? c.message.content : c.text)),
      finish: ch.map((c) => c.finish_reason),
      logprobs: ch.map((c) => (c.logprobs ? (r.kind === 'chat' ? c.logprobs.content.map((e) => [e.token, e.logprob, e.top_logprobs]) : [c.logprobs.tokens, c.logprobs.token_logprobs, c.logprobs.top_logprobs]) : null)),
      completion_tokens: res.json.usage.completion_tokens,
      prompt_tokens: res.json.usage.prompt_tokens,
    };
  }
  const chat = r.kind === 'chat-stream';
  const st = await streamRequest(srv, chat ? '/v1/chat/completions' : '/v1/completions', { ...body, stream: true, stream_options: { include_usage: true } });
  if (st.status !== 200 || !st.done) return { error: `stream HTTP ${st.status}, done=${st.done} ${trunc(st.text || st.raw)}` };
  const col = collectStream(st, chat ? 'chat' : 'text');
  const usage = st.chunks[st.chunks.length - 1].usage || {};
  return { texts: [col.texts.get(0)], finish: [(col.finish.get(0) || [])[0]], logprobs: [null], completion_tokens: usage.completion_tokens, prompt_tokens: usage.prompt_tokens, stream: st };
}

function compare(t, label, seq, got, reqs) {
  for (let i = 0; i < reqs.length; i++) {
    const a = seq[i];
    const b = got[i];
    const what = `${label} request ${i} (${reqs[i].kind}, max_tokens ${reqs[i].body.max_tokens})`;
    if (!t.ok(!b.error, `${what}: ${b.error}`)) continue;
    t.eq(b.texts, a.texts, `${what}: text vs the same request alone`);
    t.eq(b.finish, a.finish, `${what}: finish_reason vs alone`);
    t.eq(b.completion_tokens, a.completion_tokens, `${what}: usage.completion_tokens vs alone`);
    t.eq(b.prompt_tokens, a.prompt_tokens, `${what}: usage.prompt_tokens vs alone`);
    t.eq(b.logprobs, a.logprobs, `${what}: logprobs (bitwise) vs alone`);
  }
}

// Runs fn() while polling /metrics; returns [fn's result, max kipp_batch_occupancy, max queue depth].
async function withOccupancy(srv, fn) {
  let stop = false;
  let maxOcc = 0;
  let maxQueue = 0;
  const poller = (async () => {
    while (!stop) {
      try {
        const s = await metrics(srv);
        maxOcc = Math.max(maxOcc, metric(s, 'kipp_batch_occupancy') || 0);
        maxQueue = Math.max(maxQueue, metric(s, 'kipp_queue_depth') || 0);
      } catch { /* reported by the requests themselves */ }
      await sleep(10);
    }
  })();
  const result = await fn();
  stop = true;
  await poller;
  return [result, maxOcc, maxQueue];
}

await main('server_batching', async (t) => {
  const srv = await startServer({ args: ['--max-batch', String(MAX_BATCH)] });
  const reqs = requests();
  const seq = [];

  await t.section('one at a time', async () => {
    for (const r of reqs) {
      const x = await run(srv, r);
      t.ok(!x.error, `alone: ${r.kind} ${fmt(r.body).slice(0, 80)}: ${x.error}`);
      seq.push(x);
    }
    for (const [i, x] of seq.entries()) {
      if (x.error) continue;
      const want = reqs[i].body.n || 1;
      t.ok(Array.isArray(x.texts) && x.texts.length === want && x.texts.every((s) => typeof s === 'string' && s.length > 0),
        `alone: request ${i}: expected ${want} non-empty texts, got ${fmt(x.texts)}`);
      t.ok(Number.isInteger(x.completion_tokens) && x.completion_tokens > 0 && Number.isInteger(x.prompt_tokens) && x.prompt_tokens > 0,
        `alone: request ${i}: usage ${x.prompt_tokens}/${x.completion_tokens}`);
      if (reqs[i].body.logprobs) t.ok(x.logprobs.every((l) => Array.isArray(l) && l.length > 0), `alone: request ${i}: logprobs requested, got ${fmt(x.logprobs)}`);
      if (x.stream) checkStream(t, x.stream, `alone: request ${i} stream`, { chat: reqs[i].kind === 'chat-stream', includeUsage: true });
    }
    t.info(`sequential completion tokens: ${fmt(seq.map((x) => x.completion_tokens))}`);
  });

  await t.section(`all ${reqs.length} at once (--max-batch ${MAX_BATCH})`, async () => {
    const [got, occ, queue] = await withOccupancy(srv, () => Promise.all(reqs.map((r) => run(srv, r))));
    compare(t, 'concurrent', seq, got, reqs);
    t.info(`max kipp_batch_occupancy ${occ}, max kipp_queue_depth ${queue}`);
    t.ok(occ > 1, `kipp_batch_occupancy never exceeded 1 while ${reqs.length} requests ran at once: no batching observed`);
    t.ok(occ <= MAX_BATCH, `kipp_batch_occupancy ${occ} exceeded --max-batch ${MAX_BATCH}`);
  });

  await t.section('staggered arrivals in reverse order (requests join a running batch)', async () => {
    const order = [...reqs.keys()].reverse();
    const [got] = await withOccupancy(srv, () => Promise.all(order.map(async (i, k) => {
      await sleep(k * 40);
      return [i, await run(srv, reqs[i])];
    })));
    const byIndex = [];
    for (const [i, x] of got) byIndex[i] = x;
    compare(t, 'staggered', seq, byIndex, reqs);
  });

  await t.section('prefix cache: a repeated prompt reuses cached tokens and gives the same output', async () => {
    const prompt = `Cachetest ${words(250, 999)}`;
    const body = { model: TINY_NAME, prompt, max_tokens: 6, temperature: 0, logprobs: 1 };
    const m0 = await metrics(srv);
    const a = await post(srv, '/v1/completions', body);
    const m1 = await metrics(srv);
    const b = await post(srv, '/v1/completions', body);
    const m2 = await metrics(srv);
    if (!t.ok(a.status === 200 && b.status === 200, `prefix cache requests: HTTP ${a.status}, ${b.status}`)) return;
    const ca = a.json.usage.prompt_tokens_details && a.json.usage.prompt_tokens_details.cached_tokens;
    const cb = b.json.usage.prompt_tokens_details && b.json.usage.prompt_tokens_details.cached_tokens;
    t.eq(ca, 0, 'first request of a never-seen prompt: cached_tokens');
    t.ok(cb > 0 && cb <= b.json.usage.prompt_tokens, `second identical request: cached_tokens should be in 1..${b.json.usage.prompt_tokens}, got ${cb}`);
    t.ok(cb >= b.json.usage.prompt_tokens / 2, `second identical ${b.json.usage.prompt_tokens}-token prompt reused only ${cb} tokens (expected most of it)`);
    t.eq(b.json.choices[0].text, a.json.choices[0].text, 'prefix cache: text of the cached repeat');
    t.eq(b.json.choices[0].logprobs.token_logprobs, a.json.choices[0].logprobs.token_logprobs, 'prefix cache: token_logprobs of the cached repeat (bitwise)');
    const hits1 = (metric(m1, 'kipp_prefix_reuse_hits_total') || 0) - (metric(m0, 'kipp_prefix_reuse_hits_total') || 0);
    const hits2 = (metric(m2, 'kipp_prefix_reuse_hits_total') || 0) - (metric(m1, 'kipp_prefix_reuse_hits_total') || 0);
    const tok2 = (metric(m2, 'kipp_prefix_cached_tokens_total') || 0) - (metric(m1, 'kipp_prefix_cached_tokens_total') || 0);
    t.eq(hits1, 0, 'kipp_prefix_reuse_hits_total delta for the never-seen prompt');
    t.eq(hits2, 1, 'kipp_prefix_reuse_hits_total delta for the repeat');
    t.eq(tok2, cb, 'kipp_prefix_cached_tokens_total delta vs usage.prompt_tokens_details.cached_tokens');
  });

  await t.section('idle again', async () => {
    const s = await metrics(srv);
    t.eq(metric(s, 'kipp_batch_occupancy'), 0, 'kipp_batch_occupancy after all requests');
    t.eq(metric(s, 'kipp_queue_depth'), 0, 'kipp_queue_depth after all requests');
  });
});
