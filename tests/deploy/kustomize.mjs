// The part of kustomize that k8s/ uses, so that the manifests render on a machine without kubectl (Debian 12
// does not package it): resources (files and directories), configMapGenerator with
// disableNameSuffixHash, patches (JSON 6902 operations with a kind/name target) and images. Any other
// kustomization field is refused, so this never silently renders something different from kustomize;
// validate_manifests.mjs --kubectl compares the two where kubectl exists.
//
//   node kustomize.mjs DIR     prints the rendered objects as a YAML stream
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import YAML from "yaml";

const SUPPORTED = new Set(["apiVersion", "kind", "resources", "configMapGenerator", "patches", "images"]);

function fail(message) {
  throw new Error(`kustomize.mjs: ${message}`);
}

function readYamlDocuments(file) {
  return YAML.parseAllDocuments(fs.readFileSync(file, "utf8"))
    .map((doc) => {
      if (doc.errors.length) fail(`${file}: ${doc.errors[0].message}`);
      return doc.toJS();
    })
    .filter((object) => object !== null && object !== undefined);
}

function kustomizationFile(dir) {
  for (const name of ["kustomization.yaml", "kustomization.yml", "Kustomization"]) {
    const file = path.join(dir, name);
    if (fs.existsSync(file)) return file;
  }
  fail(`${dir} holds no kustomization.yaml`);
}

function generateConfigMap(dir, generator) {
  if (!generator.options?.disableNameSuffixHash) {
    fail(`configMapGenerator '${generator.name}' needs options.disableNameSuffixHash: true (name hashes are not implemented)`);
  }
  for (const key of Object.keys(generator)) {
    if (!["name", "files", "literals", "options"].includes(key)) fail(`configMapGenerator field '${key}' is not supported`);
  }
  for (const key of Object.keys(generator.options)) {
    if (key !== "disableNameSuffixHash") fail(`configMapGenerator option '${key}' is not supported`);
  }
  const data = {};
  for (const entry of generator.files ?? []) {
    const [key, file] = entry.includes("=") ? entry.split(/=(.*)/s, 2) : [path.basename(entry), entry];
    data[key] = fs.readFileSync(path.join(dir, file), "utf8");
  }
  for (const literal of generator.literals ?? []) {
    const [key, value] = literal.split(/=(.*)/s, 2);
    data[key] = value;
  }
  return { apiVersion: "v1", kind: "ConfigMap", metadata: { name: generator.name }, data };
}

// JSON pointer (RFC 6901) into `root`: the parent container and the last token.
function locate(root, pointer) {
  if (!pointer.startsWith("/")) fail(`patch path '${pointer}' is not a JSON pointer`);
  const tokens = pointer
    .slice(1)
    .split("/")
    .map((t) => t.replaceAll("~1", "/").replaceAll("~0", "~"));
  let parent = root;
  for (const token of tokens.slice(0, -1)) {
    const next = Array.isArray(parent) ? parent[Number(token)] : parent?.[token];
    if (next === undefined || next === null || typeof next !== "object") fail(`patch path '${pointer}' does not exist`);
    parent = next;
  }
  return [parent, tokens.at(-1)];
}

function applyOperation(object, op) {
  const [parent, last] = locate(object, op.path);
  const value = structuredClone(op.value);
  if (Array.isArray(parent)) {
    const index = last === "-" ? parent.length : Number(last);
    if (!Number.isInteger(index) || index < 0 || index > parent.length) fail(`patch path '${op.path}' is out of range`);
    if (op.op === "add") parent.splice(index, 0, value);
    else if (op.op === "replace" && index < parent.length) parent[index] = value;
    else if (op.op === "remove" && index < parent.length) parent.splice(index, 1);
    else fail(`patch operation '${op.op}' at '${op.path}' is not supported`);
    return;
  }
  if (op.op === "add") parent[last] = value;
  else if (op.op === "replace" && last in parent) parent[last] = value;
  else if (op.op === "remove" && last in parent) delete parent[last];
  else fail(`patch operation '${op.op}' at '${op.path}' is not supported or its path does not exist`);
}

function applyPatch(dir, objects, patch) {
  const operations = patch.path ? readYamlDocuments(path.join(dir, patch.path))[0] : YAML.parse(patch.patch);
  if (!Array.isArray(operations)) fail(`patch ${patch.path ?? "(inline)"}: only JSON 6902 operation lists are supported`);
  const target = patch.target ?? fail(`patch ${patch.path ?? "(inline)"} needs a target`);
  for (const key of Object.keys(target)) {
    if (!["kind", "name"].includes(key)) fail(`patch target field '${key}' is not supported`);
  }
  const matches = objects.filter(
    (o) => (!target.kind || o.kind === target.kind) && (!target.name || o.metadata?.name === target.name),
  );
  if (matches.length === 0) fail(`patch ${patch.path ?? "(inline)"} matches no object`);
  for (const object of matches) for (const op of operations) applyOperation(object, op);
}

// "registry:5000/name:tag@sha256:…" -> { name, tag, digest }
function splitImage(image) {
  const [rest, digest] = image.split("@");
  const colon = rest.lastIndexOf(":");
  if (colon > rest.lastIndexOf("/")) return { name: rest.slice(0, colon), tag: rest.slice(colon + 1), digest };
  return { name: rest, tag: undefined, digest };
}

function applyImages(objects, images) {
  for (const object of objects) {
    const spec = object.spec?.template?.spec;
    if (!spec) continue;
    for (const container of [...(spec.initContainers ?? []), ...(spec.containers ?? [])]) {
      const current = splitImage(container.image);
      const rule = images.find((i) => i.name === current.name);
      if (!rule) continue;
      for (const key of Object.keys(rule)) {
        if (!["name", "newName", "newTag", "digest"].includes(key)) fail(`images field '${key}' is not supported`);
      }
      const name = rule.newName ?? current.name;
      if (rule.digest) container.image = `${name}@${rule.digest}`;
      else {
        const tag = rule.newTag ?? current.tag;
        container.image = tag ? `${name}:${tag}` : name;
        if (current.digest && !rule.newTag) container.image += `@${current.digest}`;
      }
    }
  }
}

export function render(dir) {
  const kustomization = readYamlDocuments(kustomizationFile(dir))[0] ?? {};
  for (const key of Object.keys(kustomization)) {
    if (!SUPPORTED.has(key)) fail(`${dir}: kustomization field '${key}' is not supported by this renderer`);
  }
  const objects = [];
  for (const resource of kustomization.resources ?? []) {
    const target = path.join(dir, resource);
    if (fs.statSync(target).isDirectory()) objects.push(...render(target));
    else objects.push(...readYamlDocuments(target));
  }
  for (const generator of kustomization.configMapGenerator ?? []) objects.push(generateConfigMap(dir, generator));
  for (const patch of kustomization.patches ?? []) applyPatch(dir, objects, patch);
  if (kustomization.images) applyImages(objects, kustomization.images);
  const seen = new Set();
  for (const o of objects) {
    const id = `${o.apiVersion}/${o.kind}/${o.metadata?.name}`;
    if (seen.has(id)) fail(`${dir}: ${id} is defined twice`);
    seen.add(id);
  }
  return objects;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const dir = process.argv[2] ?? fail("usage: node kustomize.mjs DIR");
  process.stdout.write(render(dir).map((o) => YAML.stringify(o)).join("---\n"));
}
