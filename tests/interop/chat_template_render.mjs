// Renders chat templates with @huggingface/jinja, the reference the project's interpreter is compared with.
// usage: node chat_template_render.mjs INPUT.json OUTPUT.json
//   INPUT:  {"templates": {"name": "source", ...}, "cases": [{"template": "name", "context": {...}}, ...]}
//   OUTPUT: [{"ok": true, "output": "..."} | {"ok": false, "error": "..."}, ...] in case order
// strftime_now() reads the clock: the date is pinned to 2024-07-26 (run with TZ=UTC) so renders repeat.
import { readFileSync, writeFileSync } from "node:fs";
import { Template } from "@huggingface/jinja";

const PINNED = Date.UTC(2024, 6, 26, 12, 0, 0);
const RealDate = Date;
globalThis.Date = class extends RealDate {
  constructor(...args) {
    super(...(args.length === 0 ? [PINNED] : args));
  }
  static now() {
    return PINNED;
  }
};

const [inputPath, outputPath] = process.argv.slice(2);
const input = JSON.parse(readFileSync(inputPath, "utf8"));
const compiled = {};
for (const [name, source] of Object.entries(input.templates)) {
  compiled[name] = new Template(source);
}
const results = input.cases.map(({ template, context }) => {
  try {
    return { ok: true, output: compiled[template].render(context) };
  } catch (error) {
    return { ok: false, error: String(error?.message ?? error) };
  }
});
writeFileSync(outputPath, JSON.stringify(results));
console.log(`rendered ${results.length} cases with @huggingface/jinja`);
