// Runs the modelserve pod of a rendered k8s/ overlay on this machine, the way the kubelet would: the same
// commands, arguments, environment and probes, every volume a temporary directory, in the manifests'
// order (the pull init container to completion, the fetchd sidecar started and probed healthy, serverd,
// then nginx with the ConfigMap's nginx.conf). The loopback test hub stands in for the Hugging Face hub
// (HF_ENDPOINT) with a tiny model-writer model under the ConfigMap's model name. It ends with a streamed
// completion through nginx and a clean stop.
//
// What differs from a cluster, and only that: binaries come from the build tree (and nginx from the
// system), processes run as the calling user, serverd binds 127.0.0.1 port 0 instead of 0.0.0.0:8000,
// nginx listens on a Unix socket instead of :8080 and proxies to serverd's actual port, probes are retried
// sooner than the kubelet's period (within the same total budget), and preStop sleeps are skipped (they
// only give Service endpoints time to update).
//
//   node local_pod.mjs --overlay DIR --fetchd BIN --serverd BIN --nginx BIN --test-hub BIN --model-writer BIN
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { render } from "./kustomize.mjs";
import { podRoles } from "./pod_checks.mjs";

const { values: opt } = parseArgs({
  options: {
    overlay: { type: "string" },
    fetchd: { type: "string" },
    serverd: { type: "string" },
    nginx: { type: "string" },
    "test-hub": { type: "string" },
    "model-writer": { type: "string" },
    keep: { type: "boolean", default: false },
  },
});
for (const name of ["overlay", "fetchd", "serverd", "nginx", "test-hub", "model-writer"]) {
  if (!opt[name]) throw new Error(`local_pod.mjs: --${name} is required`);
}
const PROGRAMS = { fetchd: opt.fetchd, serverd: opt.serverd, nginx: opt.nginx };
const API_KEY = "sk-local-pod"; // stands in for the optional Secret modelserve-api-key
const SECRETS = { "modelserve-api-key": { "api-key": API_KEY } };
const started = Date.now();
const log = (line) => console.log(`[${((Date.now() - started) / 1000).toFixed(2)} s] ${line}`);

const root = fs.mkdtempSync(path.join(os.tmpdir(), "modelserve-pod-"));
const processes = [];
let finished = false;

// ---- processes ----------------------------------------------------------------------------------------

class Proc {
  // `stdoutFile`: stdout goes to that file instead (nginx reopens /dev/stdout by name, which works for a file
  // or a pipe, as in a container, but not for the socket node gives a child).
  constructor(name, argv, env, stdoutFile) {
    this.name = name;
    this.output = ""; // stdout and stderr as they came
    this.stdout = "";
    this.waiters = [];
    const stdout = stdoutFile ? fs.openSync(stdoutFile, "w") : "pipe";
    this.child = spawn(argv[0], argv.slice(1), { env, stdio: ["ignore", stdout, "pipe"] });
    if (stdoutFile) fs.closeSync(stdout);
    this.exited = new Promise((resolve) => {
      this.child.on("exit", (code, signal) => {
        this.exitCode = code ?? signal;
        this.notify();
        resolve(this.exitCode);
      });
      this.child.on("error", (error) => {
        this.output += `spawn failed: ${error.message}\n`;
        this.exitCode = "spawn-error";
        this.notify();
        resolve(this.exitCode);
      });
    });
    for (const stream of [this.child.stdout, this.child.stderr].filter(Boolean)) {
      stream.setEncoding("utf8");
      stream.on("data", (text) => {
        this.output += text;
        if (stream === this.child.stdout) this.stdout += text;
        this.notify();
      });
    }
    processes.push(this);
  }
  notify() {
    for (const w of this.waiters.splice(0)) w();
  }
  // Resolves on the next output or exit, or after `ms`, whichever comes first.
  nextEvent(ms) {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, Math.max(ms, 0));
      this.waiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
  async waitFor(pattern, seconds) {
    const deadline = Date.now() + seconds * 1000;
    for (;;) {
      const m = this.output.match(pattern);
      if (m) return m;
      if (this.exitCode !== undefined) throw new Error(`${this.name} exited (${this.exitCode}) before ${pattern}:\n${this.output}`);
      if (Date.now() > deadline) throw new Error(`${this.name}: no ${pattern} within ${seconds} s:\n${this.output}`);
      await this.nextEvent(deadline - Date.now());
    }
  }
  async exit(seconds) {
    let timer;
    const timeout = new Promise((resolve) => (timer = setTimeout(() => resolve("timeout"), seconds * 1000)));
    const result = await Promise.race([this.exited, timeout]);
    clearTimeout(timer);
    return result;
  }
}

function cleanup() {
  for (const p of processes) if (p.exitCode === undefined) p.child.kill("SIGKILL");
  if (!opt.keep) fs.rmSync(root, { recursive: true, force: true });
}
process.on("exit", cleanup);
setTimeout(() => {
  if (finished) return;
  console.error("local_pod.mjs: the pod did not finish within 90 s");
  for (const p of processes) console.error(`--- ${p.name}\n${p.output}`);
  process.exit(1);
}, 90_000).unref();

// ---- the pod as the manifests describe it -------------------------------------------------------------

const objects = render(opt.overlay);
const spec = objects.find((o) => o.kind === "Deployment").spec.template.spec;
const roles = podRoles(spec);
const configMaps = new Map(objects.filter((o) => o.kind === "ConfigMap").map((o) => [o.metadata.name, o.data]));

// Every volume becomes a directory; ConfigMap volumes get their files.
const volumes = new Map();
for (const v of spec.volumes) {
  const dir = path.join(root, "volumes", v.name);
  fs.mkdirSync(dir, { recursive: true });
  if (v.configMap) {
    const data = configMaps.get(v.configMap.name) ?? {};
    const items = v.configMap.items ?? Object.keys(data).map((key) => ({ key, path: key }));
    for (const item of items) fs.writeFileSync(path.join(dir, item.path), data[item.key]);
  } else if (!v.emptyDir && !v.persistentVolumeClaim) {
    throw new Error(`local_pod.mjs: volume '${v.name}' is of a kind this runner does not map`);
  }
  volumes.set(v.name, dir);
}

// Container paths -> host paths, longest mount first; applied where a path starts (alone, after "unix:"
// or after "=").
function pathMapper(container) {
  const mounts = (container.volumeMounts ?? [])
    .map((m) => [m.mountPath, path.join(volumes.get(m.name), m.subPath ?? "")])
    .sort((a, b) => b[0].length - a[0].length);
  if (!mounts.length) return (text) => text;
  const alternatives = mounts.map(([from]) => from.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|");
  // One pass, so that a host path is never mapped again (the host's temporary directory is under /tmp too).
  const pattern = new RegExp(`(^|unix:|=|\\s)(${alternatives})(?=/|$|;|\\s)`, "gm");
  const hostPath = new Map(mounts);
  return (text) => text.replace(pattern, (_, lead, from) => `${lead}${hostPath.get(from)}`);
}

// Kubernetes' $(VAR) references: replaced when VAR is defined, "$$" escapes "$".
const expand = (text, env) =>
  text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (whole, name) =>
    whole === "$$" ? "$" : name in env ? env[name] : whole);

function containerEnv(container) {
  const env = {};
  for (const e of container.env ?? []) {
    if (e.value !== undefined) env[e.name] = expand(e.value, env);
    else if (e.valueFrom?.configMapKeyRef) {
      const ref = e.valueFrom.configMapKeyRef;
      const value = configMaps.get(ref.name)?.[ref.key];
      if (value !== undefined) env[e.name] = value;
      else if (!ref.optional) throw new Error(`${container.name}: ConfigMap ${ref.name} has no key ${ref.key}`);
    } else if (e.valueFrom?.secretKeyRef) {
      const ref = e.valueFrom.secretKeyRef;
      const value = SECRETS[ref.name]?.[ref.key];
      if (value !== undefined) env[e.name] = value;
      else if (!ref.optional) throw new Error(`${container.name}: Secret ${ref.name} is not available here`);
    } else {
      throw new Error(`${container.name}: env ${e.name} uses a source this runner does not map`);
    }
  }
  return env;
}

// The process a container (or an exec probe in it) runs here: argv and environment.
function hostCommand(container, argv, extraEnv = {}) {
  const env = containerEnv(container);
  const map = pathMapper(container);
  const args = argv.map((a) => map(expand(a, env)));
  const program = PROGRAMS[args[0]];
  if (!program) throw new Error(`${container.name}: no local binary for '${args[0]}'`);
  const hostEnv = { PATH: process.env.PATH, HOME: path.join(root, "home") };
  for (const [k, v] of Object.entries(env)) hostEnv[k] = map(v);
  return { argv: [program, ...args.slice(1)], env: { ...hostEnv, ...extraEnv } };
}

const startContainer = (container, { adapt = (a) => a, extraEnv = {}, stdoutFile } = {}) => {
  const { argv, env } = hostCommand(container, [...(container.command ?? []), ...(container.args ?? [])], extraEnv);
  log(`start ${container.name}: ${adapt(argv).join(" ")}`);
  return new Proc(container.name, adapt(argv), env, stdoutFile);
};

// Resolves once `file` exists (watching its directory), or throws when `proc` exits or time runs out.
async function waitForPath(file, proc, seconds) {
  const watcher = fs.watch(path.dirname(file));
  const deadline = Date.now() + seconds * 1000;
  try {
    while (!fs.existsSync(file)) {
      if (proc.exitCode !== undefined) throw new Error(`${proc.name} exited (${proc.exitCode}):\n${proc.output}`);
      if (Date.now() > deadline) throw new Error(`${proc.name}: ${file} did not appear within ${seconds} s`);
      let timer;
      await Promise.race([
        new Promise((resolve) => watcher.once("change", resolve)),
        proc.nextEvent(deadline - Date.now()),
        new Promise((resolve) => (timer = setTimeout(resolve, deadline - Date.now()))),
      ]);
      clearTimeout(timer);
    }
  } finally {
    watcher.close();
  }
}

// Where a probe's port is reachable here.
const portMap = new Map(); // containerPort -> { port } or { socketPath }
function probeTarget(container, port) {
  const number = typeof port === "number" ? port : container.ports.find((p) => p.name === port).containerPort;
  return portMap.get(number) ?? assert.fail(`${container.name}: port ${port} is not mapped here`);
}

function request(target, { method = "GET", path: urlPath, headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ ...target, host: "127.0.0.1", method, path: urlPath, headers, timeout: 30_000 }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk) => (text += chunk));
      res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, body: text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

// One probe attempt, as the kubelet makes it: exit 0, or an HTTP status from 200 to 399.
async function probeOnce(container, probe) {
  if (probe.exec) {
    const { argv, env } = hostCommand(container, probe.exec.command);
    const r = spawnSync(argv[0], argv.slice(1), { env, encoding: "utf8", timeout: (probe.timeoutSeconds ?? 1) * 1000 });
    return { ok: r.status === 0, detail: `${probe.exec.command.join(" ")} -> ${r.status} ${r.stdout}${r.stderr}`.trim() };
  }
  if (probe.httpGet) {
    try {
      const r = await request(probeTarget(container, probe.httpGet.port), { path: probe.httpGet.path });
      return { ok: r.status >= 200 && r.status < 400, detail: `GET ${probe.httpGet.path} -> ${r.status} ${r.body}` };
    } catch (error) {
      return { ok: false, detail: `GET ${probe.httpGet.path} -> ${error.message}` };
    }
  }
  throw new Error(`${container.name}: a probe kind this runner does not make`);
}

// Probes until success within the budget the kubelet would give (failureThreshold x periodSeconds). Attempts
// come sooner than the kubelet's period: at the container's next output, else after 200 ms.
async function probe(container, proc, kind) {
  const spec = container[kind];
  assert.ok(spec, `${container.name} has no ${kind}`);
  const budget = (spec.failureThreshold ?? 3) * (spec.periodSeconds ?? 10) + (spec.initialDelaySeconds ?? 0);
  const deadline = Date.now() + budget * 1000;
  for (;;) {
    if (proc.exitCode !== undefined) throw new Error(`${container.name} exited (${proc.exitCode}):\n${proc.output}`);
    const attempt = await probeOnce(container, spec);
    if (attempt.ok) {
      log(`${container.name} ${kind} ok: ${attempt.detail}`);
      return;
    }
    if (Date.now() > deadline) {
      throw new Error(`${container.name} ${kind} failed for ${budget} s, last: ${attempt.detail}\n${proc.output}`);
    }
    await proc.nextEvent(200);
  }
}

// ---- the hub --------------------------------------------------------------------------------------------

const modelName = containerEnv(roles.pull).MODEL;
const servedName = containerEnv(roles.serverd).SERVED_MODEL_NAME;
const hubRoot = path.join(root, "hub");
const written = spawnSync(opt["model-writer"], ["--arch", "qwen3", "--preset", "tiny", "--out", path.join(hubRoot, modelName)], {
  encoding: "utf8",
});
assert.equal(written.status, 0, `model-writer: ${written.stderr}`);
const hub = new Proc("test-hub", [opt["test-hub"], "--root", hubRoot, "--xet"], { PATH: process.env.PATH });
const hubEndpoint = (await hub.waitFor(/serving (http:\/\/127\.0\.0\.1:\d+)/, 20))[1];
log(`test hub at ${hubEndpoint} serves ${modelName}`);
const standIn = { HF_ENDPOINT: hubEndpoint };

// ---- init containers, in order --------------------------------------------------------------------------

let sidecar;
for (const container of spec.initContainers) {
  if (container.restartPolicy === "Always") {
    sidecar = startContainer(container, { extraEnv: standIn });
    await sidecar.waitFor(/serving Resolve on/, 20);
    await probe(container, sidecar, "startupProbe");
    continue;
  }
  const proc = startContainer(container, { extraEnv: standIn });
  const code = await proc.exit(60);
  assert.equal(code, 0, `init container ${container.name} exited ${code}:\n${proc.output}`);
  log(`${container.name} completed: ${proc.stdout.trim().split("\n").at(-1)}`);
  if (container === roles.pull) {
    // `fetchd pull` prints the snapshot to serve last, inside the cache volume.
    const served = proc.stdout.trim().split("\n").at(-1);
    assert.ok(served.startsWith(`${volumes.get("hf-cache")}/`), `the pull served ${served}, outside the cache volume`);
    assert.ok(fs.existsSync(path.join(served, "config.json")), `${served} holds no config.json`);
  }
}

// ---- containers: serverd, then nginx (it needs serverd's port) ------------------------------------------

const serverdPort = Number(roles.serverd.args[roles.serverd.args.indexOf("--port") + 1]);
const serverd = startContainer(roles.serverd, {
  adapt: (argv) => argv.map((a, i) => (argv[i - 1] === "--port" ? "0" : argv[i - 1] === "--host" ? "127.0.0.1" : a)),
});
const actualPort = Number((await serverd.waitFor(/serving '.*' on 127\.0\.0\.1:(\d+)/, 60))[1]);
portMap.set(serverdPort, { port: actualPort });
assert.match(serverd.output, /through fetchd at unix:/, "serverd did not resolve through the sidecar");
assert.match(serverd.output, / is \S+ \(from the cache\)/, "the sidecar did not answer from the cache the pull filled");
await probe(roles.serverd, serverd, "startupProbe");

const nginxSocket = path.join(root, "nginx.sock");
const nginxContainerPort = roles.nginx.ports[0].containerPort;
portMap.set(nginxContainerPort, { socketPath: nginxSocket });
// The ConfigMap's nginx.conf, as mounted, with its ports and writable paths adapted to this machine.
const confPath = roles.nginx.command[roles.nginx.command.indexOf("-c") + 1];
const confFile = pathMapper(roles.nginx)(confPath);
const conf = fs.readFileSync(confFile, "utf8");
const adapted = pathMapper(roles.nginx)(
  conf
    .replace(new RegExp(`^(\\s*)listen ${nginxContainerPort};`, "m"), `$1listen unix:${nginxSocket};`)
    .replace(new RegExp(`^(\\s*)server 127\\.0\\.0\\.1:${serverdPort};`, "m"), `$1server 127.0.0.1:${actualPort};`),
);
assert.notEqual(adapted, conf, "nginx.conf was not adapted");
assert.match(adapted, new RegExp(`listen unix:${nginxSocket};`));
fs.writeFileSync(confFile, adapted);
const accessLog = path.join(root, "nginx.stdout");
const nginx = startContainer(roles.nginx, { stdoutFile: accessLog });
await waitForPath(nginxSocket, nginx, 20);
for (const [container, proc] of [[roles.nginx, nginx], [roles.serverd, serverd]]) {
  await probe(container, proc, "readinessProbe");
  await probe(container, proc, "livenessProbe");
}
await probe(spec.initContainers.find((c) => c.restartPolicy === "Always"), sidecar, "readinessProbe");
log("pod ready");

// ---- traffic through nginx --------------------------------------------------------------------------------

const front = { socketPath: nginxSocket };
const auth = { authorization: `Bearer ${API_KEY}` };
const direct = { port: actualPort };
const metric = async (name) => {
  const body = (await request(direct, { path: "/metrics" })).body;
  return Number(body.match(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, "m"))?.[1]);
};

const models = await request(front, { path: "/v1/models", headers: { ...auth, "x-request-id": "local-pod-models" } });
assert.equal(models.status, 200, models.body);
assert.deepEqual(JSON.parse(models.body).data.map((m) => m.id), [servedName]);
assert.equal(models.headers["x-request-id"], "local-pod-models", "X-Request-Id did not pass through nginx");
const unauthorized = await request(front, { path: "/v1/models" });
assert.equal(unauthorized.status, 401, "the API key from the Secret did not reach serverd");
assert.match(fs.readFileSync(accessLog, "utf8"), /"GET \/v1\/models HTTP\/1\.1" 200 .* request_id=local-pod-models$/m,
  "nginx's access log (stdout) lacks the request");
log(`GET /v1/models through nginx: ${servedName}; 401 without the key; logged with its request id`);

// Streams a completion through nginx. At the first event, `onFirst(response)` runs with reading paused;
// it may destroy the response (a client going away).
function streamCompletion(body, onFirst) {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { ...front, method: "POST", path: "/v1/completions", headers: { ...auth, "content-type": "application/json" } },
      (res) => {
        const result = { status: res.statusCode, headers: res.headers, events: [], reads: 0 };
        let buffer = "";
        res.setEncoding("utf8");
        res.on("data", async (chunk) => {
          result.reads += 1;
          buffer += chunk;
          for (let end; (end = buffer.indexOf("\n\n")) >= 0; ) {
            result.events.push(buffer.slice(0, end));
            buffer = buffer.slice(end + 2);
            if (result.events.length === 1) {
              res.pause();
              result.first = await onFirst(res);
              if (res.destroyed) return resolve(result);
              res.resume();
            }
          }
        });
        res.on("end", () => resolve(result));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(JSON.stringify({ model: servedName, prompt: "The river flows", temperature: 0, ignore_eos: true, stream: true, ...body }));
  });
}
const generated = () => metric("vllm:generation_tokens_total");

// 1. Every event arrives, and the first one while the rest is still being generated: serverd's token
//    counter, read when the first event reaches the client, is short of the end.
const maxTokens = 1000;
let before = await generated();
const stream = await streamCompletion({ max_tokens: maxTokens }, async () => (await generated()) - before);
assert.equal(stream.status, 200);
assert.match(stream.headers["content-type"], /^text\/event-stream/);
// Without a client id, nginx makes one up ($request_id) and passes it on; serverd echoes it (checked against
// nginx's access log once nginx has stopped).
const streamId = stream.headers["x-request-id"];
assert.match(streamId, /^[0-9a-f]{32}$/);
assert.equal(stream.events.at(-1), "data: [DONE]");
const chunks = stream.events.slice(0, -1).map((e) => JSON.parse(e.replace(/^data: /, "")));
assert.equal(chunks.at(-1).choices[0].finish_reason, "length");
assert.equal((await generated()) - before, maxTokens);
assert.ok(stream.first < maxTokens, `the first event reached the client only after all ${maxTokens} tokens were generated`);
log(`streamed ${chunks.length} events in ${stream.reads} reads through nginx; ${stream.first} of ${maxTokens} tokens were generated when the first arrived`);

// 2. A client that goes away at the first event stops the generation behind nginx.
before = await generated();
const abandoned = await streamCompletion({ max_tokens: 2000 }, async (res) => {
  res.destroy();
  return (await generated()) - before;
});
const deadline = Date.now() + 20_000;
while ((await metric("vllm:num_requests_running")) !== 0) {
  assert.ok(Date.now() < deadline, "serverd kept generating for a client that had gone away");
  await serverd.nextEvent(50);
}
const cancelledAt = (await generated()) - before;
assert.ok(cancelledAt < 2000, "serverd generated every token for a client that had gone away");
log(`a client leaving at the first event (${abandoned.first} tokens) stopped serverd at ${cancelledAt} of 2000 tokens`);

// ---- termination: main containers first (serverd drains), then the sidecar --------------------------------

serverd.child.kill("SIGTERM");
nginx.child.kill("SIGQUIT"); // the nginx image's stop signal
assert.equal(await serverd.exit(40), 0, `serverd did not drain and exit 0:\n${serverd.output}`);
assert.equal(await nginx.exit(20), 0, `nginx did not exit 0:\n${nginx.output}`);
assert.match(fs.readFileSync(accessLog, "utf8"), new RegExp(`"POST /v1/completions HTTP/1.1" 200 .* request_id=${streamId}$`, "m"),
  "the request id serverd answered is not the one nginx logged and passed on");
sidecar.child.kill("SIGTERM");
assert.equal(await sidecar.exit(20), 0, `the fetchd sidecar did not exit 0:\n${sidecar.output}`);
hub.child.kill("SIGTERM");
await hub.exit(10);
finished = true;
log("pod stopped: serverd, nginx and the fetchd sidecar exited 0");
process.exit(0);
