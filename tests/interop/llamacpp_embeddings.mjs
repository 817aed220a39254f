// llama.cpp's embedding of a token sequence (node-llama-cpp's CPU backend): the file's {arch}.pooling_type
// applied by llama.cpp, then L2-normalised (llama.cpp's pooled vectors are raw; its embedding tools normalise
// them, as sentence-transformers' Normalize module does).
// usage: node llamacpp_embeddings.mjs --model FILE.gguf [--model ...] --tokens 1,2,3 [--threads N]
// Prints one JSON object: {"models": [{"model", "tokens", "embedding"}]}, "tokens" being what llama.cpp
// evaluated: node-llama-cpp adds the vocabulary's BOS and EOS where the file asks for them, so the engine is
// run on these, not on --tokens.
import { loadModel, openLlama, integerFlag, parseFlags, parseTokenIds, runMain } from "../llamacpp/llama.mjs";

const USAGE = "usage: node llamacpp_embeddings.mjs --model FILE.gguf [--model ...] --tokens IDS [--threads N]";

// The tokens node-llama-cpp's embedding context evaluates for `tokens` (its public BOS/EOS rules for the
// byte-level and SentencePiece vocabularies the project writes).
function evaluatedTokens(model, tokens) {
  const out = [...tokens];
  const { bos, eos } = model.tokens;
  if (model.tokens.shouldPrependBosToken && bos !== null && out[0] !== bos) out.unshift(bos);
  if (model.tokens.shouldAppendEosToken && eos !== null && out.at(-1) !== eos) out.push(eos);
  return out;
}

function normalised(vector) {
  let sum = 0;
  for (const v of vector) sum += v * v;
  const norm = Math.sqrt(sum);
  if (!(norm > 0)) throw new Error(`llama.cpp returned an embedding of norm ${norm}`);
  return Array.from(vector, (v) => v / norm);
}

async function embed(llama, path, { tokens, threads }) {
  const model = await loadModel(llama, path);
  const context = await model.createEmbeddingContext({ contextSize: 256, ...(threads > 0 ? { threads } : {}) });
  try {
    const evaluated = evaluatedTokens(model, tokens);
    const { vector } = await context.getEmbeddingFor([...evaluated]);
    if (vector.length === 0) throw new Error(`llama.cpp returned no embedding for ${path}`);
    return { model: path, tokens: evaluated, embedding: normalised(vector) };
  } finally {
    await context.dispose();
    await model.dispose();
  }
}

runMain("llamacpp_embeddings", async () => {
  const flags = parseFlags(process.argv.slice(2), ["model", "tokens", "threads"], USAGE);
  if (!flags.model) throw new Error(`--model is required\n${USAGE}`);
  if (!flags.tokens) throw new Error(`--tokens is required\n${USAGE}`);
  const options = { tokens: parseTokenIds(flags.tokens.at(-1), "--tokens"), threads: integerFlag(flags, "threads", 0) };
  const llama = await openLlama(options.threads);
  const models = [];
  for (const path of flags.model) models.push(await embed(llama, path, options));
  process.stdout.write(JSON.stringify({ models }) + "\n");
});
