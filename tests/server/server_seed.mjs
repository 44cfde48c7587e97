// (c) Seeded sampling (temperature 1): the same seed gives the same output, alone or batched with
// other requests, streaming or not; different seeds give different outputs.
//
// The tiny model's random weights make its next-token distribution extremely peaked (one token
// near probability 1), so plain sampling would give one text for every seed. The test first
// flattens it: it takes five common single-token words, measures their log-probabilities at the
// first position (from the server's logprobs, whichever way it reports them: before the bias, by
// forcing each token alone; after it, from one request biasing all five), and sets logit_bias so
// the five have equal logits ~60 above everything else. Sampling then picks among five equally
// likely tokens: eight seeds all agreeing would have probability 5^-7, i.e. never by chance.
//
// Usage: node tests/server/server_seed.mjs   (env KIPP, KIPP_MODELS; see lib.mjs)
import { main, startServer, post, streamRequest, collectStream, checkStream, tokenIds, fmt, trunc, TINY_NAME } from './lib.mjs';

const WORDS = [' the', ' and', ' of', ' to', ' in'];
const N_TOK = 4;

await main('server_seed', async (t) => {
  const srv = await startServer({ args: ['--max-batch', '8'] });
  const ids = WORDS.map((w) => tokenIds(w));
  if (!t.ok(ids.every((x) => x.length === 1), `test setup: the words are not single tokens: ${fmt(ids)}`)) return;
  const idOf = Object.fromEntries(WORDS.map((w, i) => [w, ids[i][0]]));

  // Relative log-probabilities of the five tokens at the first generated position of `base`.
  async function relativeLogprobs(path, base) {
    const chat = path.includes('chat');
    const lp = chat ? { logprobs: true, top_logprobs: WORDS.length } : { logprobs: WORDS.length };
    const all = Object.fromEntries(WORDS.map((w) => [idOf[w], 100]));
    const a = await post(srv, path, { ...base, ...lp, max_tokens: 1, temperature: 0, logit_bias: all });
    if (a.status !== 200) throw new Error(`${path} with logprobs: HTTP ${a.status} ${trunc(a.text)}`);
    const c = a.json.choices[0].logprobs;
    const top = chat ? Object.fromEntries(c.content[0].top_logprobs.map((e) => [e.token, e.logprob])) : c.top_logprobs[0];
    if (WORDS.every((w) => typeof top[w] === 'number' && top[w] > -50)) return { rel: WORDS.map((w) => top[w]), how: 'after the bias (one request)' };
    const rel = [];
    for (const w of WORDS) {
      const r = await post(srv, path, { ...base, ...lp, max_tokens: 1, temperature: 0, logit_bias: { [idOf[w]]: 100 } });
      const l = r.json.choices[0].logprobs;
      const got = chat ? l.content[0] : { token: l.tokens[0], logprob: l.token_logprobs[0] };
      if (got.token !== w) throw new Error(`forcing ${fmt(w)} with logit_bias +100 sampled ${fmt(got.token)}`);
      rel.push(got.logprob);
    }
    return { rel, how: 'before the bias (forcing each token)' };
  }
  async function flatBias(path, base) {
    const { rel, how } = await relativeLogprobs(path, base);
    const max = Math.max(...rel);
    const bias = Object.fromEntries(WORDS.map((w, i) => [idOf[w], 60 - (rel[i] - max)]));
    t.info(`${path}: log-probabilities of ${fmt(WORDS)} ${how}: ${fmt(rel.map((x) => +x.toFixed(3)))}; biases ${fmt(Object.values(bias).map((x) => +x.toFixed(3)))}`);
    t.ok(Object.values(bias).every((b) => b <= 100), `${path}: the five words' log-probabilities spread over more than 40 nats: ${fmt(rel)}`);
    return bias;
  }

  const prompt = 'Once upon a time';
  const messages = [{ role: 'user', content: 'Tell me a story.' }];
  const cBias = await flatBias('/v1/completions', { model: TINY_NAME, prompt });
  const chBias = await flatBias('/v1/chat/completions', { model: TINY_NAME, messages });
  const body = (seed, extra = {}) => ({ model: TINY_NAME, prompt, max_tokens: N_TOK, temperature: 1, logit_bias: cBias, ...(seed === undefined ? {} : { seed }), ...extra });
  const chatBody = (seed, extra = {}) => ({ model: TINY_NAME, messages, max_tokens: N_TOK, temperature: 1, logit_bias: chBias, seed, ...extra });
  const text = async (b, ep = '/v1/completions') => {
    const r = await post(srv, ep, b);
    if (!t.ok(r.status === 200, `POST ${ep} ${fmt(b)}: expected 200, got ${r.status} ${trunc(r.text)}`)) return undefined;
    return ep === '/v1/completions' ? r.json.choices.map((c) => c.text) : r.json.choices.map((c) => c.message.content);
  };

  let base;
  await t.section('same seed, same output', async () => {
    base = await text(body(42));
    t.eq(await text(body(42)), base, 'completions seed 42 twice');
    t.ok(base && base[0].length > 0, `completions seed 42: empty text ${fmt(base)}`);
    t.eq(await text(chatBody(7), '/v1/chat/completions'), await text(chatBody(7), '/v1/chat/completions'), 'chat seed 7 twice');
    const withFilters = body(42, { top_p: 0.99, top_k: 50, min_p: 0.0001, presence_penalty: 0.5, frequency_penalty: 0.5, repetition_penalty: 1.1 });
    t.eq(await text(withFilters), await text(withFilters), 'completions seed 42 with top_p/top_k/min_p/penalties twice');
  });

  await t.section('different seeds differ', async () => {
    const seeds = [42, 43, 1, 2, 3, 1000, 65537, 123456789];
    const outs = [];
    for (const s of seeds) outs.push((await text(body(s)) || [''])[0]);
    t.info(`outputs of seeds ${fmt(seeds)}: ${fmt(outs)}`);
    t.ok(new Set(outs).size >= 2, `8 seeds over 5 equally likely first tokens all gave ${fmt(outs[0])}: the seed does not reach the sampler`);
    const chatOuts = [];
    for (const s of seeds) chatOuts.push((await text(chatBody(s), '/v1/chat/completions') || [''])[0]);
    t.ok(new Set(chatOuts).size >= 2, `chat: 8 seeds all gave ${fmt(chatOuts[0])}`);
  });

  await t.section('n=8 with a seed: the choices are not all equal, the set repeats', async () => {
    const a = await text(body(5, { n: 8 }));
    const b = await text(body(5, { n: 8 }));
    t.eq(b, a, 'n=8 seed 5 twice');
    t.ok(a && new Set(a).size >= 2, `n=8 seed 5 at temperature 1 over 5 equally likely tokens: all 8 choices are ${fmt(a && a[0])}`);
  });

  await t.section('the same seed inside a batch of other requests, and streamed', async () => {
    const others = [1, 2, 3, 4, 5, 6].map((s) => text(body(1000 + s, { prompt: `Other prompt number ${s} about rivers`, max_tokens: 12, logit_bias: undefined })));
    const mine = text(body(42));
    const streamed = streamRequest(srv, '/v1/completions', { ...body(42), stream: true });
    const [m, st] = await Promise.all([mine, streamed, ...others]);
    t.eq(m, base, 'seed 42 while 6 other sampled requests share the batch');
    checkStream(t, st, 'seed 42 streamed');
    t.eq([collectStream(st, 'text').texts.get(0)], base, 'seed 42 streamed (concurrently) vs non-streamed');
  });

  await t.section('no seed: two runs differ', async () => {
    const a = await text(body(undefined, { n: 8 }));
    const b = await text(body(undefined, { n: 8 }));
    t.ok(a && b && fmt(a) !== fmt(b), `two unseeded n=8 requests over 5 equally likely tokens gave the same choices ${fmt(a)} (seed not randomised?)`);
  });
});
