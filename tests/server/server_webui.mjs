// The chat page `kipp serve` serves at / (webui/), in a real browser: Debian's Chromium driven
// headless by playwright-core (pinned in tests/clients/package-lock.json). Against the tiny model:
// the page loads from the binary alone (every request goes to the server, CSP set), a message
// streams in with the server's figures (checked against /metrics), Esc stops a long answer (the
// server counts the cancellation), Regenerate, Edit-and-resend, conversations switch, rename,
// delete and survive a reload, export and import, the API-key prompt (wrong key refused, right
// key kept), a phone-sized viewport (390x844), dark mode and --no-webui. Canned streams
// (page.route) feed reasoning, code and hostile Markdown (<script>, <img onerror>, javascript:
// links) through the page's own rendering path, which must leave them inert.
// Screenshots of the main states go to the folder given as the first argument.
//   KIPP=build/release/kipp node tests/server/server_webui.mjs build/release/tests/server_webui
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { main, startServer, get, metrics, metric, waitMetrics, sleep, fmt, REPO, TINY_NAME } from './lib.mjs';

const here = path.dirname(new URL(import.meta.url).pathname);
const modules = process.env.KIPP_CLIENT_NODE_MODULES ||
  execFileSync(path.join(here, '..', 'clients', 'fetch_clients.sh'), { encoding: 'utf8' }).trim().split('\n').pop();
const { chromium } = await import(pathToFileURL(path.join(modules, 'playwright-core', 'index.mjs')).href);

const OUT = path.resolve(process.argv[2] || path.join(REPO, 'build/release/tests/server_webui'));
const CHROMIUM = process.env.KIPP_CHROMIUM || '/usr/bin/chromium';
const KEY = 'sk-webui-test-key';
const TIMEOUT = 20000;

// One SSE stream as the server sends it: reasoning and content deltas, the finish, usage + timings.
function cannedStream({ reasoning = '', content, usage, timings }) {
  const chunk = (choices, extra = {}) => `data: ${JSON.stringify({ id: 'chatcmpl-canned', object: 'chat.completion.chunk', created: 0, model: TINY_NAME, choices, ...extra })}\n\n`;
  let body = '';
  if (reasoning) body += chunk([{ index: 0, delta: { role: 'assistant', reasoning_content: reasoning }, finish_reason: null }]);
  body += chunk([{ index: 0, delta: { content }, finish_reason: null }]);
  body += chunk([{ index: 0, delta: {}, finish_reason: 'stop' }]);
  body += chunk([], { usage, timings });
  return `${body}data: [DONE]\n\n`;
}

const HOSTILE = [
  '<script>window.__pwned = "script"</script>',
  '<img src="x" onerror="window.__pwned = \'img\'">',
  '[click me](javascript:window.__pwned=\'md-link\')',
  '<a href="JaVaScRiPt:window.__pwned=\'a-link\'">raw link</a>',
  '<iframe src="javascript:window.__pwned=\'iframe\'"></iframe>',
  '<svg><script>window.__pwned = "svg"</script></svg><svg onload="window.__pwned=\'svg-onload\'"></svg>',
  '<details open ontoggle="window.__pwned=\'toggle\'">x</details>',
  '<form action="javascript:window.__pwned=\'form\'"><button>go</button></form>',
  '<p style="background:url(javascript:alert(1))">styled</p>',
  '[fine link](https://example.com/)',
].join('\n\n');

await main('server_webui', async (t) => {
  fs.mkdirSync(OUT, { recursive: true });
  const srv = await startServer();
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
  const shot = (page, name) => page.screenshot({ path: path.join(OUT, `${name}.png`) });

  // A context whose pages report script errors, CSP violations and every URL they fetch.
  async function open(server, options = {}) {
    const context = await browser.newContext({ viewport: { width: 1100, height: 720 }, ...options });
    context.setDefaultTimeout(TIMEOUT);
    const page = await context.newPage();
    page.problems = [];
    page.urls = [];
    page.on('pageerror', (e) => page.problems.push(`page error: ${e.message}`));
    // Failed loads (the 401s before a key) and CSP reports are checked where they matter.
    page.on('console', (m) => { if (m.type() === 'error' && !/Failed to load resource|Content Security Policy/.test(m.text())) page.problems.push(`console: ${m.text()}`); });
    page.on('request', (r) => page.urls.push(r.url()));
    await page.addInitScript(() => {
      window.__violations = [];
      document.addEventListener('securitypolicyviolation', (e) => window.__violations.push(`${e.violatedDirective} ${e.blockedURI}`));
    });
    const response = await page.goto(`${server.base}/`);
    return { context, page, response };
  }
  const lastAnswer = (page) => page.locator('.message.assistant').last();
  const send = async (page, text) => {
    await page.locator('textarea.prompt').fill(text);
    await page.locator('textarea.prompt').press('Enter');
  };
  const idle = (page) => page.locator('button.send').waitFor();  // the Stop button is back to Send
  const setField = async (page, name, value) => {
    await page.locator('button.settings-toggle').click();
    await page.locator(`.settings [name="${name}"]`).fill(value);
    await page.locator('.settings button', { hasText: 'Close' }).click();
  };

  const { context, page, response } = await open(srv);

  await t.section('the page loads from the binary alone', async () => {
    t.eq(response.status(), 200, 'GET / status');
    const csp = response.headers()['content-security-policy'] || '';
    t.ok(/default-src 'self'/.test(csp) && /script-src 'self'/.test(csp) && /frame-ancestors 'none'/.test(csp), `CSP of / : ${fmt(csp)}`);
    await page.locator('.model-name', { hasText: TINY_NAME }).waitFor();
    const models = (await get(srv, '/v1/models')).json;
    const ctx = models.data[0].meta.n_ctx;
    t.eq(await page.locator('.context').textContent(), `context ${ctx.toLocaleString('en-US')}`, 'context length shown (from /v1/models)');
    const foreign = page.urls.filter((u) => !u.startsWith(`${srv.base}/`) && !u.startsWith('data:'));
    t.eq(foreign, [], 'requests to anything but the server');
    const asset = await get(srv, '/assets/app.js', { headers: { 'Accept-Encoding': 'gzip' } });
    t.eq([asset.headers['content-encoding'], asset.headers['content-type']], ['gzip', 'text/javascript; charset=utf-8'], 'app.js encoding and type');
    const again = await get(srv, '/assets/app.js', { headers: { 'If-None-Match': asset.headers.etag } });
    t.eq(again.status, 304, 'If-None-Match with the ETag');
  });

  let firstAnswer = '';
  await t.section('send: tokens stream in, the figures match the server', async () => {
    await setField(page, 'max_tokens', '300');
    const before = metric(await metrics(srv), 'kipp_generated_tokens_total') ?? 0;
    // Record every length the answer's text takes while it streams.
    await page.evaluate(() => {
      window.__lengths = [];
      new MutationObserver(() => {
        const answer = [...document.querySelectorAll('.message.assistant.streaming .markdown')].pop();
        if (answer) window.__lengths.push(answer.textContent.length);
      }).observe(document.querySelector('.messages'), { subtree: true, childList: true, characterData: true });
    });
    const prompt = page.locator('textarea.prompt');
    await prompt.fill('Hello there, tell me a story');
    await prompt.press('Shift+Enter');
    await prompt.pressSequentially('in two lines');
    t.eq(await prompt.inputValue(), 'Hello there, tell me a story\nin two lines', 'Shift+Enter adds a line, sends nothing');
    await prompt.press('Enter');
    await page.locator('.message.assistant.streaming').waitFor();
    t.eq(await page.locator('.message.user .text').textContent(), 'Hello there, tell me a story\nin two lines', 'Enter sent both lines');
    await idle(page);
    const lengths = await page.evaluate(() => window.__lengths);
    const distinct = new Set(lengths.filter((n) => n > 0)).size;
    t.ok(distinct >= 3, `the answer grew in steps while streaming (distinct lengths seen: ${distinct})`);
    const stats = await lastAnswer(page).locator('.stats').textContent();
    const m = /^prompt (\d+) tokens \((\d+) cached\) · prompt [\d.]+ tok\/s · (\d+) tokens at [\d.]+ tok\/s/.exec(stats);
    t.ok(m, `figures line: ${fmt(stats)}`);
    const after = metric(await metrics(srv), 'kipp_generated_tokens_total');
    if (m) t.eq(Number(m[3]), after - before, 'generated tokens shown = kipp_generated_tokens_total delta');
    firstAnswer = await lastAnswer(page).locator('.markdown').textContent();
    t.ok(firstAnswer.length > 0, 'the answer has text');
    t.eq(await page.locator('.conversations li').count(), 1, 'one conversation in the sidebar');
    t.eq(await page.locator('.conversations li .title').textContent(), 'Hello there, tell me a story', 'title from the first message');
    await shot(page, 'answer');
  });

  await t.section('Esc stops a long answer; the server cancels it', async () => {
    await setField(page, 'max_tokens', '');
    const cancelled = metric(await metrics(srv), 'kipp_requests_cancelled_total');
    t.ok(cancelled !== undefined, 'kipp_requests_cancelled_total in /metrics');
    await send(page, 'Now a very long one');
    await page.waitForFunction(() => (document.querySelector('.message.assistant.streaming .markdown')?.textContent.length ?? 0) > 20);
    await page.keyboard.press('Escape');
    await lastAnswer(page).locator('.stopped').waitFor();
    await idle(page);
    const w = await waitMetrics(srv, (s) => metric(s, 'kipp_requests_cancelled_total') === cancelled + 1, 5000);
    t.ok(w.ok, `kipp_requests_cancelled_total: expected ${cancelled + 1}, got ${metric(w.samples, 'kipp_requests_cancelled_total')}`);
    const idleSlots = await waitMetrics(srv, (s) => metric(s, 'kipp_batch_occupancy') === 0, 5000);
    t.ok(idleSlots.ok, 'the batch slot is freed after Stop');
    await shot(page, 'stopped');
  });

  await t.section('Regenerate and Edit-and-resend', async () => {
    const requests = async () => metric(await metrics(srv), 'kipp_requests_total', { endpoint: '/v1/chat/completions' }) ?? 0;
    await setField(page, 'max_tokens', '16');
    let n = await requests();
    await lastAnswer(page).locator('button.regenerate').click();
    await page.locator('.message.assistant.streaming').waitFor({ state: 'detached' }).catch(() => {});
    await idle(page);
    await lastAnswer(page).locator('.stats').waitFor();
    t.eq(await requests(), n + 1, 'Regenerate sends one request');
    t.eq(await page.locator('.message').count(), 4, 'Regenerate replaces the last answer (2 turns)');
    t.eq(await lastAnswer(page).locator('.stopped').count(), 0, 'the new answer is not the stopped one');

    n = await requests();
    await page.locator('.message.user').first().locator('button.edit').click();
    await page.locator('.edit-box textarea').fill('An edited question');
    await page.locator('.edit-box textarea').press('Enter');
    await idle(page);
    await lastAnswer(page).locator('.stats').waitFor();
    t.eq(await requests(), n + 1, 'Edit-and-resend sends one request');
    t.eq(await page.locator('.message').count(), 2, 'Edit-and-resend drops the later turns');
    t.eq(await page.locator('.message.user .text').textContent(), 'An edited question', 'the edited text');
  });

  await t.section('conversations: switch, rename, reload keeps them, delete', async () => {
    await page.locator('button.new-chat').click();
    t.eq(await page.locator('.message').count(), 0, 'a new chat is empty');
    await send(page, 'Second conversation');
    await idle(page);
    await lastAnswer(page).locator('.stats').waitFor();
    const second = await lastAnswer(page).locator('.markdown').textContent();
    t.eq(await page.locator('.conversations li').count(), 2, 'two conversations');
    await page.locator('.conversations li .title', { hasText: 'Hello there' }).click();
    t.eq(await page.locator('.message.user .text').textContent(), 'An edited question', 'switching shows the first conversation');
    const firstShown = await lastAnswer(page).locator('.markdown').textContent();
    await page.locator('.conversations li', { hasText: 'Second conversation' }).locator('button.rename').click();
    await page.locator('.rename-input').fill('Renamed chat');
    await page.locator('.rename-input').press('Enter');
    await page.reload();
    await page.locator('.model-name', { hasText: TINY_NAME }).waitFor();
    t.eq(await page.locator('.conversations li .title').allTextContents(), ['Renamed chat', 'Hello there, tell me a story'], 'titles after reload');
    t.eq(await page.locator('.message.user .text').textContent(), 'An edited question', 'the selected conversation after reload');
    t.eq(await lastAnswer(page).locator('.markdown').textContent(), firstShown, 'its answer after reload');
    await page.locator('.conversations li .title', { hasText: 'Renamed chat' }).click();
    t.eq(await lastAnswer(page).locator('.markdown').textContent(), second, 'the other conversation after reload');

    const [download] = await Promise.all([page.waitForEvent('download'), page.locator('button.export').click()]);
    const exported = JSON.parse(fs.readFileSync(await download.path(), 'utf8'));
    t.eq(exported.title, 'Renamed chat', 'export: title');
    t.eq(exported.messages.map((m) => m.role), ['user', 'assistant'], 'export: OpenAI roles');
    t.eq(exported.messages[0].content, 'Second conversation', 'export: the question');
    t.ok(typeof exported.messages[1].content === 'string' && exported.messages[1].content.trim() !== '', 'export: the answer');

    await page.locator('.conversations li', { hasText: 'Renamed chat' }).locator('button.delete').click();
    t.eq(await page.locator('.conversations li').count(), 1, 'delete removes it');
    await page.reload();
    await page.locator('.model-name', { hasText: TINY_NAME }).waitFor();
    t.eq(await page.locator('.conversations li').count(), 1, 'deleted stays deleted after reload');
  });

  // Everything the sanitizer must neutralize, and what it must keep.
  async function checkInert(where) {
    const found = await page.evaluate(() => {
      const root = document.querySelector('.messages');
      const all = [...root.querySelectorAll('.markdown *')];
      return {
        pwned: window.__pwned ?? null,
        scripts: root.querySelectorAll('.markdown script').length,
        handlers: all.filter((e) => [...e.attributes].some((a) => /^on/i.test(a.name))).length,
        javascriptUrls: all.filter((e) => [...e.attributes].some((a) => /^\s*javascript:/i.test(a.value))).length,
        frames: root.querySelectorAll('.markdown iframe, .markdown object, .markdown embed, .markdown form').length,
        styled: root.querySelectorAll('.markdown [style]').length,
        fine: [...root.querySelectorAll('.markdown a[href="https://example.com/"]')].map((a) => `${a.target} ${a.rel}`),
        violations: window.__violations,
      };
    });
    t.eq(found.pwned, null, `${where}: no injected code ran`);
    t.eq([found.scripts, found.handlers, found.javascriptUrls, found.frames, found.styled], [0, 0, 0, 0, 0],
      `${where}: [script elements, on* attributes, javascript: URLs, frames/forms, style attributes]`);
    t.eq(found.fine, ['_blank noopener noreferrer'], `${where}: the ordinary link is kept, opening apart`);
    // Chromium reports the handler and style attributes of the hostile text when DOMPurify parses it
    // (in an inert document); the CSP refuses them there too. Nothing else may come near it.
    const other = found.violations.filter((v) => !/^(script|style)-src-attr inline$/.test(v));
    t.eq(other, [], `${where}: CSP violations other than inline attributes`);
    // Clicking the neutralized links runs nothing either.
    for (const text of ['click me', 'raw link']) {
      const link = page.locator('.markdown a', { hasText: text });
      if (await link.count()) await link.first().click({ force: true }).catch(() => {});
    }
    await sleep(100);
    t.eq(await page.evaluate(() => window.__pwned ?? null), null, `${where}: clicking the links runs nothing`);
  }

  await t.section('model output: reasoning folded, code highlighted with Copy, hostile Markdown inert', async () => {
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: srv.base });
    let canned = '';
    await page.route('**/v1/chat/completions', (route) => route.fulfill({ status: 200, headers: { 'Content-Type': 'text/event-stream' }, body: canned }));
    canned = cannedStream({
      reasoning: 'The user wants <b>a sort</b>; Python is short.',
      content: 'Here is a **sort**:\n\n```python\ndef sort(xs):\n    return sorted(xs)\n```\n\n- stable\n- `O(n log n)`\n',
      usage: { prompt_tokens: 21, completion_tokens: 30, total_tokens: 51, prompt_tokens_details: { cached_tokens: 16 } },
      timings: { cache_n: 16, prompt_n: 5, prompt_ms: 10, prompt_per_token_ms: 2, prompt_per_second: 500, predicted_n: 30, predicted_ms: 600, predicted_per_token_ms: 20, predicted_per_second: 50, queue_ms: 0 },
    });
    await page.locator('button.new-chat').click();
    await send(page, 'Sort a list in Python');
    await lastAnswer(page).locator('.stats').waitFor();
    const reasoning = lastAnswer(page).locator('details.reasoning');
    t.eq(await reasoning.evaluate((d) => d.open), false, 'reasoning is folded');
    t.eq(await reasoning.locator('.reasoning-text').textContent(), 'The user wants <b>a sort</b>; Python is short.', 'reasoning shown as text');
    t.eq(await reasoning.locator('b').count(), 0, 'reasoning HTML is not rendered');
    t.eq(await lastAnswer(page).locator('.stats').textContent(), 'prompt 21 tokens (16 cached) · prompt 500 tok/s · 30 tokens at 50.0 tok/s', 'figures from usage and timings');
    t.ok(await lastAnswer(page).locator('code.language-python .hljs-keyword').count() > 0, 'the Python block is highlighted');
    t.eq(await lastAnswer(page).locator('li').count(), 2, 'the list is rendered');
    await lastAnswer(page).locator('pre button.copy').click();
    await lastAnswer(page).locator('pre button.copy', { hasText: 'Copied' }).waitFor();
    t.eq(await page.evaluate(() => navigator.clipboard.readText()), 'def sort(xs):\n    return sorted(xs)', 'Copy puts the code on the clipboard');
    await reasoning.locator('summary').click();
    await shot(page, 'rendered');
    await page.locator('textarea.prompt').fill('');

    canned = cannedStream({ content: HOSTILE, usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } });
    await send(page, 'Say something nasty');
    await lastAnswer(page).locator('.stats').waitFor();
    await checkInert('streamed answer');
    await page.unroute('**/v1/chat/completions');

    const file = path.join(OUT, 'hostile-conversation.json');
    fs.writeFileSync(file, JSON.stringify({ title: 'Imported hostile', messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: HOSTILE }] }));
    await page.locator('.import input[type=file]').setInputFiles(file);
    await page.locator('.conversations li .title', { hasText: 'Imported hostile' }).waitFor();
    t.eq(await page.locator('.message').count(), 2, 'import opens the imported conversation');
    await checkInert('imported conversation');
    await shot(page, 'hostile-inert');
    t.eq(page.problems, [], 'no script errors in the page');
  });

  await t.section('phone-sized screen (390x844) and dark mode', async () => {
    const phone = await open(srv, { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, colorScheme: 'dark' });
    const p = phone.page;
    await p.locator('.model-name', { hasText: TINY_NAME }).waitFor();
    await setField(p, 'max_tokens', '24');
    await send(p, 'Hi from a phone');
    await p.locator('button.send').waitFor();
    await p.locator('.message.assistant .stats').waitFor();
    t.ok(await p.evaluate(() => document.documentElement.scrollWidth <= 390), 'no horizontal scrolling at 390 px');
    const sidebarBox = await p.locator('.sidebar').boundingBox();
    t.ok(sidebarBox && sidebarBox.x + sidebarBox.width <= 1, `the sidebar is off screen (box ${fmt(sidebarBox)})`);
    const background = await p.evaluate(() => getComputedStyle(document.body).backgroundColor);
    t.eq(background, 'rgb(24, 24, 27)', 'dark mode background');
    await shot(p, 'phone-390x844');
    await p.locator('button.menu').click();
    await sleep(250);  // the slide-in transition
    const opened = await p.locator('.sidebar').boundingBox();
    t.ok(opened && opened.x >= 0, `the menu button shows the sidebar (box ${fmt(opened)})`);
    await shot(p, 'phone-sidebar');
    t.eq(p.problems, [], 'no script errors on the phone');
    await phone.context.close();
  });
  await context.close();

  await t.section('API key: asked once, wrong key refused, right key kept', async () => {
    const keyed = await startServer({ apiKey: KEY });
    const noKey = await get(keyed, '/v1/models', { noAuth: true });
    t.eq(noKey.status, 401, 'the server wants a key for /v1/models');
    const { context: kc, page: kp, response: kr } = await open(keyed);
    t.eq(kr.status(), 200, 'the page itself needs no key');
    await kp.locator('.key-dialog').waitFor();
    t.eq(await kp.locator('.key-error').count(), 0, 'no error before a key is tried');
    await shot(kp, 'api-key');
    await kp.locator('.key-dialog input[name=key]').fill('wrong-key');
    await kp.locator('.key-dialog button').click();
    await kp.locator('.key-error').waitFor();
    t.ok(/refused/.test(await kp.locator('.key-error').textContent()), 'a wrong key is an error message');
    await kp.locator('.key-dialog input[name=key]').fill(KEY);
    await kp.locator('.key-dialog button').click();
    await kp.locator('.key-dialog').waitFor({ state: 'detached' });
    await kp.locator('.model-name', { hasText: TINY_NAME }).waitFor();
    await setField(kp, 'max_tokens', '16');
    await send(kp, 'Hello with a key');
    await kp.locator('button.send').waitFor();
    await kp.locator('.message.assistant .stats').waitFor();
    t.eq(await kp.locator('.message.assistant .error').count(), 0, 'the answer came with the right key');
    await kp.reload();
    await kp.locator('.model-name', { hasText: TINY_NAME }).waitFor();
    t.eq(await kp.locator('.key-dialog').count(), 0, 'the key is kept: no prompt after a reload');
    t.eq(kp.problems.filter((x) => !/401/.test(x)), [], 'no script errors with a key');
    await kc.close();
    await keyed.stop(t);
  });

  await t.section('a non-loopback bind: the page calls the server from its own origin', async () => {
    const lan = await startServer({ apiKey: KEY, host: '0.0.0.0' });
    const page = await get(lan, '/', { noAuth: true, headers: { Host: `kipp.lan:${lan.port}` } });
    t.eq(page.status, 200, 'GET / at another name without a key');
    const own = await get(lan, '/v1/models', { headers: { Host: `kipp.lan:${lan.port}`, Origin: `http://kipp.lan:${lan.port}` } });
    t.eq([own.status, own.headers['access-control-allow-origin']], [200, `http://kipp.lan:${lan.port}`], 'the same origin as the Host');
    const foreign = await get(lan, '/v1/models', { headers: { Host: `kipp.lan:${lan.port}`, Origin: `http://evil.lan:${lan.port}` } });
    t.eq(foreign.status, 403, 'another origin');
    const unkeyed = await get(lan, '/v1/models', { noAuth: true, headers: { Host: `kipp.lan:${lan.port}`, Origin: `http://kipp.lan:${lan.port}` } });
    t.eq(unkeyed.status, 401, 'the same origin still needs the key');
    await lan.stop(t);
  });

  await t.section('--no-webui: no page', async () => {
    const bare = await startServer({ args: ['--no-webui'] });
    t.eq((await get(bare, '/')).status, 404, 'GET / with --no-webui');
    t.eq((await get(bare, '/assets/app.js')).status, 404, 'GET /assets/app.js with --no-webui');
    t.eq((await get(bare, '/v1/models')).status, 200, 'the API still answers');
    await bare.stop(t);
  });

  await browser.close();
  t.info(`screenshots in ${OUT}`);
});
