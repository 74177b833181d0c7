#!/usr/bin/env bash
# Builds Prometheus 3 and its promtool from the Go module github.com/prometheus/prometheus (the
# version prometheus/build/go.mod pins: v0.316.0 is Prometheus 3.16.0) once per content: the two
# binaries go to a cache directory keyed by a hash of prometheus/build/{go.mod,go.sum}, and a
# second run with the same sources only prints its path. The last line printed (stdout) is always
# that directory, which holds `prometheus` and `promtool`; progress goes to stderr.
#
#   bash scripts/build-prometheus.sh          # build if needed, print the directory
#   bash scripts/build-prometheus.sh --path   # print the directory it would use (needs no Go)
#
# prometheus/build/ is a module of its own whose go.mod names the two commands as `tool`s, so its
# go.sum pins every dependency; it was made with
#   cd prometheus/build && go get -tool github.com/prometheus/prometheus/cmd/prometheus@v0.316.0 \
#     github.com/prometheus/prometheus/cmd/promtool@v0.316.0
# The web UI's assets are not built in (no `builtinassets` tag, no npm): the HTTP API, the OTLP
# receiver and the rule engine are whole, only the pages of the UI are missing. Nor are the
# service discoveries (`remove_all_sd`, Prometheus's own build tag: no cloud SDKs, a third of
# the compile time): static targets and files only, all the tests and the compose stack use.
#
# Cache: ${XDG_CACHE_HOME:-$HOME/.cache}/selfheal/prometheus-<hash>/{prometheus,promtool}. Needs
# Go 1.26.7 or later and the Go module proxy (modules are downloaded on the first build). The build
# runs under `nice -n 19` so it does not disturb timing-sensitive work on the same machine.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC="$ROOT/prometheus/build"
MODULE="github.com/prometheus/prometheus"

die() {
  echo "build-prometheus.sh: $*" >&2
  exit 1
}

[ -f "$SRC/go.mod" ] || die "no $SRC/go.mod"

# What the binaries are built with beside the sources: part of the cache key.
TAGS="netgo,remove_all_sd"

# The key: the names and sha256 of go.mod and go.sum, in a fixed order, and the build tags.
hash_sources() {
  (
    cd "$SRC"
    LC_ALL=C sha256sum -- go.mod go.sum | LC_ALL=C sort -k2
    echo "tags $TAGS"
  ) | sha256sum | cut -c1-16
}

HASH="$(hash_sources)"
CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/selfheal"
OUT_DIR="$CACHE_ROOT/prometheus-$HASH"

if [ "${1:-}" = "--path" ]; then
  echo "$OUT_DIR"
  exit 0
elif [ $# -gt 0 ]; then
  die "unknown argument '$1' (usage: build-prometheus.sh [--path])"
fi

if [ -x "$OUT_DIR/prometheus" ] && [ -x "$OUT_DIR/promtool" ]; then
  echo "$OUT_DIR"
  exit 0
fi

command -v go >/dev/null 2>&1 ||
  die "'go' is not on the PATH: install Go 1.26.7 or later to build Prometheus (prometheus/build/)"

GO_VERSION="$(go env GOVERSION)"
case "$GO_VERSION" in
  go1.26.[7-9]* | go1.26.[1-9][0-9]* | go1.2[7-9]* | go1.[3-9][0-9]* | go[2-9]*) ;;
  *) die "$GO_VERSION is too old: prometheus/build/go.mod needs Go 1.26.7 or later" ;;
esac

# The version the module pins, stamped into `--version`: v0.MMM.P is Prometheus (MMM/100).(MMM%100).P
# (v0.316.0 -> 3.16.0).
PIN="$(sed -n "s|^[[:space:]]*$MODULE v0\.\([0-9]*\)\.\([0-9]*\).*|\1 \2|p" "$SRC/go.mod" | head -1)"
if [ -n "$PIN" ]; then
  read -r MMM PATCH <<<"$PIN"
  VERSION="$((MMM / 100)).$((MMM % 100)).$PATCH"
else
  VERSION="unknown"
fi

mkdir -p "$CACHE_ROOT"
TMP="$(mktemp -d "$CACHE_ROOT/.prometheus-$HASH.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

echo "build-prometheus.sh: building prometheus and promtool $VERSION ($GO_VERSION, sources $HASH) into $OUT_DIR" >&2
start=$SECONDS
(
  cd "$SRC"
  CGO_ENABLED=0 nice -n 19 go build -trimpath -buildvcs=false -tags "$TAGS" \
    -ldflags="-s -w -X github.com/prometheus/common/version.Version=$VERSION -X github.com/prometheus/common/version.Branch=module -X github.com/prometheus/common/version.BuildUser=build-prometheus.sh" \
    -o "$TMP/" "$MODULE/cmd/prometheus" "$MODULE/cmd/promtool"
) || die "go build failed in prometheus/build/ (output above)"
chmod 755 "$TMP" "$TMP/prometheus" "$TMP/promtool"
# Atomic: a concurrent run sees either no directory or a whole one.
if ! mv -T "$TMP" "$OUT_DIR" 2>/dev/null; then
  [ -x "$OUT_DIR/prometheus" ] && [ -x "$OUT_DIR/promtool" ] ||
    die "could not move the build to $OUT_DIR"
fi
trap - EXIT
rm -rf "$TMP"
echo "build-prometheus.sh: built in $((SECONDS - start)) s" >&2
echo "$OUT_DIR"
