"""What the benches that time SFT steps on a run's teacher conversations share: their arguments and the
line that says what they ran on (the CPU model, the load average, the conversations' sizes)."""
import argparse
import json
import statistics
from pathlib import Path
from typing import Any, Dict, List

from machine import cpu_model, load


def add_teacher_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument('--model', default='.cache/models/tiny', help='tiny model dir (made by the main job)')
    ap.add_argument('--samples', required=True, help="a run's teacher-samples.json (ids, mask per conversation)")
    ap.add_argument('--rounds', type=int, default=20, help='timed steps per variant')


def read_teacher(a: argparse.Namespace) -> List[Dict[str, Any]]:
    """The conversations of `--samples`, after printing the machine and their sizes."""
    samples = json.loads(Path(a.samples).read_text())
    tokens = statistics.mean(len(s['ids']) for s in samples)
    trained = statistics.mean(sum(s['mask']) for s in samples)
    print(f'CPU: {cpu_model()}; load average {load()}; {len(samples)} conversations, mean {tokens:.0f} tokens, '
          f'{trained:.0f} trained; {a.rounds} steps per variant, batch 1')
    return samples
