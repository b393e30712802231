#!/usr/bin/env bash
# One command for a new user: install what is needed, build nacre into
# ./bin, and bring up a local cluster (MGS, one MDT, two OSTs) in
# ./nacre-cluster, mounted at ./nacre-mnt. Extra arguments go to `nacre up`
# (e.g. --osts 4, --detach).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
go build -o bin/nacre ./cmd/nacre
echo "built $(pwd)/bin/nacre"
mkdir -p nacre-mnt
exec bin/nacre up --dir nacre-cluster --mount nacre-mnt "$@"
