"""Ranks of the engine and their process group, and how one update's micro-batches are shared among them.

The train worker starts the engine through torchrun whenever it trains under DeepSpeed or on
several ranks (a DeepSpeed config with one rank included), so RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT are set; the engine joins the group itself (torch's env:// rendezvous) and DeepSpeed
finds it initialised. DeepSpeed's own `init_distributed` would otherwise look for MPI when those
variables are missing and stop on `No module named 'mpi4py'`. An engine started without a
launcher that is given a DeepSpeed config gets a one-rank group on a free loopback port
(`single_rank_group`).
"""

import ctypes
import os
import signal
import socket
import sys
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Dict, List, Optional, Sequence

import torch
import torch.distributed as dist

LAUNCHER_ENV = ('RANK', 'WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT')
# A collective that waits this long is a rank that died or hangs: fail instead of waiting forever.
GROUP_TIMEOUT = timedelta(minutes=30)


def die_with_launcher() -> None:
    """A rank started by torchrun is killed when torchrun dies (Linux PR_SET_PDEATHSIG).

    The ranks inherit the launcher's stdio, so a launcher killed outright (SIGKILL, OOM) would
    leave rank 0 answering the train worker's requests on the same pipe: the worker would never
    see its engine die and would not restart it from the latest checkpoint.
    """
    if 'TORCHELASTIC_RUN_ID' not in os.environ or not sys.platform.startswith('linux'):
        return
    launcher = os.getppid()
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != launcher or launcher == 1:  # it died before the signal was armed
        os._exit(3)


@dataclass
class Ranks:
    rank: int
    world: int
    group: Any

    @property
    def main(self) -> bool:
        return self.rank == 0

    @staticmethod
    def from_env() -> Optional['Ranks']:
        """None without a launcher; else joins the launcher's process group (gloo for CPU tensors, NCCL for CUDA ones)."""
        if not all(k in os.environ for k in LAUNCHER_ENV):
            return None
        if not dist.is_initialized():
            # No backend named: torch sets up gloo for CPU tensors and, where CUDA is available, NCCL for CUDA ones.
            dist.init_process_group(init_method='env://', timeout=GROUP_TIMEOUT)
        # Requests are Python objects: a gloo group carries them whatever the training backend is.
        return Ranks(dist.get_rank(), dist.get_world_size(), dist.new_group(backend='gloo'))

    def share(self, value: Optional[str]) -> Optional[str]:
        """Rank 0's value on every rank."""
        if self.world == 1:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0, group=self.group)
        return box[0]

    def gather(self, value: Any) -> List[Any]:
        """Every rank's value, in rank order, on every rank."""
        if self.world == 1:
            return [value]
        out: List[Any] = [None] * self.world
        dist.all_gather_object(out, value, group=self.group)
        return out

    def sum(self, values: Dict[str, float]) -> Dict[str, float]:
        """Per-key sums over the ranks (a key missing on a rank counts 0 there)."""
        total: Dict[str, float] = {}
        for part in self.gather(values):
            for k, v in part.items():
                total[k] = total.get(k, 0.0) + v
        return total


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def single_rank_group() -> None:
    """A one-rank process group for DeepSpeed in an engine started without a launcher, set explicitly (no MPI discovery)."""
    if dist.is_initialized():
        return
    env = {
        'RANK': '0',
        'LOCAL_RANK': '0',
        'WORLD_SIZE': '1',
        'LOCAL_WORLD_SIZE': '1',
        'MASTER_ADDR': '127.0.0.1',
        'MASTER_PORT': str(free_port()),
    }
    for k, v in env.items():
        os.environ.setdefault(k, v)
    dist.init_process_group(init_method='env://', timeout=GROUP_TIMEOUT)


def rank_device(name: str) -> torch.device:
    """The device of this rank: a bare 'cuda' is the GPU torchrun assigns it (LOCAL_RANK), made current.

    Without this every rank would load its copy on GPU 0 before DeepSpeed moves it.
    """
    device = torch.device(name)
    if device.type == 'cuda' and device.index is None and 'LOCAL_RANK' in os.environ:
        device = torch.device('cuda', int(os.environ['LOCAL_RANK']))
        torch.cuda.set_device(device)
    return device


def is_main() -> bool:
    return not dist.is_initialized() or dist.get_rank() == 0


def share_of_rank(costs: Sequence[int], world: int, rank: int) -> List[Optional[int]]:
    """The micro-batches (indices into `costs`, their padded token counts) that `rank` runs, in batch order.

    Longest first, each to the rank with the fewest tokens so far (ties: the lower rank), so the
    ranks' token totals stay close. Every rank gets as many entries as the busiest one: None is
    a pass with no weight in the loss, so that each rank runs the same number of forwards and
    backwards (ZeRO gathers weights and reduces gradients in collectives that all ranks join).
    """
    loads = [0] * world
    owned: List[List[int]] = [[] for _ in range(world)]
    for i in sorted(range(len(costs)), key=lambda k: (-costs[k], k)):
        r = min(range(world), key=lambda k: (loads[k], k))
        loads[r] += costs[i]
        owned[r].append(i)
    most = max(len(o) for o in owned)
    mine = sorted(owned[rank])
    return [*mine, *[None] * (most - len(mine))]
