#!/usr/bin/env bash
# scripts/check-image.sh on the real Dockerfiles (must pass) and on mutated copies (each must be refused
# with its message, naming the file and the stage).
#   tests/deploy/check_image_test.sh CASE [FETCHD_BINARY on|off]
# CASE: real | builder-without-libssl-dev | builder-without-libcurl-dev | runtime-without-ca-certificates |
#       runtime-without-libssl3 | no-user | named-user | binary
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
checker=$root/scripts/check-image.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Runs the checker on a copy of each Dockerfile changed by the sed script $2, from the line $1 of that
# file's stages (build: its first stage, runtime: its last), and expects a refusal containing $3.
expect_refusal() {
  local where=$1 edit=$2 expected=$3 dockerfile copy first
  for dockerfile in Dockerfile Dockerfile.cuda; do
    copy=$work/$dockerfile
    if [[ $where == runtime ]]; then
      first=$(grep -n '^FROM' "$root/$dockerfile" | tail -n 1 | cut -d: -f1)
    else
      first=1
    fi
    sed -E "${first},\$ { $edit }" "$root/$dockerfile" >"$copy"
    cmp -s "$copy" "$root/$dockerfile" && fail "the mutation '$edit' changed nothing in $dockerfile"
    if "$checker" "$copy" >"$work/out" 2>&1; then
      fail "$dockerfile with '$edit' was accepted: $(cat "$work/out")"
    fi
    grep -qF "$copy, " "$work/out" || fail "the refusal does not name $copy: $(cat "$work/out")"
    grep -qF -- "$expected" "$work/out" || fail "expected '$expected', got: $(cat "$work/out")"
    echo "ok $dockerfile refused: $(grep -F -- "$expected" "$work/out" | head -n 1)"
  done
}

case ${1:-} in
  real)
    "$checker" "$root/Dockerfile" "$root/Dockerfile.cuda"
    ;;
  builder-without-libssl-dev)
    expect_refusal build 's/ libssl-dev / /' "build stage 'build': builds with HTTPS on (no -DFETCHD_HTTPS=OFF) but does not install libssl-dev; add libssl-dev"
    ;;
  builder-without-libcurl-dev)
    expect_refusal build 's/ libcurl4-openssl-dev / /' "build stage 'build': builds with HTTPS on (no -DFETCHD_HTTPS=OFF) but does not install libcurl4-openssl-dev; add libcurl4-openssl-dev"
    ;;
  runtime-without-ca-certificates)
    expect_refusal runtime 's/ ca-certificates / /' "lacks the trust store HTTPS needs to verify the hub; add ca-certificates"
    ;;
  runtime-without-libssl3)
    expect_refusal runtime 's/ libssl3(t64)? / /' "lacks the OpenSSL runtime the binaries load; add libssl3"
    ;;
  no-user)
    expect_refusal runtime '/^USER /d' "runs as root (no USER); add a user with a fixed uid and end the stage with USER 10001:10001"
    ;;
  named-user)
    expect_refusal runtime 's/^USER .*/USER modelserve/' "USER modelserve is a name; Kubernetes' runAsNonRoot can only verify a numeric uid"
    ;;
  binary)
    fetchd=${2:?the binary case needs the fetchd binary} https=${3:-on}
    "$checker" --https "$https" --binary "$fetchd" "$root/Dockerfile"
    # A binary without the TLS libraries is refused when HTTPS is on, and passes when it is off.
    if "$checker" --https on --binary /bin/true "$root/Dockerfile" >"$work/out" 2>&1; then
      fail "/bin/true passed as an HTTPS build: $(cat "$work/out")"
    fi
    grep -qF "/bin/true: does not load libssl although HTTPS is on" "$work/out" || fail "unexpected: $(cat "$work/out")"
    "$checker" --https off --binary /bin/true "$root/Dockerfile"
    echo "ok /bin/true refused as an HTTPS build"
    ;;
  *)
    fail "unknown case '${1:-}'"
    ;;
esac
