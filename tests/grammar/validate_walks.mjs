// Validates constrained-decoding outputs with ajv, independently of Kipp's grammar compiler.
// Usage: KIPP_CLIENT_NODE_MODULES=path/to/node_modules node validate_walks.mjs WALKS.jsonl
// Each line is {"schema": ..., "output": "..."}; every output must parse as JSON and satisfy
// its schema (JSON Schema 2020-12, formats through ajv-formats). Exits non-zero on the first
// line that does not, or when nothing was checked.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const modules = process.env.KIPP_CLIENT_NODE_MODULES;
const file = process.argv[2];
if (!modules || !file) {
  console.error("usage: KIPP_CLIENT_NODE_MODULES=DIR node validate_walks.mjs WALKS.jsonl");
  process.exit(2);
}
const require = createRequire(path.join(path.resolve(modules), "noop.js"));
const Ajv2020 = require("ajv/dist/2020").default;
const addFormats = require("ajv-formats");
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);

let checked = 0;
const lines = readFileSync(file, "utf8").split("\n").filter((line) => line.trim() !== "");
for (const [index, line] of lines.entries()) {
  const { schema, output } = JSON.parse(line);
  let value;
  try {
    value = JSON.parse(output);
  } catch (error) {
    console.error(`line ${index + 1}: output is not JSON (${error.message}): ${output}`);
    process.exit(1);
  }
  const validate = ajv.compile(schema);
  if (!validate(value)) {
    console.error(`line ${index + 1}: ${ajv.errorsText(validate.errors)}\nschema ${JSON.stringify(schema)}\noutput ${output}`);
    process.exit(1);
  }
  ++checked;
}
if (checked === 0) {
  console.error("no outputs to check");
  process.exit(1);
}
console.log(`validate_walks: ${checked} outputs valid`);
