"""thinkfl train engine: run as `python -m thinkfl_engine` with PYTHONPATH=engine; see server.py."""

import os

# OpenMP threads that spin while waiting for work stall whole forward passes (0.6-1.9 s instead of
# 3 ms for a tiny model, measured on a loaded 2-core machine); read when torch loads libgomp.
os.environ.setdefault('OMP_WAIT_POLICY', 'PASSIVE')
