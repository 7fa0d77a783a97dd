"""LoRA adapters with PEFT: settings, wrapping a loaded model, loading an adapter checkpoint.

A LoRA checkpoint is PEFT's layout (adapter_config.json + adapter_model.safetensors) beside the
tokenizer files; adapter_config.json names the base model dir it was trained on.
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from peft import LoraConfig, PeftModel, get_peft_model
from transformers import PreTrainedModel

ADAPTER_CONFIG = 'adapter_config.json'
DEFAULT_TARGETS = ('q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj')


@dataclass(frozen=True)
class LoraSettings:
    r: int = 16
    alpha: float = 32.0
    dropout: float = 0.0
    target_modules: Tuple[str, ...] = DEFAULT_TARGETS

    @staticmethod
    def from_json(raw: Optional[Dict[str, Any]]) -> Optional['LoraSettings']:
        if raw is None:
            return None
        unknown = set(raw) - set(LoraSettings.__dataclass_fields__)
        if unknown:
            raise ValueError(f'lora settings: unknown keys {sorted(unknown)}')
        s = LoraSettings(
            **{**raw, **({'target_modules': tuple(raw['target_modules'])} if 'target_modules' in raw else {})}
        )
        if s.r <= 0 or not 0 <= s.dropout < 1 or not s.target_modules:
            raise ValueError(f'lora settings: need r > 0, 0 <= dropout < 1 and target modules, got {s}')
        if 'lm_head' in s.target_modules:
            # The output head is applied in chunks straight from its weight (logprobs.py).
            raise ValueError('lora.target_modules: lm_head cannot be adapted')
        return s


def wrap(model: PreTrainedModel, s: LoraSettings) -> PeftModel:
    """Adds fresh adapters (B = 0, so the wrapped model starts equal to the base); only they train."""
    config = LoraConfig(
        r=s.r, lora_alpha=s.alpha, lora_dropout=s.dropout, target_modules=list(s.target_modules), task_type='CAUSAL_LM'
    )
    return get_peft_model(model, config)


def adapter_base(adapter_dir: Path) -> Path:
    """The base model dir an adapter checkpoint was trained on (relative paths: from the adapter dir)."""
    raw = json.loads((adapter_dir / ADAPTER_CONFIG).read_text())
    base = raw.get('base_model_name_or_path')
    if not base:
        raise ValueError(f'{adapter_dir / ADAPTER_CONFIG}: base_model_name_or_path is not set')
    path = (adapter_dir / base).resolve()
    if not (path / 'config.json').is_file():
        raise FileNotFoundError(f'{adapter_dir / ADAPTER_CONFIG}: base model dir {path} has no config.json')
    return path


def load_adapter(base: PreTrainedModel, adapter_dir: Path) -> PeftModel:
    return PeftModel.from_pretrained(base, str(adapter_dir), is_trainable=True)
