// `kipp generate` under a grammar, on a random-weight model: every schema of
// tests/clients/schemas.mjs with several seeds (--json-schema), validated by ajv (+ ajv-formats),
// an independent JSON Schema validator; --json-object with small --max-tokens still ends in a
// complete object (the token budget closes it); --grammar with a GBNF grammar, the output checked
// by a regular expression written from the grammar; and the clear errors of bad inputs.
//
// Usage: node tests/generate/json_schema_cli.mjs KIPP MODEL   (KIPP_CLIENT_NODE_MODULES
//        overrides the pinned clients tests/clients/fetch_clients.sh installs)
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

import { SCHEMAS } from '../clients/schemas.mjs';

const [kipp, model] = process.argv.slice(2);
if (!kipp || !model) {
  console.error('usage: node tests/generate/json_schema_cli.mjs KIPP MODEL');
  process.exit(2);
}
const here = path.dirname(new URL(import.meta.url).pathname);
const modules = process.env.KIPP_CLIENT_NODE_MODULES ||
  execFileSync(path.join(here, '..', 'clients', 'fetch_clients.sh'), { encoding: 'utf8' }).trim().split('\n').pop();
const { default: Ajv2020 } = await import(pathToFileURL(path.join(modules, 'ajv', 'dist', '2020.js')).href);
const { default: addFormats } = await import(pathToFileURL(path.join(modules, 'ajv-formats', 'dist', 'index.js')).href);
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kipp-json-schema-'));
let checks = 0;
const failures = [];
const check = (cond, msg) => {
  checks++;
  if (!cond) {
    failures.push(msg);
    console.log(`FAIL: ${msg}`);
  }
};
const generate = (args) => spawnSync(kipp, ['generate', '-m', model, '--no-verify', '-p', 'JSON:', '--json', ...args], { encoding: 'utf8' });

try {
  for (const [name, schema] of Object.entries(SCHEMAS)) {
    const file = path.join(dir, `${name}.json`);
    fs.writeFileSync(file, JSON.stringify(schema));
    const validate = ajv.compile(schema);
    for (const seed of [1, 2, 3]) {
      const r = generate(['--json-schema', file, '--temp', '1', '--seed', String(seed), '--max-tokens', '160']);
      check(r.status === 0, `${name} seed ${seed}: exit ${r.status}: ${r.stderr}`);
      if (r.status !== 0) continue;
      const out = JSON.parse(r.stdout);
      let value;
      try { value = JSON.parse(out.text); } catch (e) { check(false, `${name} seed ${seed}: not JSON: ${out.text}`); continue; }
      check(validate(value), `${name} seed ${seed}: ${out.text} fails the schema: ${JSON.stringify(validate.errors)}`);
      check(out.finish_reason === 'grammar_complete', `${name} seed ${seed}: finish_reason ${out.finish_reason}`);
    }
  }
  for (const maxTokens of [4, 9, 17]) {
    const r = generate(['--json-object', '--temp', '1', '--seed', '7', '--max-tokens', String(maxTokens)]);
    check(r.status === 0, `json-object ${maxTokens}: exit ${r.status}: ${r.stderr}`);
    if (r.status !== 0) continue;
    const out = JSON.parse(r.stdout);
    let value = null;
    try { value = JSON.parse(out.text); } catch { /* reported below */ }
    check(value !== null && typeof value === 'object' && !Array.isArray(value), `json-object ${maxTokens}: not an object: ${out.text}`);
    check(out.usage.completion_tokens <= maxTokens, `json-object ${maxTokens}: ${out.usage.completion_tokens} tokens`);
  }
  const gbnf = path.join(dir, 'answer.gbnf');
  fs.writeFileSync(gbnf, 'root ::= "answer: " verdict " (" [0-9] [0-9]? "%)"\nverdict ::= "yes" | "no" | "maybe"\n');
  for (const seed of [1, 2, 3]) {
    const r = generate(['--grammar', gbnf, '--temp', '1', '--seed', String(seed), '--max-tokens', '40']);
    check(r.status === 0, `gbnf seed ${seed}: exit ${r.status}: ${r.stderr}`);
    if (r.status === 0) {
      const out = JSON.parse(r.stdout);
      check(/^answer: (yes|no|maybe) \([0-9][0-9]?%\)$/.test(out.text), `gbnf seed ${seed}: ${JSON.stringify(out.text)}`);
    }
  }
  const bad = path.join(dir, 'bad.json');
  fs.writeFileSync(bad, JSON.stringify({ type: 'object', patternProperties: { '^a': { type: 'string' } } }));
  let r = generate(['--json-schema', bad]);
  check(r.status !== 0 && /patternProperties/.test(r.stderr), `unsupported keyword: exit ${r.status}, stderr ${r.stderr}`);
  fs.writeFileSync(bad, 'root ::= "a" missing\n');
  r = generate(['--grammar', bad]);
  check(r.status !== 0 && /missing/.test(r.stderr), `undefined GBNF rule: exit ${r.status}, stderr ${r.stderr}`);
  r = generate(['--json-schema', bad, '--json-object']);
  check(r.status !== 0 && /exclude each other/.test(r.stderr), `two constraints: exit ${r.status}, stderr ${r.stderr}`);
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
if (failures.length) {
  console.log(`json_schema_cli: ${failures.length} of ${checks} checks FAILED`);
  process.exit(1);
}
console.log(`json_schema_cli: all ${checks} checks passed`);
