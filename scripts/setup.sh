#!/usr/bin/env bash
# Installs everything the project needs on a fresh Debian machine (idempotent):
# redis-server, Debian's PyTorch stack for the train engine, and the npm packages.
set -euo pipefail
cd "$(dirname "$0")/.."

debs=(redis-server python3-torch python3-numpy python3-onnx python3-redis libopenblas0-pthread)
missing=()
for p in "${debs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "setup: npm ci" >&2
  # onnxruntime-node's install script would fetch the CUDA 12 provider from NuGet on linux/x64;
  # the project runs its CPU provider, which the package bundles. The script reads this
  # variable itself, so npm never sees an option it does not know (no warning on later commands).
  ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund --loglevel=error
fi
echo "setup: done" >&2
