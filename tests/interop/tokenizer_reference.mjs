// Tokenizes a corpus with the two reference implementations, for the C++ tokenizer's conformance test.
// usage: node tokenizer_reference.mjs CONFIG.json CORPUS.json OUT.json TOKENIZER.json...
//   CORPUS.json is an array of strings; each TOKENIZER.json is read with CONFIG.json (tokenizer_config).
//   OUT.json receives one entry per tokenizer: {js, js_error, rust, rust_decoded, rust_decoded_skip}: the
//   ids of each string from both (special tokens added), and Rust's decode of its own ids without and with
//   skip_special_tokens. js is null (and js_error says why) when tokenizers.js refuses the tokenizer.
import { readFileSync, writeFileSync } from "node:fs";
import { Tokenizer as JsTokenizer } from "@huggingface/tokenizers";
import rust from "tokenizers";

const [configPath, corpusPath, outPath, ...tokenizerPaths] = process.argv.slice(2);
const config = JSON.parse(readFileSync(configPath, "utf8"));
const corpus = JSON.parse(readFileSync(corpusPath, "utf8"));

const results = [];
for (const path of tokenizerPaths) {
  const result = {};
  // @huggingface/tokenizers: Hugging Face's JavaScript implementation.
  try {
    const js = new JsTokenizer(JSON.parse(readFileSync(path, "utf8")), config);
    result.js = corpus.map((text) => js.encode(text, { add_special_tokens: true }).ids);
  } catch (error) {
    result.js = null;
    result.js_error = String(error);
  }
  // tokenizers: the Rust implementation (what transformers runs), through its node binding.
  const rt = rust.Tokenizer.fromFile(path);
  const encodings = await rt.encodeBatch(corpus, { addSpecialTokens: true });
  result.rust = encodings.map((encoding) => Array.from(encoding.getIds()));
  result.rust_decoded = await rt.decodeBatch(result.rust, false);
  result.rust_decoded_skip = await rt.decodeBatch(result.rust, true);
  results.push(result);
}
writeFileSync(outPath, JSON.stringify(results));
console.log(`tokenized ${corpus.length} strings with ${tokenizerPaths.length} tokenizers`);
