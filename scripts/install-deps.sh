#!/usr/bin/env bash
# Installs the Debian 12 packages this project builds and tests with. Idempotent: it asks apt only for
# what is missing, so a second run costs a few dpkg queries.
set -euo pipefail

packages=(
  # toolchain
  cmake g++ ninja-build pkg-config git ca-certificates
  # the demo asks serverd with curl
  curl
  # fetchd: gRPC, protobuf, HTTP client with TLS, JSON, LZ4 and BLAKE3 for Xet
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libcurl4-openssl-dev libssl-dev rapidjson-dev liblz4-dev librust-blake3-dev b3sum
  # serverd: Boost.Beast/Asio; prometheus-cpp's core for /metrics
  libboost-dev prometheus-cpp-dev
  # engine: tokenizer regexes and Unicode tables
  libpcre2-dev libutf8proc-dev
  # tests: GoogleTest, the numpy reference, Jinja2 (transformers' chat-template engine), node for the
  # reference peers from npm
  libgtest-dev libgmock-dev python3 python3-numpy python3-jinja2
  # tests: the deployment's nginx, run by the local pod test (tests/deploy/local_pod.mjs) as a plain binary.
  # (On a machine with systemd, Debian's package also starts its default site on port 80.)
  nginx
)
# kubectl is not in Debian 12: the Kubernetes checks render k8s/ themselves (tests/deploy/kustomize.mjs) and
# compare with `kubectl kustomize` only where kubectl is installed.

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# node and npm may come from elsewhere (nodesource); only ask Debian for them when absent.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}" >&2
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
