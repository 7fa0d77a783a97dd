"""GPU path: a backbone in a transformers model dir (Llama, Qwen, ...) loaded with AutoModelForCausalLM.

Imported only when a model dir is not the tiny model, so CPU runs never need transformers.
"""
from pathlib import Path

import torch

from .models import PolicyModel


def load_hf(model_dir: Path, device: torch.device, dtype: torch.dtype) -> PolicyModel:
    try:
        from transformers import AutoModelForCausalLM
    except ImportError as e:
        raise RuntimeError(f'{model_dir} is not a thinkfl-tiny model and transformers is not importable: {e}') from e
    module = AutoModelForCausalLM.from_pretrained(str(model_dir), torch_dtype=dtype)
    module.to(device)
    if hasattr(module, 'gradient_checkpointing_enable') and device.type == 'cuda':
        # Long multi-turn episodes: trade recompute for activation memory on accelerators.
        module.gradient_checkpointing_enable()
    module.config.use_cache = False

    def logits(m: torch.nn.Module, ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return m(input_ids=ids, attention_mask=attention_mask).logits

    def save(m: torch.nn.Module, out_dir: Path) -> None:
        m.save_pretrained(str(out_dir), safe_serialization=True)

    return PolicyModel(module, logits, save, model_dir, 'hf')
