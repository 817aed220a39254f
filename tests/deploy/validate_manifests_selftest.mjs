// The manifest checks can fail: each mutation of the rendered cpu and gpu overlays below must be refused
// with its message, and the unmutated renderings must pass.
//   node validate_manifests_selftest.mjs K8S_DIR
import assert from "node:assert/strict";
import path from "node:path";
import { schemaProblems } from "./k8s_schema.mjs";
import { render } from "./kustomize.mjs";
import { allContainers, podProblems, podRoles } from "./pod_checks.mjs";

const k8s = process.argv[2];
const overlays = { cpu: path.join(k8s, "overlays", "cpu"), cuda: path.join(k8s, "overlays", "gpu") };

async function problemsOf(objects, device) {
  const problems = [];
  for (const o of objects) problems.push(...(await schemaProblems(o)));
  return [...problems, ...podProblems(objects, { device })];
}

const pod = (objects) => objects.find((o) => o.kind === "Deployment").spec.template.spec;
const roles = (objects) => podRoles(pod(objects));
const configMap = (objects, name) => objects.find((o) => o.kind === "ConfigMap" && o.metadata.name === name);

const mutations = [
  ["cpu", "a typo in a field name", (o) => { roles(o).sidecar.restartpolicy = "Always"; }, "unknown field 'restartpolicy'"],
  ["cpu", "a wrong type", (o) => { roles(o).serverd.ports[0].containerPort = "8000"; }, "containerPort must be integer"],
  ["cpu", "the sidecar without restartPolicy", (o) => { delete roles(o).sidecar.restartPolicy; }, "restartPolicy: Always"],
  ["cpu", "the sidecar without a startup probe", (o) => { delete roles(o).sidecar.startupProbe; }, "grpc.health.v1 startupProbe"],
  ["cpu", "serverd on another fetchd address", (o) => {
    const args = roles(o).serverd.args;
    args[args.indexOf("--fetchd") + 1] = "unix:/tmp/other.sock";
  }, "serverd's --fetchd must be the sidecar's --listen"],
  ["cpu", "the HF token given to serverd", (o) => {
    roles(o).serverd.env.push({ name: "HF_TOKEN", valueFrom: { secretKeyRef: { name: "modelserve-hf-token", key: "token", optional: true } } });
  }, "container 'serverd' must not see Secret modelserve-hf-token"],
  ["cpu", "the HF token required", (o) => {
    roles(o).pull.env.find((e) => e.name === "HF_TOKEN").valueFrom.secretKeyRef.optional = false;
  }, "container 'fetchd-pull': HF_TOKEN must come from Secret modelserve-hf-token with optional: true"],
  ["cpu", "nginx with a writable root", (o) => { roles(o).nginx.securityContext.readOnlyRootFilesystem = false; }, "container 'nginx': readOnlyRootFilesystem is not true"],
  ["cpu", "the pull container allowed to escalate", (o) => { delete roles(o).pull.securityContext.allowPrivilegeEscalation; }, "container 'fetchd-pull': allowPrivilegeEscalation is not false"],
  ["cpu", "serverd keeping capabilities", (o) => { roles(o).serverd.securityContext.capabilities.drop = []; }, "container 'serverd': capabilities do not drop ALL"],
  ["cpu", "a container as root", (o) => { roles(o).sidecar.securityContext.runAsUser = 0; }, "container 'fetchd': runAsUser is not a fixed non-zero id"],
  ["cpu", "no seccomp profile", (o) => {
    delete pod(o).securityContext.seccompProfile;
    delete roles(o).nginx.securityContext.seccompProfile;
  }, "container 'nginx': seccompProfile is not RuntimeDefault"],
  ["cpu", "no fsGroup", (o) => { delete pod(o).securityContext.fsGroup; }, "fixed non-zero fsGroup"],
  ["cpu", "a short startup budget", (o) => { roles(o).serverd.startupProbe.failureThreshold = 6; }, "serverd's startupProbe allows 60 s"],
  ["cpu", "no liveness probe", (o) => { delete roles(o).serverd.livenessProbe; }, "serverd needs a livenessProbe on GET /health"],
  ["cpu", "no preStop", (o) => { delete roles(o).serverd.lifecycle; }, "container 'serverd' needs a preStop sleep"],
  ["cpu", "a short grace period", (o) => { pod(o).terminationGracePeriodSeconds = 30; }, "terminationGracePeriodSeconds 30 is shorter"],
  ["cpu", "nginx buffering responses", (o) => {
    const c = configMap(o, "modelserve-nginx");
    c.data["nginx.conf"] = c.data["nginx.conf"].replace("proxy_buffering off;", "proxy_buffering on;");
  }, "nginx.conf lacks proxy_buffering off"],
  ["cpu", "nginx's pid on the read-only root", (o) => {
    const c = configMap(o, "modelserve-nginx");
    c.data["nginx.conf"] = c.data["nginx.conf"].replace("pid /tmp/nginx/nginx.pid;", "pid /run/nginx.pid;");
  }, "nginx writes /run/nginx.pid (pid), which is not on a writable emptyDir"],
  ["cpu", "a ReadWriteOnce cache", (o) => { o.find((x) => x.kind === "PersistentVolumeClaim").spec.accessModes = ["ReadWriteOnce"]; }, "ReadWriteMany"],
  ["cpu", "a Service selecting nothing", (o) => { o.find((x) => x.kind === "Service").spec.selector = { app: "other" }; }, "the Service does not select the pods"],
  ["cpu", "an image without a tag", (o) => { roles(o).nginx.image = "nginx"; }, "image nginx needs a fixed tag"],
  ["cuda", "no GPU requested", (o) => { delete roles(o).serverd.resources.limits["nvidia.com/gpu"]; }, "serverd must request nvidia.com/gpu"],
  ["cuda", "the CPU engine on a GPU pod", (o) => {
    const args = roles(o).serverd.args;
    args[args.indexOf("--device") + 1] = "cpu";
  }, "serverd must run with --device cuda"],
];

for (const device of ["cpu", "cuda"]) {
  assert.deepEqual(await problemsOf(render(overlays[device]), device), [], `the ${device} overlay as it is`);
}
for (const [device, what, mutate, expected] of mutations) {
  const objects = render(overlays[device]);
  mutate(objects);
  const problems = await problemsOf(objects, device);
  assert.ok(problems.some((p) => p.includes(expected)), `${what}: expected a problem with "${expected}", got ${JSON.stringify(problems)}`);
  console.log(`ok refused: ${what}`);
}
assert.ok(allContainers(pod(render(overlays.cpu))).length === 4);
