# Shared by scripts/npm-pack and scripts/release: arguments, version, the
# cross-compiled binaries and the npm tarballs. Sourced, not run.
#
#   [--platforms linux-x64,darwin-arm64,...] [--out DIR] [VERSION]
#
# Platforms are named the npm way (process.platform-process.arch).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ALL_PLATFORMS="linux-x64 linux-arm64 darwin-x64 darwin-arm64 win32-x64"

die() { echo "$(basename "$0"): $*" >&2; exit 2; }

usage_text() {
  cat <<USAGE
usage: $(basename "$0") [--platforms LIST] [--out DIR] [VERSION]
  --platforms LIST  comma-separated, of: ${ALL_PLATFORMS// /, } (default: all)
  --out DIR         output folder (default: dist/ at the repository root)
  VERSION           semver without "v" (default: from git describe --tags,
                    or 0.0.0-dev+<commit> when no tag names the commit)
USAGE
}

parse_args() {
  PLATFORMS=$ALL_PLATFORMS
  OUT=$ROOT/dist
  VERSION=
  while [ $# -gt 0 ]; do
    case $1 in
      --platforms) [ $# -ge 2 ] || die "--platforms needs a value"; PLATFORMS=${2//,/ }; shift 2 ;;
      --platforms=*) PLATFORMS=${1#*=}; PLATFORMS=${PLATFORMS//,/ }; shift ;;
      --out) [ $# -ge 2 ] || die "--out needs a value"; OUT=$2; shift 2 ;;
      --out=*) OUT=${1#*=}; shift ;;
      -h|--help) usage_text; exit 0 ;;
      -*) usage_text >&2; die "unknown option $1" ;;
      *) [ -z "$VERSION" ] || die "one VERSION only"; VERSION=${1#v}; shift ;;
    esac
  done
  for p in $PLATFORMS; do
    case " $ALL_PLATFORMS " in *" $p "*) ;; *) die "unknown platform $p (known: $ALL_PLATFORMS)" ;; esac
  done
  [ -n "$PLATFORMS" ] || die "--platforms is empty"
  mkdir -p "$OUT"
  OUT=$(cd "$OUT" && pwd)

  COMMIT=$(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
  if [ -z "$VERSION" ]; then
    local desc
    desc=$(git -C "$ROOT" describe --tags --always 2>/dev/null || true)
    if [[ $desc =~ ^v?[0-9]+\.[0-9]+\.[0-9]+ ]]; then
      VERSION=${desc#v}
    else
      VERSION=0.0.0-dev+$COMMIT
    fi
  fi
  # npm accepts semver only: MAJOR.MINOR.PATCH[-prerelease][+build].
  [[ $VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$ ]] ||
    die "version $VERSION is not semver (like 1.2.3 or 1.2.3-rc.1)"
  # SOURCE_DATE_EPOCH makes a rebuild byte-identical.
  if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
    BUILT=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d 2>/dev/null || date -u -r "$SOURCE_DATE_EPOCH" +%Y-%m-%d) # GNU or BSD date
  else
    BUILT=$(date -u +%Y-%m-%d)
  fi
}

goos() { case ${1%-*} in win32) echo windows ;; *) echo "${1%-*}" ;; esac; }
goarch() { case ${1#*-} in x64) echo amd64 ;; *) echo "${1#*-}" ;; esac; }
exe() { case $1 in win32-*) echo relay.exe ;; *) echo relay ;; esac; }

# build_binaries writes $OUT/bin/<platform>/relay[.exe] for every platform.
build_binaries() {
  # The release stamps live in package cli/version (relay --version).
  local p stamp=github.com/relayhq/relay/cli/version
  for p in $PLATFORMS; do
    echo "== go build $p ($VERSION, commit $COMMIT)" >&2
    mkdir -p "$OUT/bin/$p"
    (cd "$ROOT" && CGO_ENABLED=0 GOOS=$(goos "$p") GOARCH=$(goarch "$p") go build -trimpath \
      -ldflags "-s -w -X $stamp.version=$VERSION -X $stamp.commit=$COMMIT -X $stamp.date=$BUILT" \
      -o "$OUT/bin/$p/$(exe "$p")" ./cmd/relay)
  done
}

# fill renders an npm/ template: __NAME__ placeholders become values.
fill() {
  sed -e "s/__VERSION__/$VERSION/g" -e "s/__PLATFORM__/$2/g" -e "s/__OS__/${2%-*}/g" \
    -e "s/__CPU__/${2#*-}/g" -e "s/__EXE__/$(exe "${2:-x-x}")/g" "$1"
}

# pack_npm writes $OUT/npm/*.tgz: one package per platform built and the
# main package, whose optionalDependencies name every platform at VERSION.
pack_npm() {
  command -v npm >/dev/null || die "npm is not on PATH (install Node.js)"
  local stage=$OUT/npm-stage p dir
  rm -rf "$stage" "$OUT/npm"
  mkdir -p "$stage" "$OUT/npm"
  for p in $PLATFORMS; do
    dir=$stage/relay-$p
    mkdir -p "$dir/bin"
    fill "$ROOT/npm/platform/package.json" "$p" >"$dir/package.json"
    fill "$ROOT/npm/platform/README.md" "$p" >"$dir/README.md"
    cp "$ROOT/LICENSE" "$dir/"
    cp "$OUT/bin/$p/$(exe "$p")" "$dir/bin/"
    chmod 0755 "$dir/bin/$(exe "$p")"
  done
  dir=$stage/relay
  mkdir -p "$dir/bin"
  fill "$ROOT/npm/relay/package.json" "" >"$dir/package.json"
  cp "$ROOT/npm/relay/README.md" "$ROOT/LICENSE" "$dir/"
  cp "$ROOT/npm/relay/bin/relay" "$dir/bin/relay"
  chmod 0755 "$dir/bin/relay"
  for dir in "$stage"/*/; do
    (cd "$dir" && npm pack --silent --pack-destination "$OUT/npm" >/dev/null)
  done
  rm -rf "$stage"
  echo "== npm tarballs in $OUT/npm" >&2
  ls -1 "$OUT/npm" >&2
}
