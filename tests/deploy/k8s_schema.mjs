// Kubernetes API schema checks, offline, from the pinned npm package kubernetes-models:
//   schemaProblems(object) -> ["Deployment/modelserve: ...", ...]
// 1. The matching model class's validate() (the API's JSON schema: types, enums, required fields).
// 2. Unknown fields, which validate() lets through (the API server drops or, with strict validation,
//    refuses them): every key is looked up in the model's TypeScript declarations, which list the fields
//    of each API type.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const NODE_MODULES = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "node_modules");

// "apps/v1" + "Deployment" -> "kubernetes-models/apps/v1/Deployment"
function modulePath(apiVersion, kind) {
  return `kubernetes-models/${apiVersion}/${kind}`;
}

const declarations = new Map();

// The first interface of a .d.ts file: its fields (name -> type text) and where imported type names live.
function readDeclaration(file) {
  if (declarations.has(file)) return declarations.get(file);
  let result = null;
  if (fs.existsSync(file)) {
    const text = fs.readFileSync(file, "utf8");
    const imports = new Map();
    for (const m of text.matchAll(/^import \{ (\w+) \} from "([^"]+)";$/gm)) {
      const spec = m[2].replace(/\.js$/, "");
      const target = spec.startsWith(".") ? path.join(path.dirname(file), spec) : path.join(NODE_MODULES, spec);
      imports.set(m[1], `${target}.d.ts`);
    }
    const start = text.search(/^export interface \w+/m);
    if (start >= 0) {
      const extendsTypeMeta = /^export interface \w+ extends TypeMeta/m.test(text.slice(start));
      const fields = new Map();
      const lines = text.slice(start).split("\n");
      let pending = null;
      for (const line of lines.slice(1)) {
        if (line === "}") break;
        if (pending) {
          pending.type += ` ${line.trim()}`;
        } else {
          const m = line.match(/^ {4}"([^"]+)"\??: (.*)$/);
          if (!m) continue;
          pending = { name: m[1], type: m[2] };
        }
        const depth = (pending.type.match(/\{/g) ?? []).length - (pending.type.match(/\}/g) ?? []).length;
        if (depth === 0 && pending.type.endsWith(";")) {
          fields.set(pending.name, pending.type.slice(0, -1));
          pending = null;
        }
      }
      if (extendsTypeMeta) {
        fields.set("apiVersion", "string");
        fields.set("kind", "string");
      }
      result = { fields, imports };
    }
  }
  declarations.set(file, result);
  return result;
}

function unknownFields(value, file, where, problems) {
  const declaration = readDeclaration(file);
  if (!declaration || value === null || typeof value !== "object" || Array.isArray(value)) return;
  for (const [key, child] of Object.entries(value)) {
    const type = declaration.fields.get(key);
    if (type === undefined) {
      problems.push(`${where}: unknown field '${key}'`);
      continue;
    }
    const array = type.match(/^Array<(\w+)>$/);
    const single = type.match(/^(\w+)$/);
    const map = type.match(/^\{ \[key: string\]: (\w+); \}$/);
    if (array && declaration.imports.has(array[1]) && Array.isArray(child)) {
      child.forEach((item, i) => unknownFields(item, declaration.imports.get(array[1]), `${where}.${key}[${i}]`, problems));
    } else if (single && declaration.imports.has(single[1])) {
      unknownFields(child, declaration.imports.get(single[1]), `${where}.${key}`, problems);
    } else if (map && declaration.imports.has(map[1]) && child && typeof child === "object") {
      for (const [k, v] of Object.entries(child)) {
        unknownFields(v, declaration.imports.get(map[1]), `${where}.${key}.${k}`, problems);
      }
    }
  }
}

export async function schemaProblems(object) {
  const where = `${object.kind}/${object.metadata?.name}`;
  const problems = [];
  let model;
  try {
    model = await import(modulePath(object.apiVersion, object.kind));
  } catch {
    return [`${where}: kubernetes-models has no ${object.apiVersion} ${object.kind}`];
  }
  const Model = model[object.kind];
  try {
    new Model(object).validate();
  } catch (error) {
    const details = (error.errors ?? []).map((e) => `${e.instancePath} ${e.message}`).join("; ");
    problems.push(`${where}: ${details || error.message}`);
  }
  unknownFields(object, path.join(NODE_MODULES, `${modulePath(object.apiVersion, object.kind)}.d.ts`), where, problems);
  return problems;
}
