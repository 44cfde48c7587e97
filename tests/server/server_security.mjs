// Security of `kipp serve`: the Host header is checked against the bound address (DNS
// rebinding: Host evil.com -> 4xx), CORS only for localhost origins unless --cors-origin (preflight
// from http://localhost:3000 allowed, from https://evil.com not; never "*"), the Bearer API key on
// every route but /health, and a non-loopback --host without --api-key refused (exit 2).
//
// Usage: node tests/server/server_security.mjs   (env KIPP, KIPP_MODELS; see lib.mjs)
import {
  main, startServer, runServeExpectExit, request, get, post, checkError, fmt, trunc, TINY, TINY_NAME,
} from './lib.mjs';

const KEY = 'sk-kipp-security-test';

function acao(r) {
  return r.headers['access-control-allow-origin'];
}

await main('server_security', async (t) => {
  const srv = await startServer();

  await t.section('Host header (DNS rebinding)', async () => {
    for (const host of [`127.0.0.1:${srv.port}`, `localhost:${srv.port}`]) {
      const r = await get(srv, '/v1/models', { headers: { Host: host } });
      t.ok(r.status === 200, `GET /v1/models with Host ${host}: expected 200, got ${r.status} ${trunc(r.text)}`);
    }
    for (const host of ['evil.com', `evil.com:${srv.port}`, `127.0.0.1.evil.com:${srv.port}`, `localhost.evil.com`, `attacker.example:${srv.port}`]) {
      for (const [m, p, json] of [['GET', '/v1/models'], ['POST', '/v1/completions', { model: TINY_NAME, prompt: 'hi', max_tokens: 1 }], ['GET', '/metrics']]) {
        const r = await request(srv, m, p, { headers: { Host: host }, json });
        t.ok(r.status >= 400 && r.status < 500, `${m} ${p} with Host ${host}: expected a 4xx, got ${r.status} ${trunc(r.text)}`);
      }
    }
  });

  await t.section('CORS: localhost origins allowed, others not', async () => {
    const preflight = (origin, path = '/v1/chat/completions') => request(srv, 'OPTIONS', path, {
      headers: { Origin: origin, 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'content-type, authorization' },
    });
    for (const origin of ['http://localhost:3000', 'http://127.0.0.1:5173', 'http://localhost']) {
      const r = await preflight(origin);
      t.ok(r.status >= 200 && r.status < 300, `preflight from ${origin}: expected 2xx, got ${r.status} ${trunc(r.text)}`);
      t.eq(acao(r), origin, `preflight from ${origin}: Access-Control-Allow-Origin`);
      const methods = (r.headers['access-control-allow-methods'] || '').toUpperCase();
      t.ok(methods.includes('POST') || methods === '*', `preflight from ${origin}: Access-Control-Allow-Methods should allow POST, got ${fmt(r.headers['access-control-allow-methods'])}`);
      const hdrs = (r.headers['access-control-allow-headers'] || '').toLowerCase();
      t.ok((hdrs.includes('content-type') && hdrs.includes('authorization')) || hdrs === '*', `preflight from ${origin}: Access-Control-Allow-Headers should allow content-type and authorization, got ${fmt(r.headers['access-control-allow-headers'])}`);
      const g = await get(srv, '/v1/models', { headers: { Origin: origin } });
      t.eq(acao(g), origin, `GET /v1/models with Origin ${origin}: Access-Control-Allow-Origin`);
      const p = await post(srv, '/v1/completions', { model: TINY_NAME, prompt: 'hi', max_tokens: 1 }, { headers: { Origin: origin } });
      t.eq(acao(p), origin, `POST /v1/completions with Origin ${origin}: Access-Control-Allow-Origin`);
    }
    for (const origin of ['https://evil.com', 'http://localhost.evil.com', 'http://evil.com:3000', 'null', 'http://127.0.0.1.evil.com']) {
      const r = await preflight(origin);
      t.ok(acao(r) === undefined, `preflight from ${origin}: must not be allowed, got Access-Control-Allow-Origin ${fmt(acao(r))} (HTTP ${r.status})`);
      const g = await get(srv, '/v1/models', { headers: { Origin: origin } });
      t.ok(acao(g) === undefined, `GET /v1/models with Origin ${origin}: must carry no Access-Control-Allow-Origin, got ${fmt(acao(g))}`);
    }
  });

  await srv.stop(t);

  await t.section('--api-key: 401 without or with a wrong key on every route but /health', async () => {
    const s = await startServer({ apiKey: KEY, args: ['--cors-origin', 'https://app.example.com'] });
    const routes = [['GET', '/v1/models'], ['POST', '/v1/completions', { model: TINY_NAME, prompt: 'hi', max_tokens: 1 }],
      ['POST', '/v1/chat/completions', { model: TINY_NAME, messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 }], ['GET', '/metrics']];
    for (const [m, p, json] of routes) {
      checkError(t, await request(s, m, p, { json, noAuth: true }), 401, `${m} ${p} without a key`);
      checkError(t, await request(s, m, p, { json, headers: { Authorization: 'Bearer wrong-key' } }), 401, `${m} ${p} with a wrong key`);
      checkError(t, await request(s, m, p, { json, headers: { Authorization: `Bearer ${KEY}x` } }), 401, `${m} ${p} with the key plus one character`);
      checkError(t, await request(s, m, p, { json, headers: { Authorization: `Bearer ${KEY.slice(0, -1)}` } }), 401, `${m} ${p} with a prefix of the key`);
      checkError(t, await request(s, m, p, { json, headers: { Authorization: `Basic ${Buffer.from(`user:${KEY}`).toString('base64')}` } }), 401, `${m} ${p} with Basic auth`);
      checkError(t, await request(s, m, p, { json, headers: { Authorization: KEY } }), 401, `${m} ${p} with the bare key (no Bearer)`);
      const good = await request(s, m, p, { json });
      t.ok(good.status === 200, `${m} ${p} with the right key: expected 200, got ${good.status} ${trunc(good.text)}`);
    }
    const st = await request(s, 'POST', '/v1/completions', { json: { model: TINY_NAME, prompt: 'hi', max_tokens: 1, stream: true }, noAuth: true });
    checkError(t, st, 401, 'streaming completion without a key');
    const nf = await request(s, 'GET', '/v1/nope', { noAuth: true });
    t.ok(nf.status === 401 || nf.status === 404, `GET /v1/nope without a key: expected 401 (or 404), got ${nf.status}`);
    const h = await get(s, '/health', { noAuth: true });
    t.ok(h.status === 200, `GET /health without a key: expected 200, got ${h.status} ${trunc(h.text)}`);
    // CORS with --cors-origin: that origin allowed (the preflight carries no key), evil.com not.
    const pre = await request(s, 'OPTIONS', '/v1/chat/completions', { noAuth: true,
      headers: { Origin: 'https://app.example.com', 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'authorization, content-type' } });
    t.ok(pre.status >= 200 && pre.status < 300, `preflight from the --cors-origin https://app.example.com without a key: expected 2xx, got ${pre.status}`);
    t.eq(acao(pre), 'https://app.example.com', 'preflight from the --cors-origin: Access-Control-Allow-Origin');
    const g = await get(s, '/v1/models', { headers: { Origin: 'https://app.example.com' } });
    t.eq(acao(g), 'https://app.example.com', 'GET /v1/models from the --cors-origin: Access-Control-Allow-Origin');
    const e = await get(s, '/v1/models', { headers: { Origin: 'https://evil.com' } });
    t.ok(acao(e) === undefined, `GET /v1/models from https://evil.com with --cors-origin set: got Access-Control-Allow-Origin ${fmt(acao(e))}`);
    await s.stop(t);
  });

  await t.section('non-loopback --host without --api-key: refused, exit 2', async () => {
    for (const host of ['0.0.0.0', '::']) {
      const r = await runServeExpectExit(['-m', TINY, '--host', host, '--port', '0'], 60000);
      t.ok(r.code === 2, `kipp serve --host ${host} without --api-key: expected exit 2, got ${r.timedOut ? 'still running after 60 s' : r.signal || r.code}; stderr ${trunc(r.stderr)}`);
      t.ok(!/listening on/.test(r.stdout), `kipp serve --host ${host} without --api-key printed a listening line: ${trunc(r.stdout)}`);
      t.ok(/api-key/.test(r.stderr), `kipp serve --host ${host} without --api-key: the error should mention --api-key, got ${trunc(r.stderr)}`);
    }
  });

  await t.section('non-loopback --host with --api-key starts', async () => {
    let s;
    try {
      s = await startServer({ host: '0.0.0.0', apiKey: KEY });
    } catch (e) {
      t.fail(`kipp serve --host 0.0.0.0 --api-key: ${e.message}`);
      return;
    }
    t.eq(s.host, '0.0.0.0', 'listening line host for --host 0.0.0.0');
    s.host = '127.0.0.1';
    const r = await get(s, '/health');
    t.ok(r.status === 200, `--host 0.0.0.0: GET /health via 127.0.0.1: ${r.status}`);
    const nokey = await get(s, '/v1/models', { noAuth: true });
    t.eq(nokey.status, 401, '--host 0.0.0.0: GET /v1/models without a key');
    await s.stop(t);
  });
});
