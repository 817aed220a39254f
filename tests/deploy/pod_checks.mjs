// What k8s/ promises about the modelserve pod, checked on rendered objects:
//   podProblems(objects, { device: "cpu" | "cuda" }) -> ["...", ...]   (empty when every promise holds)

const HF_TOKEN_SECRET = "modelserve-hf-token";
const MIN_STARTUP_SECONDS = 30 * 60; // a large model may take this long to load
const SERVERD_DRAIN_SECONDS = 30; // serverd's drain after SIGTERM (serverd/bin/serverd.cc)

export const allContainers = (spec) => [...(spec.initContainers ?? []), ...(spec.containers ?? [])];
const program = (c) => (c.command ?? [])[0];
const argv = (c) => [...(c.command ?? []), ...(c.args ?? [])];

export function flag(c, name) {
  const args = argv(c);
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
}

// The pieces of the pod by role; null where a role is missing.
export function podRoles(spec) {
  const init = spec.initContainers ?? [];
  return {
    pull: init.find((c) => program(c) === "fetchd" && argv(c)[1] === "pull") ?? null,
    sidecar: init.find((c) => program(c) === "fetchd" && argv(c)[1] === "serve") ?? null,
    serverd: (spec.containers ?? []).find((c) => program(c) === "serverd") ?? null,
    nginx: (spec.containers ?? []).find((c) => program(c) === "nginx") ?? null,
  };
}

function probeSeconds(probe) {
  return (probe.periodSeconds ?? 10) * (probe.failureThreshold ?? 3) + (probe.initialDelaySeconds ?? 0);
}

function sleepSeconds(c) {
  const handler = c.lifecycle?.preStop;
  if (handler?.sleep) return handler.sleep.seconds;
  const command = handler?.exec?.command ?? [];
  return command[0] === "sleep" ? Number(command[1]) : 0;
}

function securityProblems(spec, c) {
  const pod = spec.securityContext ?? {};
  const own = c.securityContext ?? {};
  const effective = (key) => own[key] ?? pod[key];
  const problems = [];
  if (effective("runAsNonRoot") !== true) problems.push("runAsNonRoot is not true");
  for (const key of ["runAsUser", "runAsGroup"]) {
    const id = effective(key);
    if (!Number.isInteger(id) || id === 0) problems.push(`${key} is not a fixed non-zero id`);
  }
  if (own.allowPrivilegeEscalation !== false) problems.push("allowPrivilegeEscalation is not false");
  if (!(own.capabilities?.drop ?? []).includes("ALL")) problems.push("capabilities do not drop ALL");
  if ((own.capabilities?.add ?? []).length) problems.push("capabilities are added");
  if (own.readOnlyRootFilesystem !== true) problems.push("readOnlyRootFilesystem is not true");
  if (own.privileged) problems.push("privileged");
  if ((own.seccompProfile ?? pod.seccompProfile)?.type !== "RuntimeDefault") problems.push("seccompProfile is not RuntimeDefault");
  return problems.map((p) => `container '${c.name}': ${p}`);
}

// The mount (and its volume) that holds `file` inside container `c`.
function mountOf(spec, c, file) {
  const mounts = (c.volumeMounts ?? []).filter((m) => file === m.mountPath || file.startsWith(`${m.mountPath}/`));
  mounts.sort((a, b) => b.mountPath.length - a.mountPath.length);
  if (!mounts.length) return null;
  return { mount: mounts[0], volume: (spec.volumes ?? []).find((v) => v.name === mounts[0].name) };
}

function usesTokenSecret(c) {
  return (
    (c.env ?? []).some((e) => e.valueFrom?.secretKeyRef?.name === HF_TOKEN_SECRET) ||
    (c.envFrom ?? []).some((e) => e.secretRef?.name === HF_TOKEN_SECRET)
  );
}

function isFetchdHealthProbe(probe, address) {
  if (!probe) return false;
  if (probe.grpc) return Number.isInteger(probe.grpc.port);
  const command = probe.exec?.command ?? [];
  return command[0] === "fetchd" && command[1] === "health" && command[command.indexOf("--address") + 1] === address;
}

export function podProblems(objects, { device }) {
  const problems = [];
  const need = (condition, message) => {
    if (!condition) problems.push(message);
  };
  const deployments = objects.filter((o) => o.kind === "Deployment");
  if (deployments.length !== 1) return [`expected one Deployment, found ${deployments.length}`];
  const deployment = deployments[0];
  const template = deployment.spec.template;
  const spec = template.spec;
  const { pull, sidecar, serverd, nginx } = podRoles(spec);
  need(pull, "no init container runs 'fetchd pull'");
  need(sidecar, "no init container runs 'fetchd serve'");
  need(serverd, "no container runs serverd");
  need(nginx, "no container runs nginx");
  if (!pull || !sidecar || !serverd || !nginx) return problems;

  // Order: the pull completes before the sidecar starts; the sidecar is a native sidecar.
  const init = spec.initContainers;
  need(init.indexOf(pull) < init.indexOf(sidecar), "the pull init container must come before the fetchd sidecar");
  need(pull.restartPolicy === undefined, "the pull init container must run to completion (no restartPolicy)");
  need(sidecar.restartPolicy === "Always", "the fetchd sidecar needs restartPolicy: Always (a native sidecar)");
  for (const [what, arg] of [["--model", "$(MODEL)"], ["--revision", "$(REVISION)"]]) {
    need(flag(pull, what) === arg, `'fetchd pull' must take ${what} ${arg}`);
    need(flag(serverd, what) === arg, `serverd must take ${what} ${arg}`);
  }

  // serverd reaches the sidecar at the address it listens on; a Unix socket lives in a shared emptyDir.
  const address = flag(sidecar, "--listen");
  need(address && flag(serverd, "--fetchd") === address, `serverd's --fetchd must be the sidecar's --listen (${address})`);
  if (address?.startsWith("unix:")) {
    const socket = address.slice("unix:".length);
    const a = mountOf(spec, sidecar, socket);
    const b = mountOf(spec, serverd, socket);
    need(a?.volume?.emptyDir && b && a.mount.name === b.mount.name && a.mount.mountPath === b.mount.mountPath,
      `the socket ${socket} must lie in one emptyDir mounted at the same path in the sidecar and serverd`);
  }
  for (const kind of ["startupProbe", "readinessProbe", "livenessProbe"]) {
    need(isFetchdHealthProbe(sidecar[kind], address), `the fetchd sidecar needs a grpc.health.v1 ${kind} on ${address}`);
  }

  // The cache: a ReadWriteMany claim, HF_HUB_CACHE inside it for both fetchd containers.
  for (const c of [pull, sidecar]) {
    const cache = (c.env ?? []).find((e) => e.name === "HF_HUB_CACHE")?.value;
    const where = cache && mountOf(spec, c, cache);
    const claim = where?.volume?.persistentVolumeClaim?.claimName;
    const pvc = objects.find((o) => o.kind === "PersistentVolumeClaim" && o.metadata.name === claim);
    need(pvc?.spec.accessModes?.includes("ReadWriteMany"),
      `container '${c.name}': HF_HUB_CACHE must lie on a ReadWriteMany PersistentVolumeClaim`);
  }

  // The Hugging Face token: optional, and only for the fetchd containers.
  for (const c of allContainers(spec)) {
    if (program(c) === "fetchd") {
      const ref = (c.env ?? []).find((e) => e.name === "HF_TOKEN")?.valueFrom?.secretKeyRef;
      need(ref?.name === HF_TOKEN_SECRET && ref.optional === true,
        `container '${c.name}': HF_TOKEN must come from Secret ${HF_TOKEN_SECRET} with optional: true`);
    } else {
      need(!usesTokenSecret(c), `container '${c.name}' must not see Secret ${HF_TOKEN_SECRET}`);
    }
  }
  for (const v of spec.volumes ?? []) {
    need(v.secret?.secretName !== HF_TOKEN_SECRET, `Secret ${HF_TOKEN_SECRET} must not be a volume`);
  }

  // Security: pod-wide ids, and every container locked down.
  const podSecurity = spec.securityContext ?? {};
  need(Number.isInteger(podSecurity.fsGroup) && podSecurity.fsGroup !== 0, "the pod needs a fixed non-zero fsGroup");
  for (const c of allContainers(spec)) problems.push(...securityProblems(spec, c));
  need(spec.automountServiceAccountToken === false, "the pod does not need a service account token");

  // serverd: probes on /health at its port, a startup budget for large models, a drain that fits the grace.
  const port = Number(flag(serverd, "--port"));
  const serverdPort = (serverd.ports ?? []).find((p) => p.containerPort === port);
  need(serverdPort, `serverd's --port ${port} must be a containerPort`);
  for (const kind of ["startupProbe", "readinessProbe", "livenessProbe"]) {
    const get = serverd[kind]?.httpGet;
    need(get?.path === "/health" && (get.port === port || get.port === serverdPort?.name),
      `serverd needs a ${kind} on GET /health at port ${port}`);
  }
  if (serverd.startupProbe) {
    need(probeSeconds(serverd.startupProbe) >= MIN_STARTUP_SECONDS,
      `serverd's startupProbe allows ${probeSeconds(serverd.startupProbe)} s; a large model needs ${MIN_STARTUP_SECONDS}`);
  }
  const grace = spec.terminationGracePeriodSeconds ?? 30;
  for (const c of [serverd, nginx]) {
    need(sleepSeconds(c) > 0, `container '${c.name}' needs a preStop sleep so that endpoints update before it stops`);
    need(grace >= sleepSeconds(c) + SERVERD_DRAIN_SECONDS,
      `terminationGracePeriodSeconds ${grace} is shorter than '${c.name}' preStop (${sleepSeconds(c)} s) + drain (${SERVERD_DRAIN_SECONDS} s)`);
  }

  // nginx: its configuration from a ConfigMap, streaming unbuffered to serverd's port.
  const confPath = flag(nginx, "-c");
  const confMount = confPath && mountOf(spec, nginx, confPath);
  const configMap = objects.find((o) => o.kind === "ConfigMap" && o.metadata.name === confMount?.volume?.configMap?.name);
  const conf = configMap?.data?.[confPath?.slice(confMount.mount.mountPath.length + 1)];
  need(conf, `nginx's -c ${confPath} must come from a ConfigMap`);
  if (conf) {
    for (const [pattern, what] of [
      [/^\s*proxy_buffering off;/m, "proxy_buffering off"],
      [/^\s*proxy_cache off;/m, "proxy_cache off"],
      [/^\s*proxy_read_timeout \d+[smhd]?;/m, "proxy_read_timeout"],
      [/^\s*client_max_body_size \d+[kmg]?;/m, "client_max_body_size"],
      [/^\s*keepalive \d+;/m, "keepalive to the upstream"],
      [/^\s*proxy_http_version 1\.1;/m, "proxy_http_version 1.1 (upstream keep-alive)"],
      [/^\s*proxy_set_header X-Request-Id /m, "X-Request-Id passed upstream"],
      [new RegExp(`^\\s*server 127\\.0\\.0\\.1:${port};`, "m"), `upstream server 127.0.0.1:${port} (serverd)`],
    ]) {
      need(pattern.test(conf), `nginx.conf lacks ${what}`);
    }
    const listen = conf.match(/^\s*listen (\d+);/m)?.[1];
    const nginxPort = (nginx.ports ?? []).find((p) => p.containerPort === Number(listen));
    need(nginxPort, `nginx listens on ${listen}, which is not a containerPort`);
    const service = objects.find((o) => o.kind === "Service");
    need(service?.spec.ports.every((p) => p.targetPort === nginxPort?.name || p.targetPort === nginxPort?.containerPort),
      "the Service must send clients to nginx");
    // With a read-only root, everything nginx writes must be on a writable volume.
    for (const m of conf.matchAll(/^\s*(pid|\w+_temp_path) (\S+);/gm)) {
      const where = mountOf(spec, nginx, m[2]);
      need(where?.volume?.emptyDir && !where.mount.readOnly, `nginx writes ${m[2]} (${m[1]}), which is not on a writable emptyDir`);
    }
    for (const probe of [nginx.readinessProbe, nginx.livenessProbe]) {
      need(probe?.httpGet && new RegExp(`location = ${probe.httpGet.path} `).test(conf), "nginx needs readiness and liveness probes nginx answers itself");
    }
  }
  // /tmp for every modelserve container, writable.
  for (const c of [pull, sidecar, serverd]) {
    const tmp = mountOf(spec, c, "/tmp");
    need(tmp?.volume?.emptyDir && !tmp.mount.readOnly, `container '${c.name}' needs a writable emptyDir at /tmp`);
  }

  // Selectors: the Service and the PodDisruptionBudget pick these pods.
  const labels = template.metadata?.labels ?? {};
  const selects = (selector) =>
    selector && Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels[k] === v);
  need(selects(objects.find((o) => o.kind === "Service")?.spec.selector), "the Service does not select the pods");
  need(selects(objects.find((o) => o.kind === "PodDisruptionBudget")?.spec.selector?.matchLabels),
    "no PodDisruptionBudget selects the pods");

  // The device.
  const gpus = Number(serverd.resources?.limits?.["nvidia.com/gpu"] ?? 0);
  need(flag(serverd, "--device") === device, `serverd must run with --device ${device}`);
  if (device === "cuda") {
    need(gpus >= 1, "serverd must request nvidia.com/gpu");
    const shm = mountOf(spec, serverd, "/dev/shm");
    need(shm?.volume?.emptyDir?.medium === "Memory", "serverd needs a Memory emptyDir at /dev/shm");
  } else {
    need(gpus === 0, "a CPU pod must not request nvidia.com/gpu");
  }
  for (const c of allContainers(spec)) {
    need(/:[\w][\w.-]*$|@sha256:/.test(c.image) && !c.image.endsWith(":latest"), `container '${c.name}': image ${c.image} needs a fixed tag`);
  }
  return problems;
}
