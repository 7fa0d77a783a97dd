#!/usr/bin/env bash
# Installs everything the project needs on a fresh Debian machine (idempotent):
# redis-server, Chromium (the report test opens the run report in it, driven by playwright-core: no
# browser download), the train engine's Python environment (.cache/venv, pinned versions from
# engine/requirements.txt, from PyPI, installed by uv), the npm packages, and TensorBoard at a pinned version in
# its own venv (the test that reads back the run's event files), and the engine's dev tools (Ruff,
# mypy) in .cache/venv-dev from engine/requirements-dev.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

debs=(redis-server chromium)
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

# uv (from PyPI, pinned, in its own venv) builds the engine's venv: it installs from its cache
# (~/.cache/uv) by hard links, so a venv takes seconds once the wheels are there, where pip
# unpacked the several GB of torch's CUDA libraries again for each checkout (about a minute).
UV_VERSION=0.13.9
uv_venv=.cache/venv-uv
if ! "$uv_venv/bin/uv" --version 2>/dev/null | grep -qx "uv $UV_VERSION"; then
  echo "setup: uv $UV_VERSION into $uv_venv" >&2
  python3 -m venv --clear "$uv_venv"
  "$uv_venv/bin/pip" install --quiet --disable-pip-version-check "uv==$UV_VERSION"
fi
uv="$uv_venv/bin/uv"

# The engine's venv is rebuilt only when the requirements (or this recipe) change: a stamp
# holds the hash of both. PyPI's Linux torch wheel brings its CUDA libraries (several GB):
# PyPI has no CPU-only build, and the same environment then runs on GPU machines.
venv=.cache/venv
stamp="$venv/.requirements.sha256"
want="$(cat engine/requirements.txt scripts/setup.sh | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  python="${THINKFL_SETUP_PYTHON:-python3}"
  "$python" -c 'import sys; assert sys.version_info >= (3, 10), "the engine needs Python >= 3.10"'
  echo "setup: building $venv from engine/requirements.txt with $("$python" --version)" >&2
  "$uv" venv --quiet --clear --python "$python" "$venv"
  # Compiled at install, as pip does: where PYTHONDONTWRITEBYTECODE is set (this project's machines)
  # nothing is compiled later, and the engine's imports then took 7.8 s a start against 3.7 s.
  pip=("$uv" pip install --quiet --compile-bytecode --python "$venv/bin/python")
  # DeepSpeed's build imports torch, so torch comes first and the rest builds without isolation.
  "${pip[@]}" $(grep -E '^(torch|numpy|setuptools|wheel)==' engine/requirements.txt)
  "${pip[@]}" --no-build-isolation -r engine/requirements.txt
  echo "$want" > "$stamp"
fi

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "setup: npm ci" >&2
  # onnxruntime-node's install script would fetch the CUDA 12 provider from NuGet on linux/x64;
  # the project runs its CPU provider, which the package bundles. The script reads this
  # variable itself, so npm never sees an option it does not know (no warning on later commands).
  ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund --loglevel=error
fi
# The engine's dev tools (Ruff, mypy; npm run lint:py, typecheck:py) in their own venv, rebuilt when their pins change.
dev_venv=.cache/venv-dev
dev_want="$(sha256sum engine/requirements-dev.txt | cut -d' ' -f1)"
if [ "$(cat "$dev_venv/.requirements.sha256" 2>/dev/null)" != "$dev_want" ]; then
  echo "setup: engine dev tools into $dev_venv" >&2
  "$uv" venv --quiet --clear --python python3 "$dev_venv"
  "$uv" pip install --quiet --compile-bytecode --python "$dev_venv/bin/python" -r engine/requirements-dev.txt
  echo "$dev_want" > "$dev_venv/.requirements.sha256"
fi
# Kept in step with testkit/tensorboard.ts, which makes the same venv when it is missing.
TB_VERSION=2.21.0
TB_VENV=.cache/venv-tensorboard-$TB_VERSION
if ! "$TB_VENV/bin/python" -c "import tensorboard, sys; sys.exit(tensorboard.__version__ != '$TB_VERSION')" 2>/dev/null; then
  echo "setup: tensorboard $TB_VERSION into $TB_VENV" >&2
  python3 -m venv --clear "$TB_VENV"
  "$TB_VENV/bin/python" -m pip install --quiet "tensorboard==$TB_VERSION"
fi
# kustomize renders deploy/k8s for k8s-manifests.test.ts: built once from its Go module into .cache/.
bash deploy/k8s/kustomize.sh >/dev/null
echo "setup: done" >&2
