// Renders a k8s/ overlay and checks it: every object against the Kubernetes API schema (kubernetes-models,
// offline), then what the project promises about the pod (pod_checks.mjs).
//   node validate_manifests.mjs OVERLAY_DIR --device cpu|cuda
//   node validate_manifests.mjs OVERLAY_DIR --kubectl PATH   compares kustomize.mjs with `kubectl kustomize`
import { execFileSync } from "node:child_process";
import { parseArgs } from "node:util";
import YAML from "yaml";
import { schemaProblems } from "./k8s_schema.mjs";
import { render } from "./kustomize.mjs";
import { podProblems } from "./pod_checks.mjs";

const { values, positionals } = parseArgs({
  options: { device: { type: "string" }, kubectl: { type: "string" } },
  allowPositionals: true,
});
const overlay = positionals[0];
if (!overlay || (!values.device && !values.kubectl)) {
  console.error("usage: node validate_manifests.mjs OVERLAY_DIR (--device cpu|cuda | --kubectl PATH)");
  process.exit(2);
}

const objects = render(overlay);
const problems = [];

if (values.kubectl) {
  // Same objects, whatever the order of keys and documents.
  const canonical = (v) =>
    Array.isArray(v) ? v.map(canonical)
      : v && typeof v === "object" ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, canonical(v[k])]))
      : v;
  const key = (o) => `${o.kind}/${o.metadata?.name}`;
  const byKey = (list) => new Map(list.map((o) => [key(o), JSON.stringify(canonical(o))]));
  const output = execFileSync(values.kubectl, ["kustomize", overlay], { encoding: "utf8" });
  const theirs = byKey(YAML.parseAllDocuments(output).map((d) => d.toJS()).filter(Boolean));
  const ours = byKey(objects);
  for (const k of new Set([...theirs.keys(), ...ours.keys()])) {
    if (!ours.has(k)) problems.push(`${k}: kubectl kustomize renders it, kustomize.mjs does not`);
    else if (!theirs.has(k)) problems.push(`${k}: kustomize.mjs renders it, kubectl kustomize does not`);
    else if (ours.get(k) !== theirs.get(k)) problems.push(`${k}: kustomize.mjs renders\n  ${ours.get(k)}\nkubectl kustomize renders\n  ${theirs.get(k)}`);
  }
  if (!problems.length) console.log(`ok ${overlay}: kustomize.mjs renders what kubectl kustomize renders (${ours.size} objects)`);
} else {
  for (const o of objects) problems.push(...(await schemaProblems(o)));
  if (!problems.length) console.log(`ok ${overlay}: ${objects.length} objects valid against the Kubernetes API schemas`);
  const before = problems.length;
  problems.push(...podProblems(objects, { device: values.device }));
  if (problems.length === before) console.log(`ok ${overlay}: the pod keeps its promises (--device ${values.device})`);
}

for (const p of problems) console.error(`FAIL ${p}`);
process.exit(problems.length ? 1 : 0);
