#!/usr/bin/env bash
# The whole test suite: vet, the tiers test, formatting, then every
# package's tests with the race detector, both tiers: the fast tier (what
# `go test -short ./...` runs) and the integration tier (test/itest, which
# starts real server processes on loopback and stops them by pid).
# NACRE_ITEST_LONG=1 runs the longer variants.
set -euo pipefail
cd "$(dirname "$0")/.."
go vet ./...
# The tiers first: an import against them fails here in seconds.
go test -count=1 ./test/layering
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
go test -race -count=1 -timeout 18m ./...
