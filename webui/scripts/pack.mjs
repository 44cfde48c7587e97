// After `vite build`: gzips every file of build/ into dist/ (FILE.gz; level 9, no name, mtime 0,
// so the bytes depend on the input alone) and writes dist/sources.sha256, the `sha256sum`
// listing of the sources that built them (the files and folders sources.txt names, sorted by
// path). CMake embeds dist/ in the kipp binary; a test recomputes the listing to catch a stale
// dist/.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const build = path.join(root, 'build');
const dist = path.join(root, 'dist');

function filesUnder(dir, base = dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    return entry.isDirectory() ? filesUnder(full, base) : [path.relative(base, full).split(path.sep).join('/')];
  });
}

const byCodeUnit = (a, b) => (a < b ? -1 : a > b ? 1 : 0);

const sources = fs
  .readFileSync(path.join(root, 'sources.txt'), 'utf8')
  .split('\n')
  .filter((line) => line.trim() !== '')
  .flatMap((name) =>
    fs.statSync(path.join(root, name)).isDirectory() ? filesUnder(path.join(root, name), root) : [name],
  )
  .sort(byCodeUnit);
const listing = sources
  .map((name) => `${crypto.createHash('sha256').update(fs.readFileSync(path.join(root, name))).digest('hex')}  ${name}\n`)
  .join('');

fs.rmSync(dist, { recursive: true, force: true });
for (const name of filesUnder(build)) {
  const target = path.join(dist, `${name}.gz`);
  fs.mkdirSync(path.dirname(target), { recursive: true });
  fs.writeFileSync(target, zlib.gzipSync(fs.readFileSync(path.join(build, name)), { level: 9 }));
}
fs.writeFileSync(path.join(dist, 'sources.sha256'), listing);
console.log(`pack: ${filesUnder(dist).length - 1} gzip files and sources.sha256 in ${path.relative(process.cwd(), dist) || '.'}`);
