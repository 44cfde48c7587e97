// hf_train.mjs: train Hugging Face's BpeTrainer (Rust, npm tokenizers@0.23.2) on a text file
// with the pipeline of a tokenizer.json that `kipp tokenizer train` wrote, and require the
// same merges, in the same order, as that file.
//
// The binding only exposes the default trainer (min_frequency 0, vocab_size 30000, no special
// tokens), so train Kipp with --min-frequency 1 --no-default-specials and a --vocab-size large
// enough to run out of pairs. HF feeds a file line by line, so both split the same text only
// where every line starts with a printable ASCII character (Kipp's chunk boundaries); give it
// such a file. Ties: both take the pair with the smaller ids.
//
// Usage: node tools/tokenizer_train_check/hf_train.mjs TOKENIZER_JSON TEXT_FILE
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { nodeModules } from "../lib/goldens.mjs";

function die(message) {
  console.error(`hf_train: error: ${message}`);
  process.exit(1);
}

const args = process.argv.slice(2);
if (args.length !== 2) die("usage: hf_train.mjs TOKENIZER_JSON TEXT_FILE");
const [tokenizerPath, textPath] = args;
const here = dirname(fileURLToPath(import.meta.url));
const modules = nodeModules(join(here, "..", "tokenizer_goldens"), "KIPP_GOLDEN_NODE_MODULES");
const hf = createRequire(join(modules, "kipp-train-check.cjs"))("tokenizers");

const ours = JSON.parse(readFileSync(tokenizerPath, "utf8"));
if (ours.added_tokens.length !== 0) die(`${tokenizerPath} has special tokens: train it with --no-default-specials`);
const tokenizer = hf.Tokenizer.fromFile(tokenizerPath);
tokenizer.train([textPath]);
const scratch = mkdtempSync(join(tmpdir(), "kipp-hf-train-"));
let theirs;
try {
  tokenizer.save(join(scratch, "tokenizer.json"), false);
  theirs = JSON.parse(readFileSync(join(scratch, "tokenizer.json"), "utf8"));
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
const a = ours.model.merges.map((m) => (Array.isArray(m) ? m.join(" ") : m));
const b = theirs.model.merges.map((m) => (Array.isArray(m) ? m.join(" ") : m));
const n = Math.min(a.length, b.length);
for (let i = 0; i < n; ++i) {
  if (a[i] !== b[i]) die(`merge ${i} differs: kipp "${a[i]}", Hugging Face "${b[i]}"`);
}
// The default trainer stops at 30000 tokens (its alphabet + merges); Kipp may go on.
const capped = Object.keys(theirs.model.vocab).length >= 30000;
if (a.length !== b.length && !(capped && a.length > b.length)) {
  die(`kipp learned ${a.length} merges, Hugging Face ${b.length} (the first ${n} agree)`);
}
if (n < 100) die(`only ${n} merges: too few to mean anything`);
console.log(`hf_train: ${capped ? "the first" : "all"} ${n} merges agree with Hugging Face tokenizers' BpeTrainer`);
