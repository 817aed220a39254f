// llama.cpp as the project's scripts run it: node-llama-cpp (tests/llamacpp/node_modules, installed by
// scripts/install-llamacpp-peer.sh) on its prebuilt CPU backend only. Nothing is built or downloaded at run
// time (build: "never", skipDownload), and no GPU is touched (gpu: false, no layers offloaded).
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));

// The package, or an error that says how to install it.
async function nodeLlamaCpp() {
  if (!existsSync(join(here, "node_modules", "node-llama-cpp", "package.json"))) {
    throw new Error(`node-llama-cpp is not installed in ${join(here, "node_modules")}: run scripts/install-llamacpp-peer.sh`);
  }
  return import("node-llama-cpp");
}

// The llama.cpp runtime with `threads` CPU threads (its math threads; 0 keeps its default).
export async function openLlama(threads) {
  const { getLlama, LlamaLogLevel } = await nodeLlamaCpp();
  const options = {
    gpu: false,
    build: "never",
    usePrebuiltBinaries: true,
    skipDownload: true,
    progressLogs: false,
    logLevel: LlamaLogLevel.error,
  };
  if (threads > 0) options.maxThreads = threads;
  return getLlama(options);
}

// A GGUF file on the CPU; llama.cpp's own error (unknown architecture, bad tensor) names the file.
export async function loadModel(llama, path) {
  if (!existsSync(path)) throw new Error(`${path}: no such file`);
  try {
    return await llama.loadModel({ modelPath: path, gpuLayers: 0 });
  } catch (error) {
    throw new Error(`llama.cpp cannot load ${path}: ${error.message}`);
  }
}

// Reads `--name value` flags (a flag may repeat: its values are collected) into an object of arrays, and
// refuses any flag not in `known`.
export function parseFlags(argv, known, usage) {
  const flags = {};
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i].replace(/^--/, "");
    if (!argv[i].startsWith("--") || !known.includes(name)) throw new Error(`unknown argument ${argv[i]}\n${usage}`);
    if (i + 1 >= argv.length) throw new Error(`${argv[i]} needs a value\n${usage}`);
    (flags[name] ??= []).push(argv[i + 1]);
  }
  return flags;
}

// A flag's single value as a non-negative integer, or `fallback` when absent.
export function integerFlag(flags, name, fallback) {
  const values = flags[name];
  if (!values) return fallback;
  const value = Number(values.at(-1));
  if (!Number.isInteger(value) || value < 0) throw new Error(`--${name} ${values.at(-1)}: expected a non-negative integer`);
  return value;
}

// Token ids separated by commas.
export function parseTokenIds(text, flag) {
  return text.split(",").map((piece) => {
    const id = Number(piece);
    if (piece === "" || !Number.isInteger(id) || id < 0) throw new Error(`${flag} ${text}: "${piece}" is not a token id`);
    return id;
  });
}

// Runs `main`, printing its error (without a stack for the expected ones) and exiting non-zero on failure.
export function runMain(name, main) {
  main().then(
    () => process.exit(0),
    (error) => {
      console.error(`${name}: ${error.message}`);
      process.exit(1);
    },
  );
}
