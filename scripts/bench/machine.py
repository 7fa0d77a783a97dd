"""What a Python bench prints about the machine it ran on: the CPU model and the load average."""
import os
import platform
from pathlib import Path


def cpu_model() -> str:
    for line in Path('/proc/cpuinfo').read_text().splitlines():
        if line.startswith('model name'):
            return line.split(':', 1)[1].strip()
    return platform.processor() or 'unknown'


def load() -> str:
    return ' '.join(f'{x:.2f}' for x in os.getloadavg())
