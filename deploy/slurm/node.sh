#!/usr/bin/env bash
# One node of deploy/slurm/thinkfl.sbatch (started by its srun, one task per node): a vLLM replica
# on the node's last allocated GPU, the train worker of node rank SLURM_NODEID on the others,
# a rollout worker, and on node 0 Redis with its append-only file in the run directory.
set -euo pipefail
cd "$THINKFL_REPO"
rank=$SLURM_NODEID
IFS=, read -ra gpus <<< "${CUDA_VISIBLE_DEVICES:?no GPUs allocated}"
logs=$THINKFL_RUNS/slurm-$SLURM_JOB_ID/node-$rank
mkdir -p "$logs"
ctl=(node packages/trainer-ctl/bin/trainer-ctl.mjs)

# The flags of docker/compose.yaml's vllm service; one replica per GPU here, so it takes 0.9 of it.
VLLM_ARGS=(
  --model=Qwen/Qwen2.5-3B-Instruct
  --served-model-name=base
  --port=8000
  --dtype=bfloat16
  --max-model-len=8192
  --enable-lora
  --max-lora-rank=64
  --max-loras=4
  --gpu-memory-utilization=0.9
  --logprobs-mode=processed_logprobs
  --generation-config=vllm
  --enable-sleep-mode
)

pids=()
trap 'kill -TERM "${pids[@]}" 2>/dev/null; wait' TERM INT

if [ "$rank" = 0 ]; then
  mkdir -p "$THINKFL_RUNS/redis"
  # The configuration comes on stdin: a password on the command line is visible to every user of the node.
  printf 'bind 0.0.0.0\nport 6379\ndir %s\nappendonly yes\nappendfsync everysec\nrequirepass %s\n' "$THINKFL_RUNS/redis" "$REDIS_PASSWORD" \
    | redis-server - > "$logs/redis.log" 2>&1 &
  pids+=($!)
fi

CUDA_VISIBLE_DEVICES=${gpus[-1]} VLLM_ALLOW_RUNTIME_LORA_UPDATING=True VLLM_SERVER_DEV_MODE=1 HF_HOME=$THINKFL_RUNS/hf \
  vllm serve "${VLLM_ARGS[@]}" > "$logs/vllm.log" 2>&1 &
pids+=($!)

"${ctl[@]}" worker rollout --config "$THINKFL_CONFIG" > "$logs/rollout.log" 2>&1 &
pids+=($!)

# Restarted like compose's restart policy: the worker exits until the controller has downloaded
# the backbone, and a node that lost its peers rejoins when rank 0 restarts the engine.
train_loop() {
  local child=
  trap 'kill -TERM "$child" 2>/dev/null; wait "$child"; exit 0' TERM
  while :; do
    CUDA_VISIBLE_DEVICES=$(IFS=,; echo "${gpus[*]:0:${#gpus[@]}-1}") \
      "${ctl[@]}" worker train --config "$THINKFL_CONFIG" --node-rank "$rank" --id "train-$rank" &
    child=$!
    wait "$child" || true
    sleep 30
  done
}
train_loop >> "$logs/train.log" 2>&1 &
pids+=($!)

wait
