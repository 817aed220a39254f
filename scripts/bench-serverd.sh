#!/usr/bin/env bash
# Measures serverd under load on the demo model (written by scripts/demo.sh, or DEMO_MODEL_DIR): starts
# serverd on a free port with the model's GGUF Q8_0 file (MODEL_FILE overrides) and runs
# tests/bench/serverd_bench.mjs at concurrency 1, 8 and 32 (or the levels given as arguments).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BUILD_DIR:-build}
model=${MODEL_FILE:-${DEMO_MODEL_DIR:-.demo/Qwen3-0.6B-random}/model-Q8_0.gguf}
[[ -f $model ]] || { echo "bench-serverd: $model is missing; run scripts/demo.sh once to write the demo model" >&2; exit 1; }
log=$(mktemp)
"$bin"/serverd/serverd --model "$model" --served-model-name demo --host 127.0.0.1 --port 0 --max-model-len 2048 2>"$log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$log"' EXIT
until port=$(sed -n "s/.*serving 'demo' on 127.0.0.1:\([0-9]*\)$/\1/p" "$log") && [[ -n $port ]]; do
  kill -0 "$pid" 2>/dev/null || { cat "$log"; exit 1; }
  sleep 0.2
done
node tests/bench/serverd_bench.mjs "http://127.0.0.1:$port" demo "$@"
