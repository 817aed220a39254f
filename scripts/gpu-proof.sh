#!/usr/bin/env bash
# The GPU proof: run on a lent GPU machine from the repository root, with .gpu-proof/ (made here by
# scripts/gpu-proof-pack.sh) carried beside the working tree:
#
#   bash scripts/gpu-proof.sh
#
# Checks the machine (GPU, CUDA toolkit, python3 with numpy/torch/transformers), unpacks .gpu-proof, then
# runs, keeping on after a failure: (a) the CUDA test binaries, (b) the engine's reference tests on the
# CUDA engine, (c) tests/reference/transformers_check.py, (d) serverd --device cuda against the openai npm
# client, (e) engine-gpu-bench on a qwen3-0.6b model written there, when the bench was built, (f) the
# kernel tests under compute-sanitizer, (g, h) the bench without CUDA graphs and without overlapping
# kernels, (i) each kernel of one decode step timed by ncu. A table of
# results and times comes last; full logs go to $OUT (summary.txt, gpu-proof.log, logs.tar.gz) when OUT
# is set, else to a temporary directory. Exit status 1 when a step failed. Everything stops by
# GPU_PROOF_SECONDS (default 450) after the start. Without a GPU the GPU steps are reported as failed and
# not run (GPU_PROOF_FORCE=1 runs them anyway); GPU_PROOF_DEVICE=cpu runs (b)-(d) on the CPU engine, to try
# the plumbing on a machine without a GPU.
set -uo pipefail # no -e: every step runs whatever the one before did
cd "$(dirname "$0")/.." || exit 2
root=$PWD
pack=$root/.gpu-proof
export root pack
export PYTHONUNBUFFERED=1 # a step cut off by its timeout still leaves what python printed
start=$(date +%s)
deadline=$((start + ${GPU_PROOF_SECONDS:-450}))
device=${GPU_PROOF_DEVICE:-cuda}
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-proof.XXXXXX")
logdir=$work/logs
mkdir -p "$logdir"

names=() results=() times=() notes=()
record() {
  names+=("$1") results+=("$2") times+=("$3") notes+=("$4")
  printf '%-4s %-40s %5ss  %s\n' "$2" "$1" "$3" "$4"
}

# step NAME BUDGET_SECONDS COMMAND...: runs COMMAND with its output in NAME's log, within the budget and
# the overall deadline.
step() {
  local name=$1 budget=$2
  shift 2
  local left=$((deadline - $(date +%s)))
  if ((left < 15)); then
    record "$name" FAIL 0 "not run: the time budget (GPU_PROOF_SECONDS) is spent"
    return
  fi
  ((budget > left)) && budget=$left
  local log
  log=$logdir/$(printf '%02d' "${#names[@]}")-${name//[^A-Za-z0-9_.-]/_}.log
  echo "== $name: $*" >"$log"
  local t0 rc
  t0=$(date +%s.%N)
  if declare -F "$1" >/dev/null; then
    # A function of this script (exported, with the variables it reads): timeout runs programs only.
    timeout -k 10 "$budget" bash -c '"$@"' _ "$@" >>"$log" 2>&1
  else
    timeout -k 10 "$budget" "$@" >>"$log" 2>&1
  fi
  rc=$?
  local secs
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  if ((rc == 0)); then
    record "$name" PASS "$secs" "$(summary_line "$log")"
  else
    local why="exit $rc"
    ((rc == 124 || rc == 137)) && why="timed out after ${budget}s"
    record "$name" FAIL "$secs" "$why; $(summary_line "$log")"
    tail -n 25 "$log" | sed 's/^/     | /'
  fi
}

# What a log says in one line: gtest's tally (brief mode prints no count of failures), the transformers
# check's count, else its last line.
summary_line() {
  local log=$1 line
  if grep -q '^\[==========\] [0-9]* tests\{0,1\} from .* ran' "$log"; then
    local passed skipped failed first
    passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\..*/\1/p' "$log" | tail -n 1)
    skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\}[.,].*/\1/p' "$log" | tail -n 1)
    failed=$(awk '/^\[  FAILED  \] [A-Za-z_]/ { print $4 }' "$log" | sort -u)
    first=$(head -n 1 <<<"$failed")
    line="gtest: ${passed:-0} passed, $(grep -c . <<<"$failed") failed, ${skipped:-0} skipped${first:+; first failure $first}"
  else
    line=$(grep -E 'comparisons pass' "$log" | tail -n 1)
    [[ -n $line ]] || line=$(grep -v '^[[:space:]]*$' "$log" | tail -n 1)
  fi
  cut -c1-120 <<<"$line"
}

gpu_step() {
  if [[ -n $no_gpu && ${GPU_PROOF_FORCE:-0} != 1 && $device == cuda ]]; then
    record "$1" FAIL 0 "not run: $no_gpu"
    return
  fi
  step "$@"
}

finish() {
  local passed=0 failed=0 skipped=0 i
  for i in "${!names[@]}"; do
    case ${results[$i]} in
      PASS) passed=$((passed + 1)) ;;
      FAIL) failed=$((failed + 1)) ;;
      *) skipped=$((skipped + 1)) ;;
    esac
  done
  {
    echo
    echo "gpu-proof: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(($(date +%s) - start)) s in all"
    printf '%-4s %-40s %6s  %s\n' result step time note
    for i in "${!names[@]}"; do
      printf '%-4s %-40s %5ss  %s\n' "${results[$i]}" "${names[$i]}" "${times[$i]}" "${notes[$i]}"
    done
    echo "gpu-proof: $passed passed, $failed failed, $skipped skipped"
  } | tee "$logdir/summary.txt"
  local dest=${OUT:-$work}
  mkdir -p "$dest"
  for f in "$logdir"/*.log; do
    echo "######## $(basename "$f")"
    cat "$f"
  done >"$work/gpu-proof.log"
  cp "$logdir/summary.txt" "$dest/"
  [[ $dest == "$work" ]] || cp "$work/gpu-proof.log" "$dest/"
  tar -C "$work" -czf "$dest/logs.tar.gz" logs
  echo "gpu-proof: logs in $dest (summary.txt, gpu-proof.log, logs.tar.gz)"
  # The models written here (1.2 GB for the bench) go; the logs stay where they were reported.
  if [[ $dest == "$work" ]]; then
    rm -rf "${work:?}/bin" "$work/transformers" "$work/qwen3-0.6b"
  else
    rm -rf "$work"
  fi
  ((failed == 0))
}

os_name() { sed -n 's/^PRETTY_NAME="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' /etc/os-release 2>/dev/null; }

# --- the machine -------------------------------------------------------------------------------------
{
  echo "gpu-proof: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(os_name), $(uname -m), glibc $(ldd --version 2>/dev/null | head -1 | awk '{print $NF}'), $(nproc) CPUs"
  [[ -f $pack/MANIFEST ]] && head -4 "$pack/MANIFEST" | sed 's/^/pack: /'
  echo "--- nvidia-smi -L"
  nvidia-smi -L 2>&1 || echo "(nvidia-smi failed or is missing)"
  echo "--- nvcc --version"
  nvcc_bin=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
  if [[ -n $nvcc_bin ]]; then "$nvcc_bin" --version | tail -n 2; else echo "(no nvcc on PATH or in /usr/local/cuda/bin)"; fi
} 2>&1 | tee "$logdir/machine.log"

# A GPU is there when nvidia-smi lists one or, should the image lack nvidia-smi, its device node exists.
no_gpu=""
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU ' && ! compgen -G '/dev/nvidia[0-9]*' >/dev/null; then
  no_gpu="no GPU (nvidia-smi lists none and there is no /dev/nvidia0)"
fi

# --- unpack .gpu-proof: the *.xz files and the npm packages ------------------------------------------
unpack() {
  [[ -f $pack/MANIFEST ]] || {
    echo "no .gpu-proof/MANIFEST: run scripts/gpu-proof-pack.sh where the project builds, and carry .gpu-proof"
    return 1
  }
  python3 - "$pack" <<'EOF' || return 1
import lzma, os, shutil, sys, tarfile
from pathlib import Path
pack = Path(sys.argv[1])
with tarfile.open(pack / "node_modules.tar.xz") as tar:
    if not (pack / "node_modules").exists():
        # The data filter (Python >= 3.12) refuses links out of the tree; older versions have no filter.
        tar.extractall(pack, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
for packed in sorted(pack.rglob("*.xz")):
    if packed.name == "node_modules.tar.xz":
        continue
    out = packed.with_suffix("")
    if not out.exists():
        with lzma.open(packed) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
# Whatever the transfer kept of the modes, the programs must be executable.
for program in [*pack.glob("bin/*"), pack / "node" / "node"]:
    if program.suffix != ".xz" and program.exists():
        program.chmod(0o755)
print(f"unpacked {pack}")
EOF
  # The sums the pack wrote, over every unpacked file.
  (cd "$pack" && grep -E '^[0-9a-f]{64}  ' MANIFEST | sha256sum --quiet -c -)
}
export -f unpack
step "unpack .gpu-proof" 60 unpack

# --- libraries: the carried ones through the binaries' RPATH; CUDA's from wherever this image keeps them
extra_dirs=()
find_cuda_libs() {
  local missing=() lib dir candidates=()
  for b in "$pack"/bin/*; do
    [[ $b == *.xz ]] && continue
    while read -r lib _; do missing+=("$lib"); done < <(ldd "$b" 2>/dev/null | grep '=> not found')
    # An image whose C++ runtime is older than the one we built with: ours, from the pack.
    if ldd "$b" 2>&1 | grep -q "version .\(GLIBCXX\|CXXABI\|GCC\)_[0-9.]*' not found"; then
      [[ " ${extra_dirs[*]} " == *" $pack/fallback-lib "* ]] || extra_dirs+=("$pack/fallback-lib")
      echo "$(basename "$b"): the system's libstdc++/libgcc_s is too old; using .gpu-proof/fallback-lib"
    fi
  done
  ((${#missing[@]})) || {
    echo "every library of .gpu-proof/bin resolves"
    return 0
  }
  candidates=("${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib
    /usr/local/cuda-*/lib64)
  # torch's wheels bring the CUDA libraries in nvidia/*/lib.
  while IFS= read -r dir; do candidates+=("$dir"); done < <(python3 -c '
import glob, site
for s in site.getsitepackages():
    print("\n".join(sorted(glob.glob(s + "/nvidia/*/lib") + glob.glob(s + "/nvidia/cu*/lib"))))' 2>/dev/null)
  local unresolved=()
  for lib in $(printf '%s\n' "${missing[@]}" | sort -u); do
    local found=""
    for dir in "${candidates[@]}"; do
      if [[ -e $dir/$lib ]]; then
        found=$dir
        break
      fi
    done
    if [[ -n $found ]]; then
      echo "$lib: $found"
      [[ " ${extra_dirs[*]} " == *" $found "* ]] || extra_dirs+=("$found")
    else
      unresolved+=("$lib")
    fi
  done
  ((${#unresolved[@]} == 0)) || {
    echo "not found anywhere: ${unresolved[*]}"
    return 1
  }
}
# Not through step(): it sets extra_dirs for the steps after it.
lib_log=$logdir/$(printf '%02d' "${#names[@]}")-libraries.log
t0=$(date +%s)
if find_cuda_libs >"$lib_log" 2>&1; then
  record "libraries" PASS "$(($(date +%s) - t0))" "$(tail -n 1 "$lib_log")"
else
  record "libraries" FAIL "$(($(date +%s) - t0))" "$(tail -n 1 "$lib_log")"
fi
sed 's/^/     | /' "$lib_log"

# Our binaries run through wrappers that add the CUDA directories found above to LD_LIBRARY_PATH, so
# python3 (torch's own CUDA libraries) and node never see them unless started by one of ours.
wrap=$work/bin
mkdir -p "$wrap"
ld_path=$(
  IFS=:
  echo "${extra_dirs[*]}"
)
for b in "$pack"/bin/*; do
  [[ $b == *.xz ]] && continue
  {
    echo '#!/bin/sh'
    [[ -n $ld_path ]] && echo "export LD_LIBRARY_PATH='$ld_path'\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
    echo "exec '$b' \"\$@\""
  } >"$wrap/$(basename "$b")"
  chmod +x "$wrap/$(basename "$b")"
done

# The python3 with numpy (the float64 reference) and the one with torch and transformers (PYTHON first).
pick_python() {
  local p
  for p in ${PYTHON:-} python3 /usr/bin/python3 /usr/local/bin/python3; do
    # find_spec, not import: importing torch takes seconds.
    command -v "$p" >/dev/null 2>&1 &&
      "$p" -c "import importlib.util, sys; sys.exit(not all(importlib.util.find_spec(m) for m in sys.argv[1:]))" \
        "$@" 2>/dev/null && {
      command -v "$p"
      return
    }
  done
}
reference_python=$(pick_python numpy)
torch_python=$(pick_python torch transformers safetensors numpy)
export reference_python torch_python
python_check() {
  [[ -n $reference_python ]] || {
    echo "no python3 with numpy"
    return 1
  }
  echo "reference: $reference_python"
  [[ -n $torch_python ]] || {
    echo "no python3 with torch, transformers, safetensors and numpy"
    return 1
  }
  "$torch_python" -c 'import sys, torch, transformers
print(sys.executable, "python", sys.version.split()[0], "torch", torch.__version__, "CUDA", torch.version.cuda,
      "transformers", transformers.__version__, "GPU visible to torch:", torch.cuda.is_available())'
}
export -f python_check
step "python3 (numpy, torch, transformers)" 60 python_check

node_check() {
  "$pack/node/node" --version || return 1
  # The client script resolves `openai` from tests/node_modules, which does not travel: point it at ours.
  [[ -e $root/tests/node_modules ]] || ln -s ../.gpu-proof/node_modules "$root/tests/node_modules"
  (cd "$root/tests" && "$pack/node/node" --input-type=module -e \
    'import OpenAI from "openai"; import Ajv from "ajv"; console.log("openai", OpenAI.VERSION ?? "imported", "and ajv")')
}
export -f node_check
step "node + openai, ajv packages" 30 node_check

# --- (a) the CUDA test binaries ----------------------------------------------------------------------
for t in engine_backend_cuda_tests cuda_engine_tests; do
  if [[ -x $pack/bin/$t ]]; then
    gpu_step "(a) $t" 150 "$wrap/$t" --gtest_brief=1
  else
    record "(a) $t" SKIP 0 "not in .gpu-proof (no such target when packed)"
  fi
done

# --- (c) transformers on its own checkpoints ---------------------------------------------------------
if [[ -z $torch_python ]]; then
  record "(c) transformers_check.py" FAIL 0 "not run: no python3 with torch, transformers, safetensors and numpy"
else
  gpu_step "(c) transformers_check.py" 150 "$torch_python" "$root/tests/reference/transformers_check.py" \
    --engine-logits "$wrap/engine-logits" --model-writer "$wrap/model-writer" --work "$work/transformers" \
    --devices "$([[ $device == cuda ]] && echo cuda,cpu || echo cpu)"
fi

# --- (d) serverd --device cuda for the openai npm client ---------------------------------------------
[[ -e $root/tests/node_modules ]] || ln -s ../.gpu-proof/node_modules "$root/tests/node_modules"
gpu_step "(d) serverd_openai_client_tests $device" 120 env ENGINE_TEST_DEVICE="$device" SERVERD_BINARY="$wrap/serverd" \
  FETCHD_BINARY="$wrap/fetchd" NODE_EXECUTABLE="$pack/node/node" \
  OPENAI_CLIENT_SCRIPT="$root/tests/interop/openai_client.mjs" "$wrap/serverd_openai_client_tests" --gtest_brief=1

# --- (e) engine-gpu-bench on Qwen3-0.6B's shape with the real tokenizer --------------------------------
if [[ -x $pack/bin/engine-gpu-bench ]]; then
  gpu_step "(e) model-writer qwen3-0.6b" 90 "$wrap/model-writer" --arch qwen3 --preset qwen3-0.6b \
    --tokenizer-dir "$pack/tokenizer/qwen3" --out "$work/qwen3-0.6b" --gguf Q8_0
  # GPU_BENCH_ARGS: extra flags, should the bench want more than --model.
  # shellcheck disable=SC2086
  gpu_step "(e) engine-gpu-bench" 120 "$wrap/engine-gpu-bench" --model "$work/qwen3-0.6b" ${GPU_BENCH_ARGS:-}
  # The same shape as a GGUF Q8_0 file: weights kept quantized, decoded inside the kernels.
  # shellcheck disable=SC2086
  gpu_step "(e) engine-gpu-bench Q8_0" 90 "$wrap/engine-gpu-bench" --model "$work/qwen3-0.6b/model-Q8_0.gguf" \
    --batches 64 --copy-mib 1024 ${GPU_BENCH_ARGS:-}
else
  record "(e) engine-gpu-bench" SKIP 0 "not in .gpu-proof (no such target when packed)"
fi

# --- (b) the engine reference tests on the CUDA engine -----------------------------------------------
gpu_step "(b) engine_reference_tests $device" 150 env ENGINE_TEST_DEVICE="$device" REFERENCE_PYTHON="${reference_python:-python3}" \
  REFERENCE_MODEL_SCRIPT="$root/tests/reference/reference_model.py" "$wrap/engine_reference_tests" --gtest_brief=1

# --- (f) the kernel tests under compute-sanitizer's memcheck: no access outside an allocation -----------
if sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1) &&
  [[ -n $sanitizer ]]; then
  # The backend's kernels and sampling; the weight kernels' large shapes would take minutes under memcheck.
  [[ -x $pack/bin/engine_backend_cuda_tests ]] && gpu_step "(f) memcheck engine_backend_cuda_tests" 150 "$sanitizer" --tool memcheck \
    --error-exitcode 9 "$wrap/engine_backend_cuda_tests" --gtest_brief=1 --gtest_filter='-*CudaWeightKernels*'

else
  record "(f) memcheck" SKIP 0 "no compute-sanitizer on this machine"
fi

# --- (g) decode without CUDA graphs: what capturing decode steps buys ----------------------------------
if [[ -x $pack/bin/engine-gpu-bench ]]; then
  # shellcheck disable=SC2086
  gpu_step "(g) engine-gpu-bench --enforce-eager" 90 "$wrap/engine-gpu-bench" --model "$work/qwen3-0.6b" \
    --enforce-eager --batches 64 --copy-mib 1024 ${GPU_BENCH_ARGS:-}
fi

# --- (h) decode with strict stream order: what letting kernels overlap (programmatic launch) buys -------
if [[ -x $pack/bin/engine-gpu-bench ]]; then
  # shellcheck disable=SC2086
  gpu_step "(h) engine-gpu-bench --no-overlap-kernels" 90 "$wrap/engine-gpu-bench" --model "$work/qwen3-0.6b" \
    --no-overlap-kernels --batches 64 --copy-mib 1024 ${GPU_BENCH_ARGS:-}
fi

# --- (i) where a batch-1 decode step's time goes: every kernel of one step timed by Nsight Compute -------
# The sum of the kernels' own times beside (e)'s time per token is what launches and gaps cost.
kernel_times() {
  "$ncu" --profile-from-start off --clock-control none --metrics gpu__time_duration.sum --csv \
    --log-file "$work/ncu.csv" "$wrap/engine-gpu-bench" --model "$work/qwen3-0.6b" --profile-decode-step || return 1
  python3 - "$work/ncu.csv" <<'EOF'
import collections, csv, sys
rows = [line for line in open(sys.argv[1], errors="replace") if line.startswith('"')]
if not rows:
    sys.exit("ncu wrote no kernel rows")
# Nsight Compute spells the unit "nsecond" in some versions and "ns" in others.
scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6, "ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
total, count = collections.Counter(), collections.Counter()
for r in csv.DictReader(rows):
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    if r["Metric Unit"] not in scale:
        sys.exit(f"ncu reported gpu__time_duration.sum in {r['Metric Unit']!r}, a unit this script does not know")
    us = float(r["Metric Value"].replace(",", "")) * scale[r["Metric Unit"]]
    total[r["Kernel Name"]] += us
    count[r["Kernel Name"]] += 1
print(f"{'kernel':<40} {'launches':>8} {'total us':>10} {'mean us':>8}")
for name, us in total.most_common():
    print(f"{name[:40]:<40} {count[name]:>8} {us:>10.1f} {us / count[name]:>8.2f}")
print(f"one batch-1 decode step: {sum(count.values())} kernels, {sum(total.values()):.1f} us of kernel time")
EOF
}
export -f kernel_times
if ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1) &&
  [[ -n $ncu && -x $pack/bin/engine-gpu-bench ]]; then
  export ncu work wrap
  gpu_step "(i) kernel times of a decode step (ncu)" 120 kernel_times
else
  record "(i) kernel times of a decode step (ncu)" SKIP 0 "no ncu on this machine, or no engine-gpu-bench"
fi

finish
