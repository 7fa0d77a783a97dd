# The GPU trainer image: `trainer-ctl worker train` (Node) driving the Python train engine
# (PyTorch, transformers, PEFT, DeepSpeed) on the GPU. Built from the repository root:
#   docker build -f docker/trainer.Dockerfile -t thinkfl-trainer .
# The base is pinned by tag; the engine's Python packages are pinned in engine/requirements.txt.
ARG BASE=nvcr.io/nvidia/pytorch:25.01-py3
FROM ${BASE}

ARG NODE_VERSION=20.18.1
RUN curl -fsSL "https://nodejs.org/dist/v${NODE_VERSION}/node-v${NODE_VERSION}-linux-x64.tar.xz" | tar -xJ -C /usr/local --strip-components=1

WORKDIR /app
COPY engine/requirements.txt engine/requirements.txt
RUN pip install --no-cache-dir -r engine/requirements.txt

COPY package.json package-lock.json tsconfig.json ./
COPY packages packages
COPY scripts scripts
RUN npm ci
COPY engine engine
COPY configs configs
COPY docker/run.yaml docker/run.yaml

ENTRYPOINT ["node", "packages/trainer-ctl/bin/trainer-ctl.mjs"]
CMD ["worker", "train", "--config", "docker/run.yaml"]
