// goldens.mjs: what the golden generators (tools/*_goldens/generate.mjs) share.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";

// Prints "generate: error: MESSAGE" on stderr and exits with status 1.
export function die(message) {
  console.error(`generate: error: ${message}`);
  process.exit(1);
}

// The node_modules directory holding a generator's pinned packages: the one the environment
// variable `envName` names, else the last line of stdout of fetch_deps.sh in the directory `here`.
export function nodeModules(here, envName) {
  return process.env[envName] ??
    execFileSync(join(here, "fetch_deps.sh"), { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] })
      .trim().split("\n").pop();
}

// --check: dies unless the committed goldens at `goldenPath` are exactly `output`.
export function checkCommitted(goldenPath, output) {
  let committed = "";
  try {
    committed = readFileSync(goldenPath, "utf8");
  } catch (e) {
    die(`cannot read ${goldenPath}: ${e.message}`);
  }
  if (committed !== output) die(`${goldenPath} is not what the generator produces; rerun without --check`);
}
