#!/usr/bin/env bash
# Checks the image recipes, and optionally binaries built here, for what HTTPS and Kubernetes need:
#   - a stage that configures the build with HTTPS on (FETCHD_HTTPS is ON unless -DFETCHD_HTTPS=OFF is
#     given) installs libssl-dev and libcurl4-openssl-dev (libcurl built against OpenSSL);
#   - the runtime stage (the last one) installs the TLS runtime the binaries load (libssl3 and libcurl4, or
#     Ubuntu's libssl3t64 and libcurl4t64) and, with HTTPS on, the trust store (ca-certificates);
#   - the runtime stage ends with USER set to a numeric, non-zero uid (what runAsNonRoot can verify);
#   - with --binary (fetchd, the binary that reaches the hub), it loads libssl and libcurl (OpenSSL flavour)
#     when --https is on.
# A stage FROM an earlier stage of the same file inherits what that stage installed and its USER.
#
# usage: scripts/check-image.sh [--https on|off] [--binary FILE]... [DOCKERFILE...]
#        (default: Dockerfile and Dockerfile.cuda at the repository root; --https on)
set -euo pipefail

https=on
binaries=()
dockerfiles=()
while (($#)); do
  case $1 in
    --https) https=${2,,}; shift 2 ;;
    --binary) binaries+=("$2"); shift 2 ;;
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    -*) echo "check-image: unknown option $1" >&2; exit 2 ;;
    *) dockerfiles+=("$1"); shift ;;
  esac
done
if [[ $https != on && $https != off ]]; then
  echo "check-image: --https takes on or off" >&2
  exit 2
fi
if ((${#dockerfiles[@]} == 0)); then
  root=$(cd "$(dirname "$0")/.." && pwd)
  dockerfiles=("$root/Dockerfile" "$root/Dockerfile.cuda")
fi

problems=0
refuse() {
  echo "check-image: $*" >&2
  problems=$((problems + 1))
}

# One logical instruction per line, led by its line number: continuations joined, comment lines dropped.
instructions() {
  awk '
    /^[[:space:]]*#/ { next }
    {
      if (joined == "") start = NR
      line = $0
      if (sub(/\\[[:space:]]*$/, "", line)) { joined = joined line " "; next }
      joined = joined line
      if (joined ~ /[^[:space:]]/) print start, joined
      joined = ""
    }
    END { if (joined ~ /[^[:space:]]/) print start, joined }' "$1"
}

check_dockerfile() {
  local file=$1
  local -a names=() parents=() packages=() users=() configures=() https_off=()
  local n=-1 line keyword rest image name lower
  while read -r line keyword rest; do
    case ${keyword^^} in
      FROM)
        n=$((n + 1))
        image='' name=''
        for word in $rest; do
          if [[ $word == --* ]]; then continue; fi
          if [[ -z $image ]]; then image=$word; elif [[ ${word^^} != AS ]]; then name=$word; fi
        done
        # Unnamed stages are called by the line of their FROM.
        names[n]=${name:-line $line}
        parents[n]=-1
        for ((i = 0; i < n; i++)); do
          [[ ${names[i]} == "$image" ]] && parents[n]=$i
        done
        packages[n]=" " users[n]='' configures[n]=0 https_off[n]=0
        if ((parents[n] >= 0)); then
          packages[n]=${packages[parents[n]]}
          users[n]=${users[parents[n]]}
        fi
        ;;
      RUN)
        ((n >= 0)) || continue
        # Every word counts as a possible package name; quotes and trailing separators are dropped.
        for word in $rest; do
          word=${word//[\'\"]/}
          packages[n]+="${word%;} "
        done
        if [[ $rest =~ (^|[[:space:]\;\&\|])cmake[[:space:]]+(-S|-B|-G|\.|\.\.|-D)([[:space:]]|$|[^-]) ]]; then
          configures[n]=1
          lower=${rest,,}
          [[ $lower =~ -dfetchd_https(:bool)?=(off|0|false|no)([[:space:]]|$) ]] && https_off[n]=1
        fi
        ;;
      USER) ((n >= 0)) && users[n]=${rest%% *} ;;
    esac
  done < <(instructions "$file")

  if ((n < 0)); then
    refuse "$file: no FROM instruction; is it a Dockerfile?"
    return
  fi
  has() { [[ ${packages[$1]} == *" $2 "* ]]; }

  local any_https=0
  for ((i = 0; i <= n; i++)); do
    ((configures[i])) || continue
    ((https_off[i])) && continue
    any_https=1
    for dev in libssl-dev libcurl4-openssl-dev; do
      has "$i" "$dev" || refuse "$file, build stage '${names[i]}': builds with HTTPS on (no -DFETCHD_HTTPS=OFF) but does not" \
        "install $dev; add $dev to the stage's apt-get install (or configure with -DFETCHD_HTTPS=OFF)"
    done
  done

  local last=$n where="$file, runtime stage '${names[n]}'"
  if ! has "$last" libssl3 && ! has "$last" libssl3t64; then
    refuse "$where: lacks the OpenSSL runtime the binaries load; add libssl3 (libssl3t64 on Ubuntu 24.04) to its apt-get install"
  fi
  if ! has "$last" libcurl4 && ! has "$last" libcurl4t64; then
    refuse "$where: lacks libcurl built against OpenSSL; add libcurl4 (libcurl4t64 on Ubuntu 24.04) to its apt-get install"
  fi
  if ((any_https)) && ! has "$last" ca-certificates; then
    refuse "$where: lacks the trust store HTTPS needs to verify the hub; add ca-certificates to its apt-get install"
  fi
  local user=${users[last]} uid
  uid=${user%%:*}
  if [[ -z $user ]]; then
    refuse "$where: runs as root (no USER); add a user with a fixed uid and end the stage with USER 10001:10001"
  elif [[ ! $uid =~ ^[0-9]+$ ]]; then
    refuse "$where: USER $user is a name; Kubernetes' runAsNonRoot can only verify a numeric uid: write USER 10001:10001"
  elif ((10#$uid == 0)); then
    refuse "$where: USER $user is root; set USER to a non-zero uid such as 10001:10001"
  fi
}

for file in "${dockerfiles[@]}"; do
  if [[ ! -r $file ]]; then
    refuse "$file: cannot be read"
    continue
  fi
  before=$problems
  check_dockerfile "$file"
  ((problems == before)) && echo "check-image: $file: ok"
done

for binary in "${binaries[@]}"; do
  if ! libraries=$(ldd "$binary" 2>&1); then
    refuse "$binary: ldd cannot read it: $libraries"
    continue
  fi
  before=$problems
  if [[ $https == on ]]; then
    grep -q 'libssl\.so' <<<"$libraries" ||
      refuse "$binary: does not load libssl although HTTPS is on; install libssl-dev and libcurl4-openssl-dev and configure again"
    grep -q 'libcurl\.so' <<<"$libraries" ||
      refuse "$binary: does not load libcurl (OpenSSL flavour) although HTTPS is on; install libcurl4-openssl-dev and configure again"
  fi
  ((problems == before)) && echo "check-image: $binary: ok (HTTPS $https)"
done

exit $((problems > 0))
