// Checks constrained outputs with validators independent of the project: ajv (JSON Schema, with
// ajv-formats' full-mode formats), JavaScript's RegExp (whole-string match) and equality (choices).
// usage: node structured_validate.mjs < cases.jsonl
//   each line: {"kind":"json","schema":{...},"output":"..."} | {"kind":"regex","pattern":"...","output":"..."}
//              | {"kind":"choice","choices":["a","b"],"output":"..."}; an optional "id" names the case.
// Prints one line per failing case and exits 1 when any fails (2 for unreadable input).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const Ajv = require("ajv").default;
const Ajv2020 = require("ajv/dist/2020").default;
const addFormats = require("ajv-formats").default;

// Draft 2020-12 keywords (prefixItems, $defs with 2020 semantics) need Ajv2020; draft-07 schemas (items as
// a list, additionalItems) need the classic class. strict: false lets annotations such as x-* through.
// ajv 8 has no draft-04 class: its boolean exclusiveMinimum/exclusiveMaximum become draft-06 numbers.
function fromDraft4(node) {
  if (Array.isArray(node)) return node.map(fromDraft4);
  if (node === null || typeof node !== "object") return node;
  const out = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === "$schema" && /draft-04/.test(String(value))) continue;
    out[key] = key === "enum" || key === "const" || key === "default" ? value : fromDraft4(value);
  }
  for (const [flag, bound] of [["exclusiveMinimum", "minimum"], ["exclusiveMaximum", "maximum"]]) {
    if (typeof out[flag] !== "boolean") continue;
    if (out[flag] && bound in out) {
      out[flag] = out[bound];
      delete out[bound];
    } else {
      delete out[flag];
    }
  }
  return out;
}

function validatorFor(original) {
  const schema = fromDraft4(original);
  const text = JSON.stringify(schema);
  const draft2020 = /"prefixItems"|2020-12|2019-09/.test(text);
  const ajv = draft2020 ? new Ajv2020({ strict: false, allErrors: false }) : new Ajv({ strict: false });
  addFormats(ajv, { mode: "full" });
  return ajv.compile(schema);
}

// Python's named groups (?P<name>...) are JavaScript's (?<name>...); the u flag makes `.` and classes
// read code points, as the grammar does, when the pattern compiles under it.
function regexFor(pattern) {
  const source = `^(?:${pattern.replace(/\(\?P</g, "(?<")})$`;
  try {
    return new RegExp(source, "u");
  } catch {
    return new RegExp(source);
  }
}

function check(item) {
  const output = item.output;
  if (typeof output !== "string") return "output is not a string";
  if (item.kind === "json") {
    let value;
    try {
      value = JSON.parse(output);
    } catch (e) {
      return `not JSON (${e.message})`;
    }
    const validate = validatorFor(item.schema);
    return validate(value) ? null : `fails the schema: ${JSON.stringify(validate.errors)}`;
  }
  if (item.kind === "regex") return regexFor(item.pattern).test(output) ? null : "does not match the pattern";
  if (item.kind === "choice") return item.choices.includes(output) ? null : "is none of the choices";
  return `unknown kind ${JSON.stringify(item.kind)}`;
}

let lines;
try {
  lines = readFileSync(0, "utf8").split("\n").filter((line) => line.trim() !== "");
} catch (e) {
  console.log(`cannot read stdin: ${e.message}`);
  process.exit(2);
}
let failures = 0;
lines.forEach((line, index) => {
  let item;
  let problem;
  try {
    item = JSON.parse(line);
    problem = check(item);
  } catch (e) {
    problem = `cannot check: ${e.message}`;
  }
  if (problem) {
    failures += 1;
    const name = item && item.id !== undefined ? item.id : `line ${index + 1}`;
    console.log(`FAIL ${name}: ${JSON.stringify(item ? item.output : line).slice(0, 200)} ${problem}`);
  }
});
console.log(`${lines.length - failures} of ${lines.length} outputs valid`);
process.exit(failures ? 1 : 0);
