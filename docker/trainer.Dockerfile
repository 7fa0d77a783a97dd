# The GPU trainer image: `trainer-ctl worker train` (Node) driving the Python train engine
# (PyTorch, transformers, PEFT, DeepSpeed) on the GPU. Built from the repository root:
#   docker build -f docker/trainer.Dockerfile -t thinkfl-trainer .
#
# One CUDA stack, stated: PyPI's torch 2.15.0 wheel (engine/requirements.txt) carries its own CUDA
# 13.2 runtime libraries, and the base is the CUDA 13.2 toolkit (nvcc and headers, for the ops
# DeepSpeed compiles just in time) with no other torch in it, so nothing is swapped at install.
# An NGC PyTorch base would bring its own torch build, which `pip install torch==...` replaces
# with PyPI's, leaving NGC's flash-attention and apex built against the torch that is gone.
# The host needs an NVIDIA driver of branch R580 or newer (CUDA 13; docs/gpu.md). flash_attn is not
# installed: the engine uses PyTorch's SDPA attention and logs it.
ARG BASE=nvidia/cuda:13.2.0-devel-ubuntu24.04
FROM ${BASE}

RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv python3-dev g++ curl xz-utils ca-certificates \
 && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/engine
ENV PATH=/opt/engine/bin:$PATH THINKFL_PYTHON=/opt/engine/bin/python

ARG NODE_VERSION=20.18.1
RUN curl -fsSL "https://nodejs.org/dist/v${NODE_VERSION}/node-v${NODE_VERSION}-linux-x64.tar.xz" | tar -xJ -C /usr/local --strip-components=1

WORKDIR /app
COPY engine/requirements.txt engine/requirements.txt
RUN pip install --no-cache-dir -r engine/requirements.txt \
 && python -c "import torch; assert torch.version.cuda.startswith('13.'), f'torch {torch.__version__} is built for CUDA {torch.version.cuda}, the base is CUDA 13'"

COPY package.json package-lock.json tsconfig.json ./
COPY packages packages
COPY scripts scripts
# onnxruntime-node's install script would fetch a CUDA provider; the trainer runs no ONNX generation.
RUN ONNXRUNTIME_NODE_INSTALL=skip npm ci
COPY engine engine
COPY configs configs
COPY docker/run.yaml docker/run.yaml
# The CLI's bundle (.cache/cli), so that no container builds it at its first start.
RUN node packages/trainer-ctl/bin/trainer-ctl.mjs version

ENTRYPOINT ["node", "packages/trainer-ctl/bin/trainer-ctl.mjs"]
CMD ["worker", "train", "--config", "docker/run.yaml"]
