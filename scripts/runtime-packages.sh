#!/usr/bin/env bash
# Prints, one per line, the Debian (or Ubuntu) packages holding the shared libraries that the given binaries
# load: what a runtime image needs installed to run them. Run it where they were built, e.g. a Dockerfile's
# build stage:  scripts/runtime-packages.sh build/fetchd/fetchd build/serverd/serverd
set -euo pipefail
if (($# == 0)); then
  echo "usage: scripts/runtime-packages.sh BINARY..." >&2
  exit 2
fi

libraries=$(ldd "$@")
if grep -q 'not found' <<<"$libraries"; then
  echo "runtime-packages: some libraries are missing here:" >&2
  grep 'not found' <<<"$libraries" >&2
  exit 1
fi

# dpkg knows a library by the path its package installed, which on a merged-/usr system may be /lib/... or
# /usr/lib/... whatever ldd printed.
package_of() {
  local candidate
  for candidate in "$1" "$(readlink -f "$1")" "${1#/usr}" "/usr$1"; do
    if dpkg -S "$candidate" 2>/dev/null | head -n 1 | cut -d: -f1; then
      return 0
    fi
  done
  echo "runtime-packages: no installed package holds $1" >&2
  return 1
}

awk '$2 == "=>" && $3 ~ /^\// { print $3 }' <<<"$libraries" | sort -u | while read -r library; do
  package_of "$library"
done | sort -u
