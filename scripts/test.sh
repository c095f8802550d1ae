#!/usr/bin/env bash
# `make test`: every check CI runs, ordered to spend the least wall clock. The control plane
# build (about 6 minutes of two cores when nothing is cached, niced so it never starves the rest;
# a no-op once built) runs in the background while lint, types, contracts, the drift checks, the
# chart lint and the tests that need no cluster (`make test-fast`) run; the tests that need a
# cluster or Prometheus (`make test-cluster`) start once it is built. Without the go command the
# real control plane's tests skip, except in CI (CI=1), where that is an error.
set -euo pipefail
cd "$(dirname "$0")/.."
make=(make --no-print-directory)
log=.tools/control-plane.log
build=

if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
  export PATH="$PATH:/usr/local/go/bin"  # Go's own install location, when not on PATH
fi
if command -v go >/dev/null; then
  mkdir -p .tools
  echo "test: building the control plane in the background (log: $log)"
  setsid scripts/control-plane.sh >"$log" 2>&1 &
  build=$!
  # Whatever ends this script early (a lint failure, Ctrl-C) ends the build with it.
  trap 'kill -- "-$build" 2>/dev/null || true' EXIT
elif [ -n "${CI:-}" ]; then
  echo "test: CI needs the go command (Go 1.26) to build the real control plane" >&2
  exit 1
else
  echo "test: no go command: tests of the real control plane will be skipped" >&2
fi

started=$(date +%s)
"${make[@]}" setup
# The fast tier on one core while the static checks run one after another on the other; -O keeps
# each target's output together.
"${make[@]}" -j2 -O test-fast lint typecheck contracts verify-crds verify-api-docs chart-lint
echo "test: checks and fast tests took $(($(date +%s) - started)) s"

if [ -n "$build" ]; then
  if ! wait "$build"; then
    cat "$log" >&2
    echo "test: building the control plane failed (above)" >&2
    exit 1
  fi
  trap - EXIT
  tail -n 1 "$log"
fi
"${make[@]}" test-cluster
echo "test: everything took $(($(date +%s) - started)) s"
