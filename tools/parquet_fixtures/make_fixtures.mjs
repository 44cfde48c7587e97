// make_fixtures.mjs: writes the Parquet reader's test fixtures with independent writers into
// OUT_DIR: DuckDB, and arrow-rs (through parquet-wasm) for DATA_PAGE_V2 pages, which DuckDB never
// writes. Beside them go the values the writers were given (JSONL sidecars), so the C++ tests
// compare the reader against the input, never against the reader's own output.
//
// Usage: node tools/parquet_fixtures/make_fixtures.mjs OUT_DIR
//   Installs the pinned @duckdb/node-api and parquet-wasm with fetch_deps.sh (npm,
//   lockfile-verified) unless KIPP_PARQUET_FIXTURES_NODE_MODULES names a node_modules directory
//   that holds them.
//
// Every value comes from a seeded generator, so the files are the same on every run.
import fs from 'node:fs';
import os from 'node:os';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { nodeModules } from '../lib/goldens.mjs';

function die(message) {
  console.error(`make_fixtures: error: ${message}`);
  process.exit(1);
}

const outDir = process.argv[2];
if (!outDir || process.argv.length > 3) die('usage: node make_fixtures.mjs OUT_DIR');

const here = path.dirname(fileURLToPath(import.meta.url));
const pins = JSON.parse(fs.readFileSync(path.join(here, 'package.json'), 'utf8')).dependencies;
const modules = nodeModules(here, 'KIPP_PARQUET_FIXTURES_NODE_MODULES');
const requireFromModules = createRequire(path.join(modules, 'kipp-parquet-fixtures.cjs'));
for (const name of ['@duckdb/node-api', 'parquet-wasm']) {
  let found;
  try {
    found = JSON.parse(fs.readFileSync(path.join(modules, name, 'package.json'), 'utf8')).version;
  } catch {
    die(`${name} is not installed in ${modules}`);
  }
  if (found !== pins[name]) die(`expected ${name}@${pins[name]} (package.json), found ${found} in ${modules}`);
}
const { DuckDBInstance } = requireFromModules('@duckdb/node-api');
// The Node.js (CommonJS) build: loads its WebAssembly module synchronously.
const parquetWasm = requireFromModules('parquet-wasm');
fs.mkdirSync(outDir, { recursive: true });

// mulberry32: a small seeded PRNG (deterministic across Node versions).
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const UNICODE = [
  'héllo wörld', '日本語のテキスト', 'emoji 🎉🚀 and more 👩‍💻', 'Ελληνικά γράμματα', 'עברית מימין לשמאל',
  'combining e\u0301 and n\u0303', 'Ωmega ≠ ∞', 'line\nbreak', 'tab\tand "quotes"', 'back\\slash', ' ', '中文，标点。',
];
const WORDS = ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta', 'eta', 'theta', 'iota', 'kappa', 'lambda', 'mu'];
const CATEGORIES = ['news', 'code', 'chat', 'δέλτα', ''];

function words(next, n) {
  const out = [];
  for (let i = 0; i < n; ++i) out.push(WORDS[Math.floor(next() * WORDS.length)]);
  return out.join(' ');
}

// The main table: `text` is high-cardinality (PLAIN / DELTA pages), with nulls, empty strings
// and Unicode; `category` is low-cardinality (dictionary-encoded); `id` is an integer column.
function textRows(count) {
  const next = rng(1234);
  const rows = [];
  for (let i = 0; i < count; ++i) {
    const r = next();
    let text;
    if (r < 0.08) text = null;
    else if (r < 0.12) text = '';
    else if (r < 0.30) text = `${i}: ${UNICODE[Math.floor(next() * UNICODE.length)]}`;
    else text = `${i}: ${words(next, 1 + Math.floor(next() * 12))}`;
    const category = next() < 0.05 ? null : CATEGORIES[Math.floor(next() * CATEGORIES.length)];
    rows.push({ id: i, text, category });
  }
  return rows;
}

function alpacaRows(count) {
  const next = rng(99);
  const rows = [];
  for (let i = 0; i < count; ++i) {
    const instruction = `Instruction ${i}: ${words(next, 3 + Math.floor(next() * 5))}?`;
    const input = next() < 0.4 ? '' : `context ${i} ${UNICODE[Math.floor(next() * UNICODE.length)]}`;
    const output = `Answer ${i}: ${words(next, 2 + Math.floor(next() * 20))}.`;
    rows.push({ instruction, input, output });
  }
  return rows;
}

function writeJsonl(file, rows) {
  fs.writeFileSync(file, rows.map((row) => JSON.stringify(row)).join('\n') + '\n');
}

const instance = await DuckDBInstance.create(':memory:');
const db = await instance.connect();
await db.run('SET threads = 1');
await db.run('SET preserve_insertion_order = true');

const sqlString = (s) => `'${s.replaceAll("'", "''")}'`;

// Loads a JSONL file into table `name` with the given column types, in file order.
async function load(name, jsonl, columns) {
  const spec = Object.entries(columns).map(([k, v]) => `${k}: '${v}'`).join(', ');
  await db.run(`CREATE OR REPLACE TABLE ${name} AS SELECT * FROM read_json(${sqlString(jsonl)}, ` +
               `columns = {${spec}}, format = 'newline_delimited')`);
}

async function copy(query, file, options) {
  await db.run(`COPY (${query}) TO ${sqlString(path.join(outDir, file))} (FORMAT parquet, ${options})`);
}

const written = [];

// 1. The codec x page-version matrix over the same rows.
const text = textRows(5000);
const textJsonl = path.join(outDir, 'text.expected.jsonl');
writeJsonl(textJsonl, text);
await load('text_rows', textJsonl, { id: 'BIGINT', text: 'VARCHAR', category: 'VARCHAR' });
for (const codec of ['uncompressed', 'snappy', 'gzip', 'zstd']) {
  for (const version of ['v1', 'v2']) {
    const file = `text_${codec}_${version}.parquet`;
    await copy('SELECT id, text, category FROM text_rows ORDER BY id', file,
               `COMPRESSION ${codec}, PARQUET_VERSION ${version}, ROW_GROUP_SIZE 2048`);
    written.push(file);
  }
}

// 2. DATA_PAGE_V2 pages, from arrow-rs (parquet-wasm, WriterVersion V2) over the same rows, every
//    codec. parquet-wasm takes an Arrow table, and without a JavaScript Arrow library the way in
//    is its Parquet reader: DuckDB writes the rows (uncompressed, v1 pages) to a temporary file,
//    arrow-rs reads that into Arrow and writes the fixture with its own writer; what the test
//    compares against is still text.expected.jsonl, the rows themselves. The same strings go in
//    three columns, one per string encoding arrow-rs writes in v2 pages (DELTA_BYTE_ARRAY, PLAIN,
//    DELTA_LENGTH_BYTE_ARRAY), and `category` keeps its dictionary (RLE_DICTIONARY v2 pages after
//    a dictionary page). Small pages (4 KiB, checked every 256 values) give several data pages
//    per column chunk, and 2048-row row groups three chunks per column.
const V2_CODECS = {
  uncompressed: parquetWasm.Compression.UNCOMPRESSED, snappy: parquetWasm.Compression.SNAPPY,
  gzip: parquetWasm.Compression.GZIP, zstd: parquetWasm.Compression.ZSTD,
};
const v2Temp = fs.mkdtempSync(path.join(os.tmpdir(), 'kipp-parquet-fixtures-'));
try {
  const source = path.join(v2Temp, 'rows.parquet');
  await db.run(`COPY (SELECT id, text, category, text AS text_plain, text AS text_delta_length FROM text_rows
                ORDER BY id) TO ${sqlString(source)} (FORMAT parquet, COMPRESSION uncompressed)`);
  const sourceBytes = new Uint8Array(fs.readFileSync(source));
  for (const [codec, compression] of Object.entries(V2_CODECS)) {
    const E = parquetWasm.Encoding;
    const properties = new parquetWasm.WriterPropertiesBuilder()
      .setWriterVersion(parquetWasm.WriterVersion.V2)
      .setCompression(compression)
      .setMaxRowGroupSize(2048)
      .setDataPageSizeLimit(4096)
      .setWriteBatchSize(256)
      .setColumnDictionaryEnabled('text', false).setColumnEncoding('text', E.DELTA_BYTE_ARRAY)
      .setColumnDictionaryEnabled('text_plain', false).setColumnEncoding('text_plain', E.PLAIN)
      .setColumnDictionaryEnabled('text_delta_length', false)
      .setColumnEncoding('text_delta_length', E.DELTA_LENGTH_BYTE_ARRAY)
      .build();
    const file = `text_${codec}_arrow_page_v2.parquet`;
    fs.writeFileSync(path.join(outDir, file), parquetWasm.writeParquet(parquetWasm.readParquet(sourceBytes), properties));
    written.push(file);
  }
} finally {
  fs.rmSync(v2Temp, { recursive: true, force: true });
}

// 3. Alpaca-shaped.
const alpaca = alpacaRows(300);
const alpacaJsonl = path.join(outDir, 'alpaca.expected.jsonl');
writeJsonl(alpacaJsonl, alpaca);
await load('alpaca_rows', alpacaJsonl, { instruction: 'VARCHAR', input: 'VARCHAR', output: 'VARCHAR' });
await copy('SELECT * FROM alpaca_rows', 'alpaca.parquet', 'COMPRESSION zstd');
written.push('alpaca.parquet');

// 4. Streaming: 250k rows in ~120 row groups, values from a formula the C++ test repeats
//    (hex digits, so ZSTD leaves the file megabytes), every 1000th row null.
const MANY_ROWS = 250000;
await copy(`SELECT CASE WHEN i % 1000 = 999 THEN NULL
                   ELSE printf('row %d %08x%08x%04x', i, (i * 2654435761) % 4294967296,
                               (i * 40503 + 12345) % 4294967296, (i * 97 + 7) % 65536) END AS text
            FROM range(${MANY_ROWS}) t(i) ORDER BY i`, 'many.parquet', 'COMPRESSION zstd, ROW_GROUP_SIZE 2048');
fs.writeFileSync(path.join(outDir, 'many.expected.json'), JSON.stringify({
  rows: MANY_ROWS,
  text: "NULL when i % 1000 = 999, else printf('row %d %08x%08x%04x', i, (i * 2654435761) % 2^32, " +
        '(i * 40503 + 12345) % 2^32, (i * 97 + 7) % 65536) for i = 0, 1, ...',
}, null, 2) + '\n');
written.push('many.parquet');

// 5. Nested columns beside a flat one, and a BLOB column holding invalid UTF-8.
await copy(`SELECT 'flat ' || i AS text, {'x': i, 'y': 'v' || i} AS nested, ['a', 'b' || i] AS tags
            FROM range(10) t(i)`, 'nested.parquet', 'COMPRESSION snappy');
written.push('nested.parquet');
await copy(`SELECT * FROM (VALUES (1, 'good'::BLOB), (2, '\\xC3\\x28'::BLOB), (3, 'also good'::BLOB),
            (4, NULL::BLOB)) t(id, text) ORDER BY id`, 'invalid_utf8.parquet', 'COMPRESSION uncompressed');
written.push('invalid_utf8.parquet');

const version = (await db.runAndReadAll('SELECT version()')).getRows()[0][0];
fs.writeFileSync(path.join(outDir, 'fixtures.json'),
                 JSON.stringify({ writer: `duckdb ${version}`, page_v2_writer: `parquet-wasm ${pins['parquet-wasm']}`,
                                  files: written }, null, 2) + '\n');
console.log(`make_fixtures: wrote ${written.length} files with DuckDB ${version} and parquet-wasm ` +
            `${pins['parquet-wasm']} into ${outDir}`);
