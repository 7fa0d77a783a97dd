"""thinkfl train engine: run as `python3 -m thinkfl_engine` with PYTHONPATH=engine; see server.py."""
