#!/usr/bin/env bash
# Prints the path of kustomize at the pinned version, building it first from its Go module
# (sigs.k8s.io/kustomize/kustomize/v5, through the Go module proxy) into .cache/ when it is not
# there. k8s-manifests.test.ts renders deploy/k8s with it; so can you:
#   "$(bash deploy/k8s/kustomize.sh)" build deploy/k8s/overlays/multi-node
# v5.8.3 needs Go 1.27; v5.8.2 builds with the Go 1.26 of this repository's machines.
set -euo pipefail
VERSION=v5.8.2
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/.cache/kustomize-$VERSION/kustomize"
if [ ! -x "$bin" ]; then
  command -v go >/dev/null || { echo "kustomize.sh: go is needed to build kustomize $VERSION (or put a kustomize $VERSION binary at $bin)" >&2; exit 1; }
  mkdir -p "$(dirname "$bin")"
  (cd "$(dirname "$bin")" && GOBIN="$(dirname "$bin")" GOTOOLCHAIN=local GOFLAGS=-mod=mod go install "sigs.k8s.io/kustomize/kustomize/v5@$VERSION") >&2
fi
echo "$bin"
