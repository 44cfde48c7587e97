// What the server benchmarks share: the machine facts every result records, starting
// `kipp serve` on a free port, and commands written relative to the repository.
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export function machineFacts() {
  let cpu = '';
  let cpuSignature = '';
  try {
    const cpuinfo = fs.readFileSync('/proc/cpuinfo', 'utf8');
    const field = (key) => (new RegExp(`^${key}\\s*:\\s*(.*)$`, 'm').exec(cpuinfo) || [])[1] || '';
    cpu = field('model name');
    if (field('cpu family')) cpuSignature = `family ${field('cpu family')} model ${field('model')}${field('stepping') ? ` stepping ${field('stepping')}` : ''}`;
  } catch { /* not Linux */ }
  let commit = null;
  let dirty = null;
  try {
    commit = execFileSync('git', ['-C', REPO, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();
    dirty = execFileSync('git', ['-C', REPO, 'status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8' }).trim() !== '';
  } catch { /* not a checkout */ }
  return { cpu, cpu_signature: cpuSignature, cores: os.cpus().length, memory_gib: Math.round((os.totalmem() / 2 ** 30) * 10) / 10, kernel: os.release(), node: process.version,
    loadavg_at_start: os.loadavg().map((x) => Math.round(x * 100) / 100), git_commit: commit, git_dirty: dirty };
}

// A command line with paths inside the repository written relative to it.
export function repoRelative(words) {
  return words.map((word) => (path.isAbsolute(word) && word.startsWith(REPO + path.sep) ? path.relative(REPO, word) : word)).join(' ');
}

// `kipp serve ARGS --host 127.0.0.1 --port 0`; resolves {proc, host, port, command} once it listens.
export function startServer(kipp, args) {
  const full = ['serve', ...args, '--host', '127.0.0.1', '--port', '0'];
  const proc = spawn(kipp, full, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr = (stderr + d).slice(-4000); });
  process.on('exit', () => { try { proc.kill('SIGKILL'); } catch { /* gone */ } });
  return new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error(`no listening line within 300 s; stderr: ${stderr}`)), 300000);
    proc.stdout.on('data', (d) => {
      buf += d;
      const m = /kipp serve: listening on http:\/\/([^:\s]+):(\d+)/.exec(buf);
      if (m) { clearTimeout(timer); resolve({ proc, host: m[1], port: Number(m[2]), command: repoRelative([kipp, ...full]) }); }
    });
    proc.on('exit', (code, sig) => { clearTimeout(timer); reject(new Error(`kipp serve exited (${sig || code}) before listening; stderr: ${stderr}`)); });
  });
}

export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2) : null;
};
export const r3 = (x) => (x === null || x === undefined ? null : Math.round(x * 1000) / 1000);

// The end-of-text ids of the Qwen3 tokenizer (<|im_end|>, <|endoftext|>): biased by -100 so a
// request generates exactly max_tokens.
export const EOS_IDS = [151645, 151643];

// A script's --help text: its header comment from the "// Usage:" line on.
export function usage(scriptUrl) {
  const src = fs.readFileSync(fileURLToPath(scriptUrl), 'utf8').split('\n');
  const start = src.findIndex((l) => l.startsWith('// Usage:'));
  return src.slice(start).filter((l) => l.startsWith('//')).map((l) => l.replace(/^\/\/ ?/, '')).join('\n');
}

// A TCP port free on loopback right now.
export async function freePort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}
