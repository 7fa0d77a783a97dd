"""thinkfl train engine: run as `python -m thinkfl_engine` with PYTHONPATH=engine; see server.py."""

import os

# OpenMP threads that spin while waiting for work stall whole forward passes (0.6-1.9 s instead of
# 3 ms for a tiny model, measured on a loaded 2-core machine); read when torch loads libgomp.
os.environ.setdefault('OMP_WAIT_POLICY', 'PASSIVE')

import torch  # noqa: E402

# Denormal floats (nonzero, below float32's smallest normal) cost x86 cores many times a normal
# operation. A trained model's sharp attention makes some of its probabilities denormal, and its SFT
# step took 1.89x the initial model's in float32 (scripts/bench/sft-denormals.py). Flushed to zero
# at import, before the engine computes anything.
torch.set_flush_denormal(True)
