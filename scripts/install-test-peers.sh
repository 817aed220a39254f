#!/usr/bin/env bash
# Installs the test suite's reference peers from npm into tests/node_modules (git-ignored), exactly as
# tests/package-lock.json pins them. Skips the install when the lock file has not changed since.
set -euo pipefail
cd "$(dirname "$0")/../tests"

stamp=node_modules/.package-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then
  exit 0
fi
echo "install-test-peers: npm ci in tests/" >&2
npm ci --no-audit --no-fund --loglevel=error
echo "$want" >"$stamp"
