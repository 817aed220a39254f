#!/usr/bin/env bash
# Installs what is missing, builds, and runs fetchd end to end: a loopback test hub serves a small model as Xet,
# `fetchd pull` fetches and proves it into a fresh Hugging Face cache, and a second, offline pull answers
# from the cache without the network. (The served OpenAI API joins this demo once serverd loads models.)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
bin=${BUILD_DIR:-build}

work=$(mktemp -d)
hub_pid=
cleanup() {
  [[ -n $hub_pid ]] && kill "$hub_pid" 2>/dev/null && wait "$hub_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# A small safetensors checkpoint: config, tokenizer files and 2 MiB of weights.
model=$work/repos/demo/tiny-model
mkdir -p "$model"
echo '{"architectures":["Qwen3ForCausalLM"],"hidden_size":256}' >"$model/config.json"
echo '{"model":{"type":"BPE","vocab":{},"merges":[]}}' >"$model/tokenizer.json"
/usr/bin/python3 - "$model/model.safetensors" <<'PY'
import json, struct, sys
data = bytes((i * 31) % 251 for i in range(2 << 20))
header = json.dumps({"embed.weight": {"dtype": "F32", "shape": [len(data) // 4], "data_offsets": [0, len(data)]}})
header += " " * (-len(header) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(header)) + header.encode() + data)
PY

"$bin"/tests/hub/test-hub --root "$work/repos" --xet >"$work/hub.log" &
hub_pid=$!
for _ in $(seq 200); do grep -q serving "$work/hub.log" && break; sleep 0.05; done
endpoint=$(sed -n 's/^test-hub: serving \([^ ]*\).*/\1/p' "$work/hub.log")
echo "test hub at $endpoint serving demo/tiny-model (weights stored as Xet)"

export HF_HOME=$work/home HF_ENDPOINT=$endpoint
echo "== fetchd pull --model demo/tiny-model --verbose"
path=$("$bin"/fetchd/fetchd pull --model demo/tiny-model --verbose | tail -n 1)
echo "path to serve: $path"
ls -l "$path"
echo "== HF_HUB_OFFLINE=1 fetchd pull --model demo/tiny-model"
HF_HUB_OFFLINE=1 "$bin"/fetchd/fetchd pull --model demo/tiny-model
