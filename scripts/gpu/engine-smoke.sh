#!/usr/bin/env bash
# Engine smoke test on a GPU machine (not part of CI): random-init Qwen2.5-3B-shaped model, a few
# GRPO steps with full fine-tuning and with LoRA; prints tokens/s, peak memory and MFU as JSON lines.
#   bash scripts/gpu/engine-smoke.sh [--batch 8 --tokens 2048 --steps 3 --peak-tflops 989]
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/setup.sh
exec .cache/venv/bin/python scripts/gpu/engine_smoke.py --device cuda "$@"
