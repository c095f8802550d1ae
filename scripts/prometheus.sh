#!/usr/bin/env bash
# Puts a real Prometheus server and promtool into .tools/bin for the tests and the sandbox.
# Order: $PROMETHEUS_BIN (a prometheus binary; promtool beside it), then PATH, then Debian's
# `prometheus` package unpacked locally with `apt-get download` (no service is installed).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/.tools/bin"
mkdir -p "$bin"
if [ -x "$bin/prometheus" ] && [ -x "$bin/promtool" ]; then
  exit 0
fi

link_pair() {  # $1: directory holding prometheus and promtool
  ln -sf "$1/prometheus" "$bin/prometheus"
  ln -sf "$1/promtool" "$bin/promtool"
}

if [ -n "${PROMETHEUS_BIN:-}" ]; then
  dir=$(cd "$(dirname "$PROMETHEUS_BIN")" && pwd)
  [ -x "$dir/prometheus" ] && [ -x "$dir/promtool" ] || {
    echo "PROMETHEUS_BIN=$PROMETHEUS_BIN: need prometheus and promtool in that directory" >&2
    exit 1
  }
  link_pair "$dir"
elif command -v prometheus >/dev/null && command -v promtool >/dev/null; then
  link_pair "$(dirname "$(command -v prometheus)")"
elif command -v apt-get >/dev/null; then
  work="$root/.tools/prometheus"
  rm -rf "$work" && mkdir -p "$work"
  if ! (cd "$work" && apt-get download prometheus >/dev/null 2>&1); then
    if [ "$(id -u)" -ne 0 ]; then
      echo "cannot download Debian's prometheus package; run 'sudo apt-get update' and retry," >&2
      echo "or set PROMETHEUS_BIN to a prometheus binary (promtool beside it)" >&2
      exit 1
    fi
    apt-get update -qq >/dev/null
    (cd "$work" && apt-get download prometheus >/dev/null)
  fi
  dpkg-deb -x "$work"/prometheus_*.deb "$work/root"
  link_pair "$work/root/usr/bin"
else
  echo "no Prometheus found: install it (e.g. 'apt-get install prometheus') or set" \
    "PROMETHEUS_BIN to a prometheus binary with promtool beside it" >&2
  exit 1
fi
"$bin/prometheus" --version >/dev/null
"$bin/promtool" --version >/dev/null
