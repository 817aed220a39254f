// Compares the project's reading of a GGUF file (model-file-inspect --json) with @huggingface/gguf's.
// usage: node gguf_crosscheck.mjs FILE.gguf OURS.json   — exits 0 when every field agrees.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { gguf } from "@huggingface/gguf";

const [file, oursPath] = process.argv.slice(2);
const ours = JSON.parse(readFileSync(oursPath, "utf8"));
const theirs = await gguf(file, { allowLocalFile: true, typedMetadata: true });

const TYPE_NAMES = ["UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32", "BOOL", "STRING", "ARRAY",
                    "UINT64", "INT64", "FLOAT64"];
const problems = [];
const expect = (ok, what) => { if (!ok) problems.push(what); };

// The package keeps its bits-per-weight table private; read it from its own source so every ggml type
// size the project uses is checked against an independent table.
function quantBitsPerWeight() {
  const require = createRequire(import.meta.url);
  const source = readFileSync(require.resolve("@huggingface/gguf"), "utf8");
  const body = source.match(/var GGML_QUANT_SIZES = \{([\s\S]*?)\n\};/)[1];
  const { GGMLQuantizationType } = require("@huggingface/gguf");
  return new Function("import_tasks", "calcBPW", "QK_K", `return {${body}};`)(
    { GGMLQuantizationType }, (block, bytes) => (bytes * 8) / block, 256);
}

// Our JSON writes 64-bit integers as strings and non-finite floats as names; bring theirs to that form.
function normalize(value) {
  if (typeof value === "bigint") return value.toString();
  if (Array.isArray(value)) return value.map(normalize);
  if (typeof value === "number" && !Number.isFinite(value)) return Number.isNaN(value) ? "NaN" : value > 0 ? "Infinity" : "-Infinity";
  return value;
}
function same(a, b) {
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => same(x, b[i]));
  }
  return Object.is(a, b);
}

expect(theirs.metadata.version === ours.version, `version: theirs ${theirs.metadata.version}, ours ${ours.version}`);
const ourKeys = Object.keys(ours.metadata);
expect(Number(theirs.metadata.kv_count) === ourKeys.length, `kv_count: theirs ${theirs.metadata.kv_count}, ours ${ourKeys.length}`);
for (const key of ourKeys) {
  const typed = theirs.typedMetadata[key];
  if (!typed) { problems.push(`key ${key}: missing in theirs`); continue; }
  const mine = ours.metadata[key];
  expect(TYPE_NAMES[typed.type] === mine.type, `key ${key}: type theirs ${TYPE_NAMES[typed.type]}, ours ${mine.type}`);
  if (mine.type === "ARRAY") {
    expect(TYPE_NAMES[typed.subType] === mine.element_type,
           `key ${key}: element type theirs ${TYPE_NAMES[typed.subType]}, ours ${mine.element_type}`);
  }
  const value = normalize(typed.value);
  expect(same(value, mine.value), `key ${key}: value theirs ${JSON.stringify(value)}, ours ${JSON.stringify(mine.value)}`);
}

expect(theirs.tensorInfos.length === ours.tensors.length,
       `tensor count: theirs ${theirs.tensorInfos.length}, ours ${ours.tensors.length}`);
expect(String(theirs.tensorDataOffset) === ours.data_offset,
       `data offset: theirs ${theirs.tensorDataOffset}, ours ${ours.data_offset}`);
const bpw = quantBitsPerWeight();
theirs.tensorInfos.forEach((t, i) => {
  const mine = ours.tensors[i];
  if (!mine) return;
  expect(t.name === mine.name, `tensor ${i}: name theirs ${t.name}, ours ${mine.name}`);
  expect(same(t.shape.map(String), mine.dims), `tensor ${t.name}: dims theirs ${t.shape}, ours ${mine.dims}`);
  expect(t.dtype === mine.type_id, `tensor ${t.name}: type theirs ${t.dtype}, ours ${mine.type_id}`);
  expect(String(t.offset) === mine.offset, `tensor ${t.name}: offset theirs ${t.offset}, ours ${mine.offset}`);
  const elements = t.shape.reduce((a, b) => a * b, 1n);
  const bytes = (Number(elements) * bpw[t.dtype]) / 8;
  expect(bytes === Number(mine.size), `tensor ${t.name} (${mine.type}): size theirs ${bytes}, ours ${mine.size}`);
});

if (problems.length) {
  console.error(`${file}: ${problems.length} disagreement(s) with @huggingface/gguf:\n  ${problems.join("\n  ")}`);
  process.exit(1);
}
console.log(`${file}: ${ourKeys.length} metadata entries and ${ours.tensors.length} tensors agree with @huggingface/gguf`);
