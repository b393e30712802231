#!/usr/bin/env bash
# Installs what Nacre needs on Debian 12 (run as root or with sudo): the
# FUSE 3 tools; with --tests also the tools its tests and benchmarks
# drive (what .ci/run asks for; scripts/up.sh, the quick start, does not).
# Go itself must be 1.26 or newer (https://go.dev/dl); the Go modules are
# fetched by `go build` from the module proxy.
set -euo pipefail
need=(fuse3 attr acl)
if [ "${1:-}" = "--tests" ]; then
  # fio, bonnie++, stress-ng: benchmarks and load; e2fsprogs and mount:
  # the loop device of the disk-figures test (test/testdisk);
  # python3-yaml: the test of `nacre status --prometheus`; chromium: the
  # test of the MGS's web page loads it headless; systemd: the test of
  # `nacre install --systemd` checks the units with systemd-analyze.
  need+=(fio bonnie++ stress-ng e2fsprogs mount python3-yaml chromium systemd)
fi
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
# The PyPI package darshan reads Darshan logs for `nacre bench age --darshan`
# (and its tests use the sample logs it ships).
if [ "${1:-}" = "--tests" ] && ! python3 -c 'import darshan' 2>/dev/null; then
  python3 -m pip --version >/dev/null 2>&1 || { SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo; $SUDO apt-get install -y -qq python3-pip; }
  python3 -m pip install -q darshan==3.5.0 || python3 -m pip install -q --break-system-packages darshan==3.5.0
fi
if ! command -v go >/dev/null; then
  echo "Go is not installed: get Go 1.26 or newer from https://go.dev/dl and put it on PATH" >&2
  exit 1
fi
