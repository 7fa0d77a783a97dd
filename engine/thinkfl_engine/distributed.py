"""Ranks of a multi-process engine started by a launcher (torchrun sets RANK and WORLD_SIZE)."""
import os
from dataclasses import dataclass
from typing import Any, Optional

import torch
import torch.distributed as dist


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
        """None for a single process; else joins the process group (DeepSpeed's backend: NCCL on GPUs, gloo on CPU)."""
        world = int(os.environ.get('WORLD_SIZE', '1'))
        if world <= 1:
            return None
        import deepspeed
        deepspeed.init_distributed()
        # Requests are Python objects: a gloo group carries them whatever the training backend is.
        return Ranks(dist.get_rank(), world, dist.new_group(backend='gloo'))

    def share(self, value: Optional[str]) -> Optional[str]:
        """Rank 0's value on every rank."""
        box = [value]
        dist.broadcast_object_list(box, src=0, group=self.group)
        return box[0]


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
