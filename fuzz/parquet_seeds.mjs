// parquet_seeds.mjs: writes small seed files for parquet_fuzz (fuzz/corpus/parquet) with the
// writers tools/parquet_fixtures uses (DuckDB and arrow-rs through parquet-wasm), a few rows
// each so every file stays far below 20 KB: each codec, data pages v1 and v2, and every string
// encoding the reader decodes (PLAIN, dictionary, DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY).
//
// Usage: node fuzz/parquet_seeds.mjs OUT_DIR
//   (the npm packages come from tools/parquet_fixtures/fetch_deps.sh, or
//   KIPP_PARQUET_FIXTURES_NODE_MODULES). The test fixtures themselves come from
//   tools/parquet_fixtures/make_fixtures.mjs; nested.parquet, invalid_utf8.parquet and
//   alpaca.parquet from there are in the seed corpus as they are.
import fs from 'node:fs';
import os from 'node:os';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { nodeModules } from '../tools/lib/goldens.mjs';

const outDir = process.argv[2];
if (!outDir) {
  console.error('usage: node fuzz/parquet_seeds.mjs OUT_DIR');
  process.exit(1);
}
const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'tools', 'parquet_fixtures');
const modules = nodeModules(fixtures, 'KIPP_PARQUET_FIXTURES_NODE_MODULES');
const requireFromModules = createRequire(path.join(modules, 'kipp-parquet-seeds.cjs'));
const { DuckDBInstance } = requireFromModules('@duckdb/node-api');
const parquetWasm = requireFromModules('parquet-wasm');
fs.mkdirSync(outDir, { recursive: true });

const instance = await DuckDBInstance.create(':memory:');
const db = await instance.connect();
await db.run('SET threads = 1');
await db.run('SET preserve_insertion_order = true');
const quoted = (s) => `'${s.replaceAll("'", "''")}'`;

// 12 rows: nulls, an empty string, Unicode, a repeated category (dictionary-encoded), 2 row groups.
await db.run(`CREATE TABLE rows AS SELECT i AS id,
  CASE WHEN i % 5 = 4 THEN NULL WHEN i = 3 THEN '' WHEN i % 3 = 0 THEN 'héllo ' || i || ' 日本'
       ELSE 'row ' || i || ' alpha beta' END AS text,
  CASE WHEN i = 7 THEN NULL ELSE ['news', 'code', 'δέλτα'][i % 3 + 1] END AS category
  FROM range(12) t(i) ORDER BY i`);
for (const codec of ['uncompressed', 'snappy', 'gzip', 'zstd']) {
  for (const version of ['v1', 'v2']) {
    await db.run(`COPY (SELECT * FROM rows ORDER BY id) TO ${quoted(path.join(outDir, `small_${codec}_${version}.parquet`))}
                  (FORMAT parquet, COMPRESSION ${codec}, PARQUET_VERSION ${version}, ROW_GROUP_SIZE 8)`);
  }
}

// arrow-rs: DATA_PAGE_V2 pages, one column per string encoding, several pages per chunk.
const temp = fs.mkdtempSync(path.join(os.tmpdir(), 'kipp-parquet-seeds-'));
try {
  const source = path.join(temp, 'rows.parquet');
  await db.run(`COPY (SELECT id, text, category, text AS text_plain, text AS text_delta_length FROM rows ORDER BY id)
                TO ${quoted(source)} (FORMAT parquet, COMPRESSION uncompressed)`);
  const bytes = new Uint8Array(fs.readFileSync(source));
  const E = parquetWasm.Encoding;
  for (const [name, compression] of [['uncompressed', parquetWasm.Compression.UNCOMPRESSED],
                                     ['snappy', parquetWasm.Compression.SNAPPY]]) {
    const properties = new parquetWasm.WriterPropertiesBuilder()
      .setWriterVersion(parquetWasm.WriterVersion.V2)
      .setCompression(compression)
      .setMaxRowGroupSize(8)
      .setDataPageSizeLimit(64)
      .setWriteBatchSize(4)
      .setColumnDictionaryEnabled('text', false).setColumnEncoding('text', E.DELTA_BYTE_ARRAY)
      .setColumnDictionaryEnabled('text_plain', false).setColumnEncoding('text_plain', E.PLAIN)
      .setColumnDictionaryEnabled('text_delta_length', false)
      .setColumnEncoding('text_delta_length', E.DELTA_LENGTH_BYTE_ARRAY)
      .build();
    fs.writeFileSync(path.join(outDir, `small_${name}_arrow_page_v2.parquet`),
                     parquetWasm.writeParquet(parquetWasm.readParquet(bytes), properties));
  }
} finally {
  fs.rmSync(temp, { recursive: true, force: true });
}
console.log(`parquet_seeds: wrote ${fs.readdirSync(outDir).length} files into ${outDir}`);
