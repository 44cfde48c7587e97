// build_corpus.mjs: writes corpus.jsonl, the strings the golden tokenizer tests encode.
//
// Deterministic (no clock, no Math.random: a fixed-seed xorshift for the long random words);
// running it twice gives the same bytes. Each line is {"id": "<category>-<n>", "text": "..."}
// with every character outside printable ASCII written as a \u escape, so the file is
// reviewable and survives editors. Usage: node tools/tokenizer_goldens/build_corpus.mjs [OUT]
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = process.argv[2] ?? join(here, "corpus.jsonl");

const entries = [];
const seen = new Set();
const counters = new Map();
function add(category, text) {
  if (typeof text !== "string") throw new Error(`${category}: not a string`);
  if (seen.has(text)) return; // each string once (the first category wins)
  seen.add(text);
  const n = (counters.get(category) ?? 0) + 1;
  counters.set(category, n);
  entries.push({ id: `${category}-${String(n).padStart(3, "0")}`, text });
}
const addAll = (category, list) => list.forEach((t) => add(category, t));

// A fixed-seed xorshift32 for the long pseudo-random words.
let state = 0x2545f491;
function rand(n) {
  state ^= state << 13; state >>>= 0;
  state ^= state >>> 17;
  state ^= state << 5; state >>>= 0;
  return state % n;
}
const pick = (alphabet, length) => {
  const chars = [...alphabet];
  let s = "";
  for (let i = 0; i < length; ++i) s += chars[rand(chars.length)];
  return s;
};

// --- empty and whitespace-only --------------------------------------------------------------
addAll("empty", [""]);
addAll("space", [
  " ", "  ", "   ", "    ", " ".repeat(8), " ".repeat(16), " ".repeat(33), "\t", "\t\t", "\t\t\t\t",
  "\n", "\n\n", "\n\n\n", "\r", "\r\n", "\r\n\r\n", "\n\r", " \n", "\n ", " \n ", "  \n\n  ",
  "\t\n", "\n\t", " \t \t ", "\r\r\n", "\u000b", "\u000c", "\u000b\u000c", " \r\n \r\n ",
  "a b", "a  b", "a   b", "a    b", "a\tb", "a\t\tb", "a \tb", "a\t b", "a\nb", "a\n\nb", "a\n\n\nb",
  "a\r\nb", "a\r\n\r\nb", "a \nb", "a\n b", "a \n b", "a  \n  b", "a\rb", "a\r\rb",
  "  leading", "trailing  ", "  both  ", "\tleading tab", "trailing tab\t", "\nleading newline",
  "trailing newline\n", "trailing newlines\n\n\n", "x \r\n", "x\r\n ", "end.  \n", "end!\n\n  next",
  "word \t\n word", "one\n  two\n    three\n", "a \u000b b", "a\u000cb", "tab\tsep\tvalues\t1\t2\n",
]);

// --- prose ----------------------------------------------------------------------------------
addAll("prose", [
  "Hello world",
  "Hello, world!",
  "hello world",
  "HELLO WORLD",
  "The quick brown fox jumps over the lazy dog.",
  "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of foolishness.",
  "Call me Ishmael. Some years ago\u2014never mind how long precisely\u2014having little or no money in my purse, I thought I would sail about a little.",
  "\u201cI don\u2019t know,\u201d she said. \u201cWhy\u2019s it matter?\u201d",
  "Mr. and Mrs. Dursley, of number four, Privet Drive, were proud to say that they were perfectly normal, thank you very much.",
  "A paragraph.\n\nAnother paragraph, after a blank line.\n\n\nAnd a third one.",
  "Line one\r\nLine two\r\nLine three\r\n",
  "Questions? Answers! Interrobang?! Ellipsis... Dashes -- and - hyphens.",
  "e.g. i.e. etc. vs. U.S.A. Ph.D.",
  "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 co\u00f6perate fa\u00e7ade \u00fcber Stra\u00dfe",
  "Les \u00e9l\u00e8ves \u00e9taient tr\u00e8s fatigu\u00e9s apr\u00e8s l\u2019examen.",
  "Der schnelle braune Fuchs springt \u00fcber den faulen Hund. \u00c4rger, \u00d6l, \u00dcbel.",
  "El ping\u00fcino Wenceslao hizo kil\u00f3metros bajo exhaustiva lluvia y fr\u00edo, a\u00f1oraba a su querido cachorro. \u00bfQu\u00e9? \u00a1S\u00ed!",
  "\u0421\u044a\u0435\u0448\u044c \u0436\u0435 \u0435\u0449\u0451 \u044d\u0442\u0438\u0445 \u043c\u044f\u0433\u043a\u0438\u0445 \u0444\u0440\u0430\u043d\u0446\u0443\u0437\u0441\u043a\u0438\u0445 \u0431\u0443\u043b\u043e\u043a, \u0434\u0430 \u0432\u044b\u043f\u0435\u0439 \u0447\u0430\u044e.",
  "\u039e\u03b5\u03c3\u03ba\u03b5\u03c0\u03ac\u03b6\u03c9 \u03c4\u1f74\u03bd \u03c8\u03c5\u03c7\u03bf\u03c6\u03b8\u03cc\u03c1\u03b1 \u03b2\u03b4\u03b5\u03bb\u03c5\u03b3\u03bc\u03af\u03b1.",
  "Pchn\u0105\u0107 w t\u0119 \u0142\u00f3d\u017a je\u017ca lub o\u015bm skrzy\u0144 fig.",
  "T\u00fcrk\u00e7e: \u0130stanbul, \u0131\u015f\u0131k, \u011f\u00fczel.",
  "Ti\u1ebfng Vi\u1ec7t c\u00f3 d\u1ea5u: Ng\u01b0\u1eddi ta n\u00f3i r\u1eb1ng th\u1ebf gi\u1edbi.",
  "\u05e2\u05d1\u05e8\u05d9\u05ea: \u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
  "a", "A", "I", "I am.", "ok", "OK", "Ok.", "x", "?", "!", ".", ",", "-", "_", "'", "\"", "`",
  "@user #hashtag $money %percent ^caret &amp *star (paren) [bracket] {brace} <angle> |pipe| \\back/slash ~tilde",
  "The year 2024 had 366 days; 1/3 of 99 is 33.",
  "mixedCase camelCaseWord PascalCase snake_case_word kebab-case-word SCREAMING_CASE",
  "Email me at someone@example.com or visit https://www.example.org/path?query=1&x=y#frag.",
  "# Heading\n\n- item one\n- item two\n\n**bold** _italic_ `code` [link](http://x.y)\n",
  "<html><body><p class=\"x\">Hi &amp; bye</p></body></html>",
  "$$\\int_0^\\infty e^{-x^2}\\,dx = \\frac{\\sqrt{\\pi}}{2}$$",
  "!!!", "???", "...", "!!!\n", "...\n\n", "?!\r\n", "--\n--\n", ";;\n\n\n", "a!!!\nb", ").\n\n",
]);

// --- contractions in every case ---------------------------------------------------------------
{
  const forms = ["s", "t", "re", "ve", "m", "ll", "d"];
  const cases = (w) => {
    // every upper/lower combination of the letters
    const out = [];
    for (let mask = 0; mask < 1 << w.length; ++mask) {
      out.push([...w].map((c, i) => (mask >> i) & 1 ? c.toUpperCase() : c).join(""));
    }
    return out;
  };
  for (const f of forms) for (const c of cases(f)) add("contraction", `'${c}`);
  for (const f of forms) for (const c of cases(f)) add("contraction", `it'${c} x`);
  addAll("contraction", [
    "I'm", "I'M", "you're", "YOU'RE", "You'Re", "we've", "WE'VE", "they'll", "THEY'LL", "They'Ll",
    "she'd", "SHE'D", "don't", "DON'T", "Don'T", "isn't", "it's", "IT'S", "It'S", "John's", "JOHN'S",
    "can't won't shouldn't", "I'd've", "y'all", "'tis", "rock 'n' roll", "o'clock", "O'Neil", "'90s",
    "''s", "'''", "'", "x'", "'x", "' s", "'s'", "'ss", "'sa", "'S1", "'re'", "'llama", "'dd", "'m2",
    "he said 'hello'", "'Twas brillig", "the cats' toys", "the boss's office",
    "don\u2019t", "it\u2019s", "DON\u2019T",
    "it'\u017f", "IT'\u017f", "'\u017f", "'\u017ft", "the dog'\u017f bone", "'\u017f'\u017f",
    "\u212a", "'\u212a", "\u212aelvin 300\u212a", "'K", "'k",
    "'\u0131", "'\u0130", "'\u1e9e", "'\u00df", "'\ufb06", "'\ufb05",
  ]);
}

// --- numbers of every length ----------------------------------------------------------------
{
  const digits = "31415926535897932384626433832795028841971693993751";
  for (let n = 1; n <= 24; ++n) add("number", digits.slice(0, n));
  addAll("number", [
    "0", "00", "000", "0000", "1000000", "1,000,000", "1.000.000,00", "3.14159", "-42", "+7", "1e10", "6.022e23",
    "0x1F", "0b1010", "1_000_000", "2024-06-30", "12:34:56", "+1 (555) 123-4567", "v1.2.3", "50%", "$19.99",
    "\u20ac5,00", "\u00a3100", "\u00a5500", "1st 2nd 3rd 4th", "abc123def", "123abc", "a1b2c3", "R2D2 C3PO",
    "\u0661\u0662\u0663", "\u0967\u0968\u0969", "\uff11\uff12\uff13", "\u00b2\u00b3\u00b9", "\u2163 \u216b", "\u00bd \u00bc \u00be",
    "\u4e00\u4e8c\u4e09", "\u2460\u2461\u2462", "\ud835\udfd9\ud835\udfda", "\u0e51\u0e52\u0e53",
    " 1", " 12", " 123", "1 2 3", "12 34 56", "\n42\n",
  ]);
  add("number", "9".repeat(100));
}

// --- code with indentation --------------------------------------------------------------------
addAll("code", [
  "def f(x):\n    return x * 2\n",
  "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n\n\nprint(fib(10))\n",
  "class Foo:\n    \"\"\"Docstring.\"\"\"\n\n    def __init__(self, a: int = 0) -> None:\n        self.a = a  # comment\n",
  "#include <cstdio>\n\nint main(int argc, char** argv) {\n  for (int i = 0; i < argc; ++i) {\n    std::printf(\"%s\\n\", argv[i]);\n  }\n  return 0;\n}\n",
  "template <typename T>\nstd::vector<T> v{1, 2, 3};\nauto x = v[0] << 2 >> 1 && !y || z != w;\n",
  "function add(a, b) {\n\treturn a + b;\n}\n\nconst arrow = (x) => x ?? null;\n",
  "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!(\"{:?}\", v);\n}\n",
  "{\n  \"name\": \"kipp\",\n  \"version\": \"0.1.0\",\n  \"list\": [1, 2, 3],\n  \"nested\": {\"a\": null, \"b\": true}\n}\n",
  "key: value\nlist:\n  - one\n  - two\nnested:\n    deep: 1\n",
  "all: build\n\nbuild:\n\t$(CC) -O2 -o app main.c\n\t@echo done\n",
  "#!/usr/bin/env bash\nset -euo pipefail\nfor f in *.txt; do\n  echo \"$f\" | wc -c\ndone\n",
  "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC LIMIT 10;",
  "if (a) {\r\n    b();\r\n}\r\n",
  "    indented four\n        indented eight\n\t\ttabs two\n",
  "x = [\n    1,\n    2,\n]\n\n\n\n",
  "    \n    \n",
  "        return;        \n",
  "// TODO: fix\n/* block\n   comment */\n",
  "<div>\n  <span>{{ value }}</span>\n</div>\n",
  "a==b!=c<=d>=e->f=>g::h...i",
  "foo.bar().baz()?.qux[0]!",
  "print('it''s')\nprint(\"it's\")\n",
  "\treturn x;\n\t}\n}\n",
  "    ",
  "import numpy as np\nimport torch.nn.functional as F\n\nx = np.zeros((3, 4), dtype=np.float32)\n",
]);

// --- CJK, Japanese, Korean -------------------------------------------------------------------
addAll("cjk", [
  "\u4f60\u597d",
  "\u4f60\u597d\uff0c\u4e16\u754c\uff01",
  "\u6211\u7231\u5317\u4eac\u5929\u5b89\u95e8\u3002",
  "\u4eca\u5929\u5929\u6c14\u5f88\u597d\uff0c\u6211\u4eec\u53bb\u516c\u56ed\u6563\u6b65\u5427\u3002",
  "\u7e41\u9ad4\u4e2d\u6587\u6e2c\u8a66\uff1a\u81fa\u7063\u3001\u9999\u6e2f\u3002",
  "Qwen\u662f\u963f\u91cc\u5df4\u5df4\u5f00\u53d1\u7684\u5927\u8bed\u8a00\u6a21\u578b\uff08LLM\uff09\u3002",
  "\u4ef7\u683c\uff1a100\u5143\uff0c\u6298\u62638.5\u6298\u3002",
  "\u4e2d\u6587 English \u6df7\u5408 text 123 \u6d4b\u8bd5",
  "\u300c\u5f15\u7528\u300d\u300e\u53cc\u5f15\u53f7\u300f\u3010\u62ec\u53f7\u3011\u2026\u2026\u2014\u2014",
  "\uff21\uff22\uff23\uff41\uff42\uff43\uff01\uff1f",
  "\u3053\u3093\u306b\u3061\u306f\u4e16\u754c",
  "\u79c1\u306f\u5b66\u751f\u3067\u3059\u3002\u6771\u4eac\u306b\u4f4f\u3093\u3067\u3044\u307e\u3059\u3002",
  "\u30ab\u30bf\u30ab\u30ca\u3068\u3072\u3089\u304c\u306a\u3068\u6f22\u5b57",
  "\u30b3\u30f3\u30d4\u30e5\u30fc\u30bf\u30fc\u30fb\u30b5\u30a4\u30a8\u30f3\u30b9",
  "\uff76\uff9e\uff77\uff9e\uff78\uff9e \uff8a\uff9d\uff76\uff78",
  "\u304b\u3099\u304d\u3099\u304f\u3099",
  "\u3042\u3000\u3044\u3000\u3046",
  "\uc548\ub155\ud558\uc138\uc694",
  "\ud55c\uad6d\uc5b4 \ubb38\uc7a5\uc785\ub2c8\ub2e4. \uc11c\uc6b8\uc5d0 \uc0b4\uc544\uc694.",
  "\u1100\u1161\u11a8",
  "\u1112\u1161\u11ab\u1100\u1173\u11af",
  "\u3131\u314f\u3134",
]);

// --- other scripts ----------------------------------------------------------------------------
addAll("script", [
  "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
  "\u0627\u0644\u0644\u063a\u0629 \u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u062c\u0645\u064a\u0644\u0629\u060c \u0623\u0644\u064a\u0633 \u0643\u0630\u0644\u0643\u061f",
  "\u0628\u0650\u0633\u0652\u0645\u0650 \u0627\u0644\u0644\u0651\u064e\u0647\u0650",
  "\u0627\u0644\u0639\u062f\u062f \u0661\u0662\u0663 \u0648 123",
  "\u0646\u0645\u0633\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e",
  "\u0939\u093f\u0928\u094d\u0926\u0940 \u092d\u093e\u0937\u093e \u092c\u0939\u0941\u0924 \u0938\u0941\u0902\u0926\u0930 \u0939\u0948\u0964",
  "\u0915\u094d\u0937 \u0924\u094d\u0930 \u091c\u094d\u091e \u0936\u094d\u0930",
  "\u0938\u0902\u0938\u094d\u0915\u0943\u0924\u092e\u094d",
  "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a",
  "\u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22\u0e44\u0e21\u0e48\u0e21\u0e35\u0e0a\u0e48\u0e2d\u0e07\u0e27\u0e48\u0e32\u0e07\u0e23\u0e30\u0e2b\u0e27\u0e48\u0e32\u0e07\u0e04\u0e33",
  "\u0e01\u0e23\u0e38\u0e07\u0e40\u0e17\u0e1e\u0e21\u0e2b\u0e32\u0e19\u0e04\u0e23 \u0e2f\u0e25\u0e2f",
  "\u09ac\u09be\u0982\u09b2\u09be \u09ad\u09be\u09b7\u09be",
  "\u0ba4\u0bae\u0bbf\u0bb4\u0bcd \u0bae\u0bca\u0bb4\u0bbf",
  "\u0c24\u0c46\u0c32\u0c41\u0c17\u0c41",
  "\u10e5\u10d0\u10e0\u10d7\u10e3\u10da\u10d8",
  "\u0540\u0561\u0575\u0565\u0580\u0565\u0576",
  "\u12a0\u121b\u122d\u129b",
  "\u1781\u17d2\u1798\u17c2\u179a",
  "\u1019\u103c\u1014\u103a\u1019\u102c",
  "\u0ea5\u0eb2\u0ea7",
  "\u0f56\u0f7c\u0f51\u0f0b\u0f61\u0f72\u0f42",
  "\u0dc3\u0dd2\u0d82\u0dc4\u0dbd",
  "\u13e3\u13b3\u13a9",
  "\u1406\u14c4\u1483",
  "\ud800\udf48\ud800\udf3f\ud800\udf39",
  "\ud835\udd4f\ud835\udd50\ud835\udd52 \ud835\udc00\ud835\udc01",
  "\u00c5ngstr\u00f6m \u212b \u2126 \u00b5 \u03bc",
  "\ue000\ue001 private use",
  "\ufffd replacement \ufffd",
  "\u2603\u2665\u2660\u263a \u2190\u2192\u2191\u2193 \u2200\u2203\u2205\u2208 \u221e\u2248\u2260",
  "\u00a9 \u00ae \u2122 \u00a7 \u00b6 \u2020 \u2021 \u2022 \u00b0",
]);

// --- emoji ----------------------------------------------------------------------------------
addAll("emoji", [
  "\ud83d\ude00",
  "\ud83d\ude00\ud83d\ude03\ud83d\ude04",
  "I \u2764\ufe0f you",
  "\u2764",
  "\ud83d\udc4d\ud83c\udffb \ud83d\udc4d\ud83c\udffc \ud83d\udc4d\ud83c\udffd \ud83d\udc4d\ud83c\udffe \ud83d\udc4d\ud83c\udfff",
  "\ud83d\udc68\u200d\ud83d\udc69\u200d\ud83d\udc67\u200d\ud83d\udc66",
  "\ud83d\udc69\ud83c\udffd\u200d\ud83d\udcbb",
  "\ud83c\udff3\ufe0f\u200d\ud83c\udf08",
  "\ud83e\uddd1\ud83c\udffe\u200d\ud83e\udd1d\u200d\ud83e\uddd1\ud83c\udffb",
  "\ud83c\uddfa\ud83c\uddf8\ud83c\uddef\ud83c\uddf5\ud83c\udde8\ud83c\uddf3",
  "1\ufe0f\u20e3 #\ufe0f\u20e3",
  "\ud83c\udff4\udb40\udc67\udb40\udc62\udb40\udc65\udb40\udc6e\udb40\udc67\udb40\udc7f",
  "Party time! \ud83c\udf89\ud83c\udf8a\ud83e\udd73",
  "\ud83d\ude00hello\ud83d\ude00",
  "emoji\ud83d\udc4dword",
  "\u263a\ufe0e \u263a\ufe0f",
  "\ud83e\udd16\ud83e\udde0\ud83d\udca1",
]);

// --- NFD input with combining marks (normalized to NFC before splitting) ----------------------
addAll("nfd", [
  "e\u0301", "cafe\u0301", "Cafe\u0301 na\u0131\u0308ve", "A\u030angstro\u0308m", "n\u0303", "u\u0308ber",
  "a\u0323\u0302", "a\u0302\u0323", "o\u031b\u0301", "Vie\u0323\u0302t Nam", "\u0301", "\u0301\u0301\u0301",
  " \u0301", "x\u0338", "=\u0338", "<\u0338", ">\u0338", "q\u0307\u0323", "s\u0323\u0307", "\u212b", "\u212a",
  "\u2126", "\uf900", "\u0344", "\u0958", "\u1e9b\u0323", "\u00c7\u0301", "C\u0327\u0301", "\u0041\u030a",
  "\u1100\u1161", "\u1100\u1161\u11a8\u1100\u1161",
  "\u0915\u093c", "\u05e9\u05bc\u05c1",
  "e\u0301\u0301e\u0301", "1\u0301", "!\u0301", "\u4e00\u0301", "\ud83d\ude00\u0301",
]);

// --- zero-width, format and control characters ------------------------------------------------
addAll("control", [
  "zero\u200bwidth", "zw\u200cnj", "zw\u200dj", "word\u2060joiner", "soft\u00adhyphen", "\u200b", "\u200b\u200b",
  "a \u200b b", "\u200e\u200f", "ltr\u200emark", "\u202aembed\u202c", "\u2066isolate\u2069",
  "\u0000", "a\u0000b", "\u0001\u0002\u0003", "\u0007bell", "\u0008", "\u001b[31mred\u001b[0m", "\u001c\u001d\u001e\u001f",
  "a\u001fb", "a \u001f b", "\u007f", "del\u007fete", "\u0080", "\u0081\u0090\u009f", "\u0094",
  "\u034f", "\u180b", "\ufe0f", "\ufe00x",
]);

// --- Unicode whitespace: where JavaScript's \s and Rust/Oniguruma's \s disagree ---------------
// U+0085 is White_Space (Rust) but not JS \s; U+FEFF is JS \s but not White_Space; U+180E is
// neither since Unicode 6.3 (but PCRE2's \h still lists it); the others are \s everywhere.
{
  const ws = ["\u0085", "\u00a0", "\u1680", "\u180e", "\u2000", "\u2007", "\u200a", "\u2028", "\u2029",
    "\u202f", "\u205f", "\u3000", "\ufeff"];
  for (const c of ws) {
    add("uws", c);
    add("uws", `a${c}b`);
    add("uws", `a ${c}b`);
    add("uws", `a${c} b`);
    add("uws", `a${c}${c}b`);
    add("uws", `a${c}\nb`);
    add("uws", `a\n${c}b`);
    add("uws", `x${c}`);
    add("uws", `x ${c}`);
    add("uws", `${c}x`);
    add("uws", `!${c}!`);
    add("uws", `${c} ${c}`);
  }
  addAll("uws", [
    "\ufeffBOM at start", "BOM at end\ufeff", "a\u0085\u0085\u0085b", "a \u0085 b", "1\u00a0000", "100\u00a0km",
    "\u3000\u3000\u5168\u89d2\u7a7a\u683c", "one\u2028two\u2029three", "\u0085\n", "\n\u0085", "\r\u0085",
    "x\u0085\u0085", "\ufeff\ufeff", "x \ufeff \ufeff", "\u00a0\u00a0", "a\u00a0\u00a0b", "end.\u0085",
    "end.\ufeff", "'s\u0085", "\u0085's", "\u0085\u0085", "  \u0085  ", "\t\u0085\t", "\u180e\u180e", " \u180e ",
  ]);
}

// --- special / added tokens: alone, inside text, adjacent, and near-misses ---------------------
const SPECIALS = [
  "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
  "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
  "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>",
  "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>",
  "<think>", "</think>",
];
for (const s of SPECIALS) add("special", s);
SPECIALS.forEach((s, i) => {
  const contexts = [`Hello${s}world`, ` ${s} `, `x ${s}\n`, `${s}${s}`, `text.${s}`, `\n\n${s}\n\n`];
  add("special_in_text", contexts[i % contexts.length]);
  add("special_in_text", `before ${s}after`);
});
addAll("special_in_text", [
  "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n",
  "<|im_start|>assistant\n<think>\nLet me think.\n</think>\n\nThe answer is 42.<|im_end|>\n",
  "<|im_start|>assistant\n<think>\n\n</think>\n\n",
  "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
  "<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response><|im_end|>\n",
  "<|fim_prefix|>def f():\n    <|fim_suffix|>\n    return x<|fim_middle|>",
  "<|repo_name|>kipp\n<|file_sep|>src/main.cpp\nint main() {}\n",
  "<|vision_start|><|image_pad|><|image_pad|><|vision_end|>describe",
  "<|endoftext|><|endoftext|><|endoftext|>",
  "<think></think>", "<think><think>", "</think><think>", "<|im_end|><|im_start|>",
  "<think>\u0338", "<think>\u0301", "e<think>\u0301", "<|im_start|>\u0338", "x\u0338<think>", "<tool_call>\u0338x",
  "\u4f60\u597d<|im_end|>\u4e16\u754c", "\ud83d\ude00<think>\ud83d\ude00", "it<|im_end|>'s", "'<think>s", "1<|im_end|>2",
  "  <|im_start|>  ", "\t<think>\t", "\r\n<|im_end|>\r\n",
]);
addAll("near_miss", [
  "<|im_start|", "|im_start|>", "<|im_start", "im_start", "<|im_start |>", "<| im_start|>", "<|IM_START|>",
  "<|im_start|>>", "<<|im_start|>", "<|im_start||>", "<|im_sta rt|>", "<|endoftext", "<|endoftext|>|>",
  "<|endoftext|", "<think >", "< think>", "<think", "think>", "<THINK>", "<Think>", "</think", "</ think>",
  "<//think>", "<think/>", "<thinking>", "<tool_call", "<tool_callx>", "<tool_call >", "</tool_call",
  "<tool_response", "<tool_responses>", "<|fim_prefix", "<|fim_|>", "<|file_sep", "<|box|>", "<||>", "<|>",
  "<>", "< >", "<|", "|>", "<", ">", "\uff1c|im_start|\uff1e", "<\uff5cim_start\uff5c>", "<\u200b|im_start|>",
  "<|im_\u200bstart|>", "<|im_start|\u200b>", "<|im\u2010start|>", "<|im_start|>"[0] + "\u0338|im_start|>",
  "&lt;|im_start|&gt;", "\\<|im_start|\\>", "<|<|im_start|>|>",
]);

// --- very long words and runs ----------------------------------------------------------------
add("long", "a".repeat(5000));
add("long", pick("abcdefghijklmnopqrstuvwxyz", 5000));
add("long", pick("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", 3000));
add("long", "x" + "y".repeat(1000) + " z");
add("long", "ab".repeat(1500));
add("long", "supercalifragilisticexpialidocious antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis");
add("long", "1".repeat(1000));
add("long", pick("0123456789", 500));
add("long", "!".repeat(3000));
add("long", "-=".repeat(500) + "\n");
add("long", " ".repeat(2000));
add("long", " ".repeat(1000) + "x");
add("long", "\n".repeat(1000));
add("long", "\t".repeat(300) + "x");
add("long", "\u4e00".repeat(2000));
add("long", pick("\u7684\u4e00\u662f\u4e86\u6211\u4e0d\u4eba\u5728\u4ed6\u6709\u8fd9\u4e2a\u4e0a\u4eec\u6765\u5230", 2000));
add("long", "\ud83d\ude00".repeat(500));
add("long", "\u00e9".repeat(1000));
add("long", "e\u0301".repeat(1000));
add("long", "\u0645\u0631\u062d\u0628\u0627".repeat(300));
add("long", "word ".repeat(1000));
add("long", "https://example.com/" + pick("abcdefghijklmnopqrstuvwxyz0123456789/-_", 800));
add("long", pick("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", 1200) + "==");
add("long", pick("0123456789abcdef", 1024));
add("long", "'s".repeat(500));
add("long", "<|im_start|>".repeat(200));
add("long", "<think>".repeat(100) + "a".repeat(100));

// --- mixed documents --------------------------------------------------------------------------
addAll("mixed", [
  "English, \u4e2d\u6587, \u65e5\u672c\u8a9e, \ud55c\uad6d\uc5b4, \u0627\u0644\u0639\u0631\u0628\u064a\u0629, \u0939\u093f\u0928\u094d\u0926\u0940, \u0e44\u0e17\u0e22 \ud83d\ude00!",
  "Price: $1,234.56 (\u20ac1.150,00) \u2014 50% off!!! \ud83c\udf89\n",
  "User: what's 2+2?\nAssistant: It's 4.\n",
  "Q: Isn't it 'great'?\r\nA: YES, IT'S GREAT!\r\n",
  "\t\u4f60\u597d\t\u4e16\u754c\t\n",
  "  \u00e9t\u00e9\u00a0\u00e0 Paris\u2026  ",
  "\u05e9\u05dc\u05d5\u05dd hello \u0645\u0631\u062d\u0628\u0627 123",
  "a\u00adb\u200bc\u200dd\ufeffe\u0085f",
  "The \ud835\udc31-axis and \ud835\udc32-axis; \u2200x\u2208\u211d: x\u00b2\u22650.",
  "Temperature: 20\u00b0C = 68\u00b0F; 300 \u212a",
  "\u201cSmart quotes\u201d and \u2018single\u2019 and \u00abguillemets\u00bb and \u201elow\u201c",
  "line\u2028separator and paragraph\u2029separator",
  "CRLF\r\n\r\n\r\nmany\r\n",
  "mixed \r\n\n\r endings\n\r\n",
]);

const lines = entries.map((e) => JSON.stringify(e).replace(/[^\x20-\x7e]/g,
  (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0")));
writeFileSync(out, lines.join("\n") + "\n");
const byCategory = [...counters].map(([k, v]) => `${k} ${v}`).join(", ");
console.error(`build_corpus: ${entries.length} strings (${byCategory}) -> ${out}`);
