// llama.cpp's speed on a GGUF file, measured as engine-bench measures the engine (scripts/bench-vs-llamacpp.sh
// runs both): load time, prefill of a prompt, batch-1 decode after a short and after a long prompt, peak RSS.
// node-llama-cpp's prebuilt CPU backend (tests/llamacpp), its default context settings otherwise (f16 KV
// cache, flash attention "auto").
// usage: node llamacpp_bench.mjs --model FILE.gguf [--threads N] [--prefill N] [--steps N] [--short-prompt N]
//        [--long-prompt N] [--batches LIST]
// Prints one JSON object with the same field names as `engine-bench --json`.
import { resourceUsage } from "node:process";
import { integerFlag, loadModel, openLlama, parseFlags, runMain } from "../llamacpp/llama.mjs";

const USAGE =
  "usage: node llamacpp_bench.mjs --model FILE.gguf [--threads N] [--prefill N] [--steps N] [--short-prompt N] [--long-prompt N] [--batches LIST]";

const seconds = (start) => (performance.now() - start) / 1e3;
const peakRssMb = () => resourceUsage().maxRSS / 1024;  // kilobytes

// A prompt of exactly `count` tokens cut from the sentence engine-bench repeats.
function promptTokens(model, count) {
  const sentence = "The quick brown fox jumps over the lazy dog while the committee reviews the quarterly report. ";
  let text = "";
  let ids = [];
  while (ids.length < count) {
    text += sentence;
    ids = model.tokenize(text);
  }
  return ids.slice(0, count);
}

// Evaluates `tokens` and samples one token greedily after the last (as a server's prefill does).
async function prefill(sequence, tokens) {
  const items = tokens.map((t, i) => (i + 1 === tokens.length ? [t, { generateNext: { token: true } }] : t));
  const out = await sequence.controlledEvaluate(items);
  const next = out.at(-1)?.next?.token;
  if (next === undefined || next === null) throw new Error("llama.cpp sampled no token after the prompt");
  return next;
}

// Prefills `prompt`, then decodes `steps` greedy tokens one at a time; tokens per second of each.
async function decodeRate(sequence, prompt, steps) {
  await sequence.clearHistory();
  const prefillStart = performance.now();
  let next = await prefill(sequence, prompt);
  const prefillTps = prompt.length / seconds(prefillStart);
  const start = performance.now();
  for (let step = 0; step < steps; ++step) next = await prefill(sequence, [next]);
  return { prefill: prefillTps, decode: steps / seconds(start) };
}

// Decodes `steps` tokens for each of `batch` sequences of one context at once, after each prefilled
// `promptLen` tokens: node-llama-cpp gathers the sequences' concurrent evaluations into one llama_decode per
// step, as a server batches them. Tokens per second over all sequences.
async function batchDecodeRate(model, threads, batch, promptLen, steps) {
  const context = await model.createContext({
    contextSize: batch * (promptLen + steps + 64),
    sequences: batch,
    ...(threads > 0 ? { threads } : {}),
  });
  try {
    const sequences = Array.from({ length: batch }, () => context.getSequence());
    const prompt = promptTokens(model, promptLen);
    let next = await Promise.all(sequences.map((sequence) => prefill(sequence, prompt)));
    const start = performance.now();
    for (let step = 0; step < steps; ++step) {
      next = await Promise.all(sequences.map((sequence, i) => prefill(sequence, [next[i]])));
    }
    return (batch * steps) / seconds(start);
  } finally {
    await context.dispose();
  }
}

runMain("llamacpp_bench", async () => {
  const flags = parseFlags(process.argv.slice(2), ["model", "threads", "prefill", "steps", "short-prompt", "long-prompt", "batches"], USAGE);
  if (!flags.model) throw new Error(`--model is required\n${USAGE}`);
  const threads = integerFlag(flags, "threads", 0);
  const prefillLen = integerFlag(flags, "prefill", 512);
  const steps = integerFlag(flags, "steps", 32);
  const shortPrompt = integerFlag(flags, "short-prompt", 16);
  const longPrompt = integerFlag(flags, "long-prompt", 2048);
  if (prefillLen < 1 || steps < 1 || shortPrompt < 1) throw new Error("--prefill, --steps and --short-prompt must be at least 1");
  const batches = (flags.batches?.at(-1) ?? "").split(",").filter((b) => b !== "").map((b) => {
    if (!/^[1-9][0-9]*$/.test(b)) throw new Error(`--batches ${flags.batches.at(-1)}: "${b}" is not a batch size\n${USAGE}`);
    return Number(b);
  });

  const llama = await openLlama(threads);
  const baselineRssMb = peakRssMb();  // node and the llama.cpp libraries, before the model
  const loadStart = performance.now();
  const model = await loadModel(llama, flags.model.at(-1));
  const context = await model.createContext({
    contextSize: Math.max(prefillLen, shortPrompt, longPrompt) + steps + 64,
    sequences: 1,
    ...(threads > 0 ? { threads } : {}),
  });
  const loadS = seconds(loadStart);
  const sequence = context.getSequence();

  const prefillStart = performance.now();
  await prefill(sequence, promptTokens(model, prefillLen));
  const prefillTps = prefillLen / seconds(prefillStart);
  const short = await decodeRate(sequence, promptTokens(model, shortPrompt), steps);
  const long = longPrompt > 0 ? await decodeRate(sequence, promptTokens(model, longPrompt), steps) : { prefill: 0, decode: 0 };
  const batchDecode = {};
  for (const batch of batches) batchDecode[batch] = await batchDecodeRate(model, threads, batch, shortPrompt, steps);
  const result = {
    engine: "llama.cpp (node-llama-cpp, CPU prebuilt)",
    system_info: llama.systemInfo.trim(),
    threads: context.currentThreads,
    flash_attention: context.flashAttention,
    context_size: context.contextSize,
    batch_size: context.batchSize,
    load_s: loadS,
    prefill_tokens: prefillLen,
    prefill_tps: prefillTps,
    short_prompt: shortPrompt,
    decode1_tps: short.decode,
    long_prompt: longPrompt,
    long_prefill_tps: long.prefill,
    decode1_long_tps: long.decode,
    batch_decode_tps: batchDecode,
    peak_rss_mb: peakRssMb(),
    baseline_rss_mb: baselineRssMb,
  };
  await context.dispose();
  await model.dispose();
  process.stdout.write(JSON.stringify(result) + "\n");
});
