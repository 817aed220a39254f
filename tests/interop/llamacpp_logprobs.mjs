// llama.cpp's log-probabilities on a token sequence, teacher-forced (node-llama-cpp's CPU backend).
// usage: node llamacpp_logprobs.mjs --model FILE.gguf [--model ...] --tokens 1,2,3 [--greedy N] [--full 1]
//        [--threads N]
// For each model: --greedy N first extends the tokens with llama.cpp's own N greedy tokens (argmax of its
// logits, one token per step); the whole path is then evaluated in one pass with logits at every position.
// Prints one JSON object: {"models": [{"model", "vocab_size", "tokens": path, "positions": [{"next",
// "logprob"} ...]}]}, position p scoring path token p + 1 (the last position scores nothing: next null), with
// "logprobs" (the whole vocabulary's, float64 log-softmax of llama.cpp's f32 logits) when --full is 1.
import { loadModel, openLlama, integerFlag, parseFlags, parseTokenIds, runMain } from "../llamacpp/llama.mjs";

const USAGE = "usage: node llamacpp_logprobs.mjs --model FILE.gguf [--model ...] --tokens IDS [--greedy N] [--full 0|1] [--threads N]";

// A vocabulary-sized array of logits from node-llama-cpp's token → logit map.
function logitRow(map, vocabSize) {
  if (!map || map.size !== vocabSize) {
    throw new Error(`llama.cpp returned ${map ? map.size : "no"} logits where the vocabulary has ${vocabSize}`);
  }
  const row = new Float64Array(vocabSize);
  for (const [token, logit] of map) row[token] = logit;
  return row;
}

function logSoftmax(row) {
  let max = -Infinity;
  for (const v of row) max = Math.max(max, v);
  let sum = 0;
  for (const v of row) sum += Math.exp(v - max);
  const norm = max + Math.log(sum);
  return Array.from(row, (v) => v - norm);
}

function argmax(row) {
  let best = 0;
  for (let i = 1; i < row.length; ++i) if (row[i] > row[best]) best = i;
  return best;
}

const wantLogits = (token) => [token, { generateNext: { logits: true } }];

async function score(llama, path, { tokens, greedy, full, threads }) {
  const model = await loadModel(llama, path);
  const length = tokens.length + greedy;
  const context = await model.createContext({
    contextSize: Math.max(256, Math.ceil(length / 256) * 256),
    batchSize: Math.max(length, 1),
    sequences: 1,
    ...(threads > 0 ? { threads } : {}),
  });
  try {
    const sequence = context.getSequence();
    const sequenceTokens = [...tokens];
    // llama.cpp's vocabulary size, as the number of logits it gives (the first row sets it, every row must
    // match); node-llama-cpp has no call that returns it directly.
    let size = null;
    if (greedy > 0) {
      const items = tokens.map((t, i) => (i + 1 === tokens.length ? wantLogits(t) : t));
      let out = await sequence.controlledEvaluate(items);
      for (let step = 0; step < greedy; ++step) {
        const map = out.at(-1)?.next?.logits;
        size ??= map?.size;
        const next = argmax(logitRow(map, size));
        sequenceTokens.push(next);
        if (step + 1 < greedy) out = await sequence.controlledEvaluate([wantLogits(next)]);
      }
      await sequence.clearHistory();
    }
    const out = await sequence.controlledEvaluate(sequenceTokens.map(wantLogits));
    size ??= out[0]?.next?.logits?.size;
    const positions = sequenceTokens.map((_, p) => {
      const logprobs = logSoftmax(logitRow(out[p]?.next?.logits, size));
      const next = p + 1 < sequenceTokens.length ? sequenceTokens[p + 1] : null;
      const entry = { next, logprob: next === null ? null : logprobs[next] };
      if (full) entry.logprobs = logprobs;
      return entry;
    });
    return { model: path, vocab_size: size, tokens: sequenceTokens, positions };
  } finally {
    await context.dispose();
    await model.dispose();
  }
}

runMain("llamacpp_logprobs", async () => {
  const flags = parseFlags(process.argv.slice(2), ["model", "tokens", "greedy", "full", "threads"], USAGE);
  if (!flags.model) throw new Error(`--model is required\n${USAGE}`);
  if (!flags.tokens) throw new Error(`--tokens is required\n${USAGE}`);
  const options = {
    tokens: parseTokenIds(flags.tokens.at(-1), "--tokens"),
    greedy: integerFlag(flags, "greedy", 0),
    full: integerFlag(flags, "full", 0) === 1,
    threads: integerFlag(flags, "threads", 0),
  };
  const llama = await openLlama(options.threads);
  const models = [];
  for (const path of flags.model) models.push(await score(llama, path, options));
  process.stdout.write(JSON.stringify({ models }) + "\n");
});
