"""Model directories: create/load/save the tiny model, or hand a transformers model dir to hf_backend.

A model dir has the Hugging Face layout: config.json, weights, tokenizer files, optionally
onnx/model.onnx. Files the engine does not produce (tokenizer, chat template) are carried
along on save so every checkpoint is a complete model dir.
"""
import json
import shutil
from pathlib import Path
from typing import Any, Callable, Dict

import torch
from torch import nn

from .tiny_model import MODEL_TYPE, TinyCausalLM, TinyConfig, init_weights

WEIGHTS = 'pytorch_model.bin'
ENGINE_FILES = {'config.json', WEIGHTS, 'optimizer.pt', 'model.safetensors'}
DTYPES = {'float32': torch.float32, 'float64': torch.float64, 'bfloat16': torch.bfloat16, 'float16': torch.float16}


def parse_dtype(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise ValueError(f'dtype must be one of {sorted(DTYPES)}, got {name!r}')
    return DTYPES[name]


def read_config(model_dir: Path) -> Dict[str, Any]:
    path = model_dir / 'config.json'
    if not path.is_file():
        raise FileNotFoundError(f'{path}: no config.json in the model dir')
    return json.loads(path.read_text())


class PolicyModel:
    """A loaded model: its nn.Module, how to get logits, and how to write it back as a model dir."""

    def __init__(self, module: nn.Module, logits: Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor],
                 save: Callable[[nn.Module, Path], None], source: Path, kind: str):
        self.module, self.logits, self._save, self.source, self.kind = module, logits, save, source, kind

    def save(self, out_dir: Path) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        for f in self.source.iterdir():
            if f.is_file() and f.name not in ENGINE_FILES and f.resolve() != (out_dir / f.name).resolve():
                shutil.copy2(f, out_dir / f.name)
        self._save(self.module, out_dir)


def create_tiny(out_dir: Path, config: TinyConfig, seed: int) -> int:
    """Writes config.json and random-init weights; returns the parameter count."""
    model = TinyCausalLM(config)
    init_weights(model, seed)
    save_tiny(model, out_dir)
    return sum(p.numel() for p in model.parameters())


def save_tiny(module: nn.Module, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / 'config.json').write_text(json.dumps(module.config.to_json(), indent=2) + '\n')
    state = {k: v.detach().to('cpu', torch.float32) for k, v in module.state_dict().items()}
    tmp = out_dir / (WEIGHTS + '.tmp')
    torch.save(state, tmp)
    tmp.replace(out_dir / WEIGHTS)


def load_model(model_dir: Path, device: torch.device, dtype: torch.dtype) -> PolicyModel:
    config = read_config(model_dir)
    if config.get('model_type') == MODEL_TYPE:
        module = TinyCausalLM(TinyConfig.from_json(config))
        module.load_state_dict(torch.load(model_dir / WEIGHTS, map_location='cpu'))
        module.to(device=device, dtype=dtype)
        return PolicyModel(module, lambda m, ids, am: m(ids, am)[0], save_tiny, model_dir, 'tiny')
    from .hf_backend import load_hf
    return load_hf(model_dir, device, dtype)
