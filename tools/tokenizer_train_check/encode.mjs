// encode.mjs: encode lines with a tokenizer.json that `kipp tokenizer train` wrote, using
// implementations no one here wrote, and print the ids as JSONL ({"ids": [...]} per line).
//
//   reference  the JS tokenizer of npm @lenml/tokenizers@3.7.2 (transformers.js fork), loaded
//              with TokenizerLoader.fromPreTrained from the tokenizer.json and the
//              tokenizer_config.json beside it
//   authority  Hugging Face's tokenizers (Rust), npm tokenizers@0.23.2, loading the same
//              tokenizer.json unchanged; every line must get the same ids from both
//
// The JS library runs the Qwen2 split regex with JavaScript semantics, which differ from
// Rust's on U+0085, U+FEFF and the case folding of 'ſ (tools/tokenizer_goldens/README.md), so
// the JS tokenizer gets the pattern spelled with Rust's semantics; HF gets the file as written.
//
// Usage: node tools/tokenizer_train_check/encode.mjs TOKENIZER_JSON CORPUS_JSONL [--no-hf]
//   CORPUS_JSONL  one JSON string or {"text": ...} per line (added tokens are parsed)
//   The packages come from tools/tokenizer_goldens/fetch_deps.sh (pinned, hash-verified) unless
//   KIPP_GOLDEN_NODE_MODULES names a node_modules directory that holds them.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { nodeModules } from "../lib/goldens.mjs";

function die(message) {
  console.error(`encode: error: ${message}`);
  process.exit(1);
}

const args = process.argv.slice(2).filter((a) => !a.startsWith("--"));
const crossCheck = !process.argv.includes("--no-hf");
if (args.length !== 2) die("usage: encode.mjs TOKENIZER_JSON CORPUS_JSONL [--no-hf]");
const [tokenizerPath, corpusPath] = args;

const here = dirname(fileURLToPath(import.meta.url));
const modules = nodeModules(join(here, "..", "tokenizer_goldens"), "KIPP_GOLDEN_NODE_MODULES");
const require = createRequire(join(modules, "kipp-train-check.cjs"));
const lib = require("@lenml/tokenizers");

const tokenizerText = readFileSync(tokenizerPath, "utf8");
const tokenizerJSON = JSON.parse(tokenizerText);
const tokenizerConfig = JSON.parse(readFileSync(join(dirname(tokenizerPath), "tokenizer_config.json"), "utf8"));

// The Qwen2 pattern with Rust/Oniguruma semantics in JS syntax (as tools/tokenizer_goldens/generate.mjs).
const QWEN2_PATTERN =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const WS = "\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const RUST_PATTERN =
  "(?:'(?:[sS\\u017f]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD]))|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}" +
  `| ?[^${WS}\\p{L}\\p{N}]+[\\r\\n]*|[${WS}]*[\\r\\n]+|[${WS}]+(?![^${WS}])|[${WS}]+`;
const split = tokenizerJSON.pre_tokenizer?.pretokenizers?.[0];
if (split?.type !== "Split" || split.pattern?.Regex !== QWEN2_PATTERN) {
  die(`${tokenizerPath}: the pre-tokenizer is not Split with the Qwen2 pattern`);
}
const jsJSON = structuredClone(tokenizerJSON);
jsJSON.pre_tokenizer.pretokenizers[0].pattern = { Regex: RUST_PATTERN };
const js = lib.TokenizerLoader.fromPreTrained({ tokenizerJSON: jsJSON, tokenizerConfig });

const texts = readFileSync(corpusPath, "utf8").split("\n").filter((l) => l.length > 0).map((line, n) => {
  const value = JSON.parse(line);
  const text = typeof value === "string" ? value : value?.text;
  if (typeof text !== "string") die(`${corpusPath} line ${n + 1}: expected a JSON string or {"text": ...}`);
  return text;
});

const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
let hf = null;
if (crossCheck) {
  hf = require("tokenizers").Tokenizer.fromString(tokenizerText);
}
const out = [];
let mismatches = 0;
for (const [n, text] of texts.entries()) {
  const ids = Array.from(js.encode(text, { add_special_tokens: false }));
  if (hf) {
    const hfIds = Array.from((await hf.encode(text, null, { addSpecialTokens: false })).getIds());
    if (!same(ids, hfIds)) {
      ++mismatches;
      console.error(`encode: line ${n + 1} ${JSON.stringify(text).slice(0, 60)}: JS ${ids.join(" ")} vs HF ${hfIds.join(" ")}`);
    }
  }
  out.push(JSON.stringify({ ids }));
}
if (mismatches > 0) die(`${mismatches} of ${texts.length} lines: the JS tokenizer and Hugging Face tokenizers disagree`);
process.stdout.write(out.join("\n") + (out.length ? "\n" : ""));
console.error(`encode: ${texts.length} lines${hf ? " (JS and Hugging Face tokenizers agree)" : ""}`);
