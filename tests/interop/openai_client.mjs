// The official `openai` npm client against a running serverd: node openai_client.mjs BASE_URL MODEL API_KEY [SUITE]
// Each check asserts and prints "ok <name>"; the first failure exits non-zero with the reason.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import OpenAI from "openai";

// ajv validates structured outputs independently of serverd's grammar engine.
const require = createRequire(import.meta.url);
const Ajv = require("ajv").default;

const [baseURL, model, apiKey, suite] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120_000 });

async function check(name, body) {
  await body();
  console.log(`ok ${name}`);
}

// SUITE "tools": serverd runs with --enable-auto-tool-choice --tool-call-parser hermes --reasoning-parser
// qwen3, and only these checks run. The random model's output decides whether it reasons or calls; the
// shapes must be the client's either way.
const weatherTool = {
  type: "function",
  function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } },
};
const toolHistory = [
  { role: "user", content: "Weather in Paris?" },
  { role: "assistant", content: null, tool_calls: [{ id: "call-1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
  { role: "tool", tool_call_id: "call-1", content: "18C" },
];

if (suite === "tools") {
  await check("tool calls and reasoning", async () => {
  const r = await client.chat.completions.create({ model, messages: toolHistory, tools: [weatherTool], max_tokens: 8, temperature: 0 });
  const message = r.choices[0].message;
  assert.ok(Array.isArray(message.tool_calls));
  assert.ok(message.reasoning === null || typeof message.reasoning === "string");
  assert.ok(message.content === null || typeof message.content === "string");
  assert.ok(["stop", "length", "tool_calls"].includes(r.choices[0].finish_reason));
  assert.equal(typeof r.usage.completion_tokens_details.reasoning_tokens, "number");
  for (const call of message.tool_calls) assert.equal(call.type, "function");

  const stream = await client.chat.completions.create({
    model, messages: toolHistory, tools: [weatherTool], tool_choice: "none", max_tokens: 8, temperature: 0,
    stream: true, stream_options: { include_usage: true },
  });
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    const delta = chunk.choices[0]?.delta;
    assert.ok(delta?.reasoning === undefined || typeof delta.reasoning === "string");
    assert.equal(delta?.tool_calls, undefined);  // tool_choice "none": no calls
  }
  assert.equal(typeof usage.completion_tokens_details.reasoning_tokens, "number");

  await assert.rejects(
    client.chat.completions.create({
      model, messages: toolHistory, tools: [weatherTool], tool_choice: { type: "function", function: { name: "get_news" } },
    }),
    (e) => e.status === 400 && /Tool 'get_news' has not been passed in `tools`/.test(e.message),
  );
  });
  process.exit(0);
}


// SUITE "embeddings": serverd serves a model with sentence-transformers files (mean pooling, Normalize), so
// --runner auto makes it a pooling model: the client's embeddings (base64 by default, which it decodes) and
// the same vectors as floats; generating endpoints refused as vLLM refuses them.
if (suite === "embeddings") {
  await check("embeddings", async () => {
    const r = await client.embeddings.create({ model, input: ["hello world", "a longer input, of a few more words", "hello world"] });
    assert.equal(r.object, "list");
    assert.equal(r.model, model);
    assert.equal(r.data.length, 3);
    const width = r.data[0].embedding.length;
    assert.ok(width > 0);
    for (const [i, item] of r.data.entries()) {
      assert.equal(item.index, i);
      assert.equal(item.object, "embedding");
      assert.equal(item.embedding.length, width);
      const norm = Math.sqrt(item.embedding.reduce((sum, x) => sum + x * x, 0));
      assert.ok(Math.abs(norm - 1) < 1e-5, `norm ${norm}`);
    }
    assert.deepEqual(r.data[2].embedding, r.data[0].embedding);
    assert.notDeepEqual(r.data[1].embedding, r.data[0].embedding);
    assert.ok(r.usage.prompt_tokens > 0 && r.usage.total_tokens === r.usage.prompt_tokens);

    // The same input alone, as floats: the same vector (bit for bit on the CPU; a GPU's kernels for one input
    // and for three may round differently, by about 1e-7 here).
    const floats = await client.embeddings.create({ model, input: "hello world", encoding_format: "float" });
    assert.equal(floats.data[0].embedding.length, width);
    const apart = Math.max(...floats.data[0].embedding.map((x, i) => Math.abs(x - r.data[0].embedding[i])));
    assert.ok(apart < 1e-6, `"hello world" alone as floats is ${apart} from its base64 vector in the batch`);
  });
  await check("a pooling model generates nothing", async () => {
    await assert.rejects(
      client.chat.completions.create({ model, messages: [{ role: "user", content: "hi" }] }),
      (e) => e.status === 400 && /The model does not support Chat Completions API/.test(e.message),
    );
    await assert.rejects(
      client.embeddings.create({ model, input: "hi", dimensions: 8 }),
      (e) => e.status === 400 && /does not support matryoshka representation/.test(e.message),
    );
  });
  process.exit(0);
}

// SUITE "scripted": serverd serves a scripted model (engine/model_writer: its greedy reply to every prompt is
// a reasoning block and two get_weather calls, tests/e2e/serverd_openai_client_test.cc) with
// --enable-auto-tool-choice --tool-call-parser hermes --reasoning-parser qwen3: real calls, parsed by the
// real binary, read by the official client whole and streamed, in chat and in the Responses API.
if (suite === "scripted") {
  const ask = [{ role: "user", content: "Weather in Paris and Rome?" }];
  const calls = (list) => list.map((c) => [c.function.name, JSON.parse(c.function.arguments)]);
  const expected = [["get_weather", { city: "Paris" }], ["get_weather", { city: "Rome" }]];
  await check("a real tool call, whole", async () => {
    const r = await client.chat.completions.create({ model, messages: ask, tools: [weatherTool], max_tokens: 32, temperature: 0 });
    const message = r.choices[0].message;
    assert.equal(r.choices[0].finish_reason, "tool_calls");
    assert.deepEqual(calls(message.tool_calls), expected);
    assert.equal(new Set(message.tool_calls.map((c) => c.id)).size, 2);
    for (const call of message.tool_calls) assert.equal(call.type, "function");
    assert.equal(message.reasoning.trim(), "The user wants the weather in two cities.");
    assert.ok(message.content === null || message.content.trim() === "", JSON.stringify(message.content));
    assert.ok(r.usage.completion_tokens_details.reasoning_tokens >= 2);
  });
  await check("a real tool call, streamed", async () => {
    const stream = await client.chat.completions.create({
      model, messages: ask, tools: [weatherTool], max_tokens: 32, temperature: 0, stream: true,
    });
    const byIndex = [];
    let reasoning = "";
    let finish = null;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (!choice) continue;
      reasoning += choice.delta.reasoning ?? "";
      if (choice.finish_reason) finish = choice.finish_reason;
      for (const part of choice.delta.tool_calls ?? []) {
        if (!byIndex[part.index]) {
          // The first piece of each call names it, as OpenAI's stream does.
          assert.ok(part.id && part.type === "function" && part.function.name, JSON.stringify(part));
          byIndex[part.index] = { id: part.id, function: { name: part.function.name, arguments: "" } };
        }
        byIndex[part.index].function.arguments += part.function.arguments ?? "";
      }
    }
    assert.equal(finish, "tool_calls");
    assert.deepEqual(calls(byIndex), expected);
    assert.equal(reasoning.trim(), "The user wants the weather in two cities.");
  });
  await check("parallel_tool_calls false keeps the first call", async () => {
    const r = await client.chat.completions.create({
      model, messages: ask, tools: [weatherTool], parallel_tool_calls: false, max_tokens: 32, temperature: 0,
    });
    assert.deepEqual(calls(r.choices[0].message.tool_calls), expected.slice(0, 1));
  });
  await check("tool_choice none leaves the text as content", async () => {
    const r = await client.chat.completions.create({
      model, messages: ask, tools: [weatherTool], tool_choice: "none", max_tokens: 32, temperature: 0,
    });
    const message = r.choices[0].message;
    assert.ok(message.tool_calls === undefined || message.tool_calls.length === 0);
    assert.ok(message.content.includes('<tool_call>\n{"name": "get_weather"'), message.content);
    assert.equal(r.choices[0].finish_reason, "stop");
  });
  await check("a real tool call through responses", async () => {
    const tools = [{ type: "function", name: "get_weather", parameters: weatherTool.function.parameters }];
    const r = await client.responses.create({ model, input: "Weather in Paris and Rome?", tools, max_output_tokens: 32, temperature: 0 });
    // Qwen3 writes "</think>\n\n<tool_call>": the blank line is content, an output message as vLLM gives it.
    const kinds = ["reasoning", "message", "function_call", "function_call"];
    assert.deepEqual(r.output.map((item) => item.type), kinds);
    assert.equal(r.output[1].content[0].text.trim(), "");
    assert.deepEqual(r.output.slice(2).map((c) => [c.name, JSON.parse(c.arguments)]), expected);
    assert.ok(r.output[2].call_id !== r.output[3].call_id);
    const stream = await client.responses.create({ model, input: "Weather in Paris and Rome?", tools, max_output_tokens: 32, temperature: 0, stream: true });
    const done = [];
    let completed = null;
    for await (const event of stream) {
      if (event.type === "response.function_call_arguments.done") done.push(JSON.parse(event.arguments));
      if (event.type === "response.completed") completed = event.response;
    }
    assert.deepEqual(done, [{ city: "Paris" }, { city: "Rome" }]);
    assert.deepEqual(completed.output.map((item) => item.type), kinds);
  });
  process.exit(0);
}

await check("models", async () => {
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), [model]);
});

let greedyText = "";
await check("completions", async () => {
  const r = await client.completions.create({ model, prompt: "The river flows", max_tokens: 20, temperature: 0, ignore_eos: true });
  assert.equal(r.object, "text_completion");
  assert.equal(r.model, model);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].finish_reason, "length");
  assert.equal(r.usage.completion_tokens, 20);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 20);
  greedyText = r.choices[0].text;
  const again = await client.completions.create({ model, prompt: "The river flows", max_tokens: 20, temperature: 0, ignore_eos: true });
  assert.equal(again.choices[0].text, greedyText);
});

await check("chat", async () => {
  const r = await client.chat.completions.create({
    model,
    messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Name a river." }],
    max_tokens: 12,
    temperature: 0,
  });
  assert.equal(r.object, "chat.completion");
  assert.equal(r.choices[0].message.role, "assistant");
  assert.equal(typeof r.choices[0].message.content, "string");
  assert.ok(["stop", "length"].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 5);
});

await check("chat streaming with usage", async () => {
  const stream = await client.chat.completions.create({
    model,
    messages: [{ role: "user", content: "Count to five." }],
    max_tokens: 10,
    temperature: 0,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = "";
  let usage = null;
  let finish = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks += 1;
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      text += choice.delta.content ?? "";
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  assert.ok(chunks >= 3, `only ${chunks} chunks`);
  assert.ok(usage, "no usage chunk");
  assert.ok(usage.completion_tokens >= 1 && usage.completion_tokens <= 10);
  assert.ok(["stop", "length"].includes(finish));
  const whole = await client.chat.completions.create({
    model,
    messages: [{ role: "user", content: "Count to five." }],
    max_tokens: 10,
    temperature: 0,
  });
  assert.equal(text, whole.choices[0].message.content);
});

await check("n > 1", async () => {
  const r = await client.completions.create({ model, prompt: "Once", max_tokens: 6, n: 3, temperature: 1, seed: 7, ignore_eos: true });
  assert.deepEqual(r.choices.map((c) => c.index).sort(), [0, 1, 2]);
  assert.equal(r.usage.completion_tokens, 18);
});

await check("logprobs", async () => {
  const r = await client.completions.create({ model, prompt: "Hello", max_tokens: 5, temperature: 0, logprobs: 3, ignore_eos: true });
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, 5);
  assert.equal(lp.token_logprobs.length, 5);
  for (let i = 0; i < 5; i++) {
    assert.ok(lp.token_logprobs[i] <= 0);
    const top = Object.values(lp.top_logprobs[i]);
    assert.ok(top.length >= 1 && top.length <= 4);
    // Greedy: the chosen token is the most likely one (tokens spelled alike share one key, so compare bounds).
    assert.ok(top.every((v) => v <= lp.token_logprobs[i] + 1e-5), JSON.stringify(lp.top_logprobs[i]));
    assert.ok(lp.tokens[i] in lp.top_logprobs[i]);
  }
  const chat = await client.chat.completions.create({
    model,
    messages: [{ role: "user", content: "Hi" }],
    max_tokens: 4,
    temperature: 0,
    logprobs: true,
    top_logprobs: 2,
  });
  const content = chat.choices[0].logprobs.content;
  assert.ok(content.length >= 1);
  for (const entry of content) {
    assert.equal(typeof entry.token, "string");
    assert.ok(entry.top_logprobs.length === 2);
  }
});

await check("stop strings", async () => {
  // A stop string taken from the greedy text: generation ends just before it.
  const match = /[A-Za-z]{3,}/.exec(greedyText.slice(2));
  assert.ok(match, `no word in the greedy text ${JSON.stringify(greedyText)}`);
  const stop = match[0];
  const r = await client.completions.create({ model, prompt: "The river flows", max_tokens: 20, temperature: 0, ignore_eos: true, stop: [stop] });
  assert.equal(r.choices[0].finish_reason, "stop");
  assert.equal(r.choices[0].stop_reason, stop);
  assert.equal(r.choices[0].text, greedyText.slice(0, greedyText.indexOf(stop)));
});

await check("seed reproducibility", async () => {
  const ask = (seed) =>
    client.completions.create({ model, prompt: "A story:", max_tokens: 16, temperature: 1, seed });
  const [a, b, c] = await Promise.all([ask(1234), ask(1234), ask(99)]);
  assert.equal(a.choices[0].text, b.choices[0].text);
  assert.notEqual(a.choices[0].text, c.choices[0].text);
});

await check("errors", async () => {
  await assert.rejects(
    client.completions.create({ model: "no/such-model", prompt: "x", max_tokens: 2 }),
    (e) => e.status === 404,
  );
  await assert.rejects(
    client.completions.create({ model, prompt: "x", max_tokens: 2, temperature: -1 }),
    (e) => e.status === 400,
  );
});

// Prometheus text: the value of the first sample of `name`.
async function metric(name) {
  const text = await (await fetch(baseURL.replace(/\/v1$/, "") + "/metrics")).text();
  const line = text.split("\n").find((l) => l.startsWith(name + "{") || l.startsWith(name + " "));
  assert.ok(line, `no ${name} in /metrics`);
  return Number(line.split(" ").pop());
}

// Polls /metrics until `name` reads `value` (the engine thread updates it after the step that ends the work).
async function metricBecomes(name, value) {
  const deadline = Date.now() + 30_000;
  while ((await metric(name)) !== value) {
    assert.ok(Date.now() < deadline, `${name} stayed at ${await metric(name)}, not ${value}`);
    await new Promise((r) => setImmediate(r));
  }
}

async function streamText(prompt, maxTokens) {
  const stream = await client.completions.create({
    model, prompt, max_tokens: maxTokens, temperature: 0, ignore_eos: true, stream: true,
  });
  let text = "";
  for await (const chunk of stream) text += chunk.choices[0]?.text ?? "";
  return text;
}

await check("64 concurrent streams match their runs alone", async () => {
  const prompts = Array.from({ length: 8 }, (_, i) => `Story number ${i}: once upon a time`);
  const alone = [];
  for (const p of prompts) alone.push(await streamText(p, 24));
  const together = await Promise.all(Array.from({ length: 64 }, (_, i) => streamText(prompts[i % 8], 24)));
  together.forEach((text, i) => assert.equal(text, alone[i % 8], `stream ${i}`));
  await metricBecomes("vllm:num_requests_running", 0);
  await metricBecomes("vllm:kv_cache_usage_perc", 0);
});

await check("a client that disconnects mid-stream is cancelled", async () => {
  const controller = new AbortController();
  const stream = await client.completions.create(
    { model, prompt: "Never ending", max_tokens: 2000, temperature: 0, ignore_eos: true, stream: true },
    { signal: controller.signal },
  );
  let chunks = 0;
  try {
    for await (const chunk of stream) {
      chunks += chunk.choices.length;
      if (chunks === 3) controller.abort();
    }
  } catch (e) {
    assert.ok(e.name === "AbortError" || controller.signal.aborted, String(e));
  }
  assert.ok(chunks >= 3 && chunks < 100, `${chunks} chunks after the abort`);
  await metricBecomes("vllm:num_requests_running", 0);
  await metricBecomes("vllm:kv_cache_usage_perc", 0);
});

await check("responses", async () => {
  const r = await client.responses.create({
    model,
    instructions: "Be brief.",
    input: [{ role: "user", content: [{ type: "input_text", text: "Name a river." }] }],
    max_output_tokens: 12,
    temperature: 0,
    store: false,
    metadata: { suite: "e2e" },
  });
  assert.equal(r.object, "response");
  assert.ok(r.id.startsWith("resp_"), r.id);
  assert.equal(r.model, model);
  assert.ok(["completed", "incomplete"].includes(r.status), r.status);
  assert.equal(r.instructions, "Be brief.");
  assert.deepEqual(r.metadata, { suite: "e2e" });
  assert.equal(r.output.length, 1);
  assert.equal(r.output[0].type, "message");
  assert.equal(r.output[0].role, "assistant");
  assert.equal(r.output[0].content[0].type, "output_text");
  assert.equal(typeof r.output_text, "string");  // the client's own join of the output_text parts
  assert.equal(r.output_text, r.output[0].content[0].text);
  assert.ok(r.usage.input_tokens > 5);
  assert.ok(r.usage.output_tokens >= 1 && r.usage.output_tokens <= 12);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  if (r.status === "incomplete") assert.equal(r.incomplete_details.reason, "max_output_tokens");
});

await check("responses streaming", async () => {
  const body = { model, input: "Count to five.", max_output_tokens: 10, temperature: 0 };
  const stream = await client.responses.create({ ...body, stream: true });
  const types = [];
  let text = "";
  let completed = null;
  for await (const event of stream) {
    assert.equal(event.sequence_number, types.length);
    types.push(event.type);
    if (event.type === "response.output_text.delta") text += event.delta;
    if (event.type === "response.completed") completed = event.response;
  }
  assert.deepEqual(types.slice(0, 4), [
    "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
  ]);
  assert.deepEqual(types.slice(-4), [
    "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed",
  ]);
  assert.ok(completed, "no response.completed");
  assert.equal(completed.output[0].content[0].text, text);
  assert.ok(completed.usage.output_tokens >= 1 && completed.usage.output_tokens <= 10);
  const whole = await client.responses.create(body);
  assert.equal(whole.output[0].content[0].text, text);
  assert.equal(whole.usage.output_tokens, completed.usage.output_tokens);
});

// Structured outputs: the random model writes noise unless constrained, so every output validating (ajv) is
// the constraint's doing. Every value is bounded so that random weights end it.
const personSchema = {
  type: "object",
  properties: {
    name: { type: "string", minLength: 1, maxLength: 8 },
    age: { type: "integer", minimum: 0, maximum: 120 },
    role: { enum: ["admin", "user", "guest"] },
    tags: { type: "array", items: { enum: ["a", "b", "c"] }, maxItems: 3 },
  },
  required: ["name", "age", "role"],
  additionalProperties: false,
};
const cityParameters = {
  type: "object",
  properties: { city: { enum: ["Paris", "Oslo", "Lima"] }, days: { type: "integer", minimum: 1, maximum: 7 } },
  required: ["city", "days"],
  additionalProperties: false,
};
const timeParameters = {
  type: "object", properties: { zone: { type: "string", maxLength: 6 } }, required: ["zone"], additionalProperties: false,
};
const ajv = new Ajv({ strict: false });
const validators = new Map();
function assertValid(schema, value, what) {
  if (!validators.has(schema)) validators.set(schema, ajv.compile(schema));
  const validate = validators.get(schema);
  assert.ok(validate(value), `${what} ${JSON.stringify(value)}: ${ajv.errorsText(validate.errors)}`);
}
const cityTools = [
  { type: "function", function: { name: "get_weather", strict: true, parameters: cityParameters } },
  { type: "function", function: { name: "get_time", strict: true, parameters: timeParameters } },
];
const toolSchemas = { get_weather: cityParameters, get_time: timeParameters };

await check("response_format json_schema", async () => {
  const r = await client.chat.completions.create({
    model, messages: [{ role: "user", content: "Someone?" }], max_tokens: 300, temperature: 1, seed: 3, n: 2,
    response_format: { type: "json_schema", json_schema: { name: "person", strict: true, schema: personSchema } },
  });
  for (const choice of r.choices) {
    assert.equal(choice.finish_reason, "stop");
    assertValid(personSchema, JSON.parse(choice.message.content), "content");
  }
});

await check("beta parse", async () => {
  // A plain JSON schema (no zod): the client parses the content itself into `parsed`.
  const r = await client.beta.chat.completions.parse({
    model, messages: [{ role: "user", content: "Someone?" }], max_tokens: 300, temperature: 1, seed: 4,
    response_format: { type: "json_schema", json_schema: { name: "person", strict: true, schema: personSchema } },
  });
  assertValid(personSchema, r.choices[0].message.parsed, "parsed");
  assert.deepEqual(r.choices[0].message.parsed, JSON.parse(r.choices[0].message.content));
  // Strict tools are parsed by the client itself: parsed_arguments of a named call.
  const call = await client.beta.chat.completions.parse({
    model, messages: [{ role: "user", content: "Weather?" }], max_tokens: 200, temperature: 1, seed: 5,
    tools: cityTools, tool_choice: { type: "function", function: { name: "get_weather" } },
  });
  const made = call.choices[0].message.tool_calls;
  assert.equal(made.length, 1);
  assert.equal(made[0].function.name, "get_weather");
  assertValid(cityParameters, made[0].function.parsed_arguments, "parsed_arguments");
});

await check("structured_outputs regex", async () => {
  const r = await client.chat.completions.create({
    model, messages: [{ role: "user", content: "A code?" }], max_tokens: 20, temperature: 1, seed: 6, n: 3,
    structured_outputs: { regex: "[a-z]{3}-\\d{2}" },
  });
  for (const choice of r.choices) assert.match(choice.message.content, /^[a-z]{3}-\d{2}$/);
});

await check("tool_choice named and required", async () => {
  const named = await client.chat.completions.create({
    model, messages: [{ role: "user", content: "Weather?" }], max_tokens: 200, temperature: 1, seed: 7,
    tools: cityTools, tool_choice: { type: "function", function: { name: "get_weather" } },
  });
  assert.equal(named.choices[0].finish_reason, "stop");
  const [call] = named.choices[0].message.tool_calls;
  assert.equal(call.type, "function");
  assert.equal(call.function.name, "get_weather");
  assertValid(cityParameters, JSON.parse(call.function.arguments), "arguments");

  const required = await client.chat.completions.create({
    model, messages: [{ role: "user", content: "Weather and time?" }], max_tokens: 400, temperature: 1, seed: 8,
    tools: cityTools, tool_choice: "required",
  });
  assert.equal(required.choices[0].finish_reason, "tool_calls");
  const calls = required.choices[0].message.tool_calls;
  assert.ok(calls.length >= 1);
  for (const c of calls) assertValid(toolSchemas[c.function.name], JSON.parse(c.function.arguments), c.function.name);

  // Streamed: the client's own accumulation of the deltas gives the same calls.
  const stream = client.beta.chat.completions.stream({
    model, messages: [{ role: "user", content: "Weather and time?" }], max_tokens: 400, temperature: 1, seed: 8,
    tools: cityTools, tool_choice: "required",
  });
  const final = await stream.finalChatCompletion();
  assert.deepEqual(
    final.choices[0].message.tool_calls.map((c) => [c.function.name, JSON.parse(c.function.arguments)]),
    calls.map((c) => [c.function.name, JSON.parse(c.function.arguments)]),
  );
});

await check("responses text.format", async () => {
  const r = await client.responses.create({
    model, input: "Someone?", max_output_tokens: 300, temperature: 1,
    text: { format: { type: "json_schema", name: "person", strict: true, schema: personSchema } },
  });
  assert.equal(r.status, "completed");
  assertValid(personSchema, JSON.parse(r.output_text), "output_text");
});
