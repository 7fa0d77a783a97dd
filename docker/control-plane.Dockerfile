# The control-plane image: the controller (`trainer-ctl train`) and rollout workers
# (`trainer-ctl worker rollout`, the vllm backend's client). No GPU, no Python.
#   docker build -f docker/control-plane.Dockerfile -t thinkfl-control .
FROM node:20.18.1-bookworm-slim

WORKDIR /app
COPY package.json package-lock.json tsconfig.json ./
COPY packages packages
COPY scripts scripts
RUN npm ci
COPY configs configs
COPY docker/run.yaml docker/run.yaml
# The CLI's bundle (.cache/cli), so that no container builds it at its first start.
RUN node packages/trainer-ctl/bin/trainer-ctl.mjs version

ENTRYPOINT ["node", "packages/trainer-ctl/bin/trainer-ctl.mjs"]
CMD ["train", "docker/run.yaml"]
