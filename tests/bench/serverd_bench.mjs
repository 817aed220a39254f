// Load on a running serverd: node serverd_bench.mjs BASE_URL MODEL [CONCURRENCY...]
// For each concurrency level, that many clients each stream completions (greedy, fixed length) and the
// program prints output tokens/s over the level, time to first token and inter-token latency (p50, p99).
const [baseURL, model, ...levels] = process.argv.slice(2);
const concurrencies = levels.length ? levels.map(Number) : [1, 8, 32];
const maxTokens = Number(process.env.BENCH_MAX_TOKENS ?? 32);
const requestsPerClient = Number(process.env.BENCH_REQUESTS_PER_CLIENT ?? 2);
const prompt = "The history of the river valley begins with the first settlers, who built their homes near the water and ";

// One streamed completion: the arrival time of every token chunk, relative to the request.
async function streamOnce(id) {
  const start = performance.now();
  const response = await fetch(`${baseURL}/v1/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({
      model, prompt: `${prompt}(${id})`, max_tokens: maxTokens, temperature: 0, ignore_eos: true, stream: true,
    }),
  });
  if (!response.ok) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
  const arrivals = [];
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const bytes of response.body) {
    buffer += decoder.decode(bytes, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (event.startsWith("data: ") && event !== "data: [DONE]") {
        const chunk = JSON.parse(event.slice(6));
        if (chunk.choices?.length) arrivals.push(performance.now() - start);
      }
    }
  }
  return arrivals;
}

function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

console.log(`serverd at ${baseURL}, model ${model}: ${maxTokens} tokens per request, ${requestsPerClient} per client`);
console.log("concurrency  requests  output tok/s  TTFT p50/p99 (ms)  ITL p50/p99 (ms)");
await streamOnce("warm-up");
for (const concurrency of concurrencies) {
  const ttft = [];
  const itl = [];
  let tokens = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, client) => {
      for (let r = 0; r < requestsPerClient; r++) {
        const arrivals = await streamOnce(`${concurrency}-${client}-${r}`);
        tokens += arrivals.length;
        ttft.push(arrivals[0]);
        for (let i = 1; i < arrivals.length; i++) itl.push(arrivals[i] - arrivals[i - 1]);
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  const f = (v) => v.toFixed(0).padStart(6);
  console.log(
    `${String(concurrency).padStart(11)}  ${String(concurrency * requestsPerClient).padStart(8)}  ` +
      `${(tokens / seconds).toFixed(1).padStart(12)}  ${f(percentile(ttft, 50))} / ${f(percentile(ttft, 99))}    ` +
      `${f(percentile(itl, 50))} / ${f(percentile(itl, 99))}`,
  );
}
