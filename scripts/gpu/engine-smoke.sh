#!/usr/bin/env bash
# Engine smoke test on a bare GPU machine: Python with torch, transformers and peft (deepspeed if
# importable) is all it needs; no set-up script, no network. A random-init Qwen2.5-3B-shaped model
# makes SFT and GRPO steps, full and LoRA, on 1 rank and on 2 where there are 2 GPUs; one JSON line
# per run with tokens/s, peak memory and MFU.
#   bash scripts/gpu/engine-smoke.sh [--batch 8 --tokens 2048 --steps 3 --peak-tflops 989]
set -euo pipefail
cd "$(dirname "$0")/../.."
exec "${PYTHON:-python3}" scripts/gpu/engine_smoke.py --device cuda "$@"
