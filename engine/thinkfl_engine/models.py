"""Model directories in the Hugging Face layout, loaded with transformers (AutoModelForCausalLM).

A model dir holds config.json, generation_config.json, model.safetensors (or shards with their
index) and the tokenizer files; optionally onnx/model.onnx. Files the engine does not write
(tokenizer, chat template) are carried along on save, so every checkpoint is a complete model
dir; weight files of an earlier save are removed first, so no stale shard or index remains.
Those files are read once, when the model is loaded, and written from memory: the dir a policy
was loaded from may be a checkpoint that retention deletes while the engine lives on.
"""

import copy
import logging
from pathlib import Path
from typing import Any, Dict, Optional

import torch
from peft import PeftModel
from torch import nn
from transformers import AutoModelForCausalLM, GenerationConfig, PreTrainedModel

from .lora import ADAPTER_CONFIG, LoraSettings, adapter_base, load_adapter, wrap
from .tiny_model import create_tiny_model

log = logging.getLogger('thinkfl_engine')

# Where a LoRA export keeps the merged model beside the adapter: vLLM loads the adapter dir itself
# (load_lora_adapter), the onnx backend and `trainer-ctl serve` the merged export in it.
MERGED_DIR = 'merged'
DTYPES = {'float32': torch.float32, 'float64': torch.float64, 'bfloat16': torch.bfloat16, 'float16': torch.float16}
# Written by save/export; anything else in a model dir (tokenizer files, chat template) is carried along.
ENGINE_FILES = (
    'config.json',
    'generation_config.json',
    'model*.safetensors',
    'model.safetensors.index.json',
    'pytorch_model*.bin',
    'pytorch_model.bin.index.json',
    'optimizer.pt',
    'adapter_config.json',
    'adapter_model.safetensors',
    '*.tmp',
)
# The control plane's own record in each checkpoint (how many updates it holds): not the model's.
RUN_FILES = ('trainer-state.json',)


def parse_dtype(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise ValueError(f'dtype must be one of {sorted(DTYPES)}, got {name!r}')
    return DTYPES[name]


def is_engine_file(path: Path) -> bool:
    return any(path.match(p) for p in ENGINE_FILES)


def attn_implementation(device: torch.device) -> str:
    """flash-attention-2 on CUDA when `import flash_attn` succeeds, PyTorch's sdpa otherwise; the choice is logged.

    An installed package is not enough: a flash_attn built against another torch (NGC's) fails to import.
    """
    if device.type != 'cuda':
        log.info('attention: sdpa (flash-attention is for CUDA; device %s)', device.type)
        return 'sdpa'
    try:
        import flash_attn  # noqa: F401
    except Exception as e:  # noqa: BLE001 - an ImportError or a broken native extension alike
        log.info(
            'attention: sdpa (flash_attn does not import: %s: %s)',
            type(e).__name__,
            str(e).splitlines()[0] if str(e) else '',
        )
        return 'sdpa'
    log.info('attention: flash_attention_2 (flash_attn %s)', getattr(flash_attn, '__version__', '?'))
    return 'flash_attention_2'


def create_tiny(out_dir: Path, config: Dict[str, Any], seed: int) -> int:
    """Writes a random-init tiny model dir (config, generation config, safetensors); returns the parameter count."""
    model = create_tiny_model(config, seed)
    model.generation_config = GenerationConfig(
        bos_token_id=model.config.bos_token_id,
        eos_token_id=model.config.eos_token_id,
        pad_token_id=model.config.pad_token_id,
    )
    save_weights(model, out_dir)
    return sum(p.numel() for p in model.parameters())


def clear_weights(out_dir: Path) -> None:
    for f in out_dir.iterdir():
        if f.is_file() and is_engine_file(f) and f.name != 'optimizer.pt':
            f.unlink()


def save_weights(model: PreTrainedModel, out_dir: Path, state: Optional[Dict[str, torch.Tensor]] = None) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    clear_weights(out_dir)
    model.save_pretrained(str(out_dir), state_dict=state, safe_serialization=True)


def read_side_files(source: Path) -> Dict[str, bytes]:
    """Tokenizer files and chat template: every plain file of the source dir that the engine does not write."""
    return {
        f.name: f.read_bytes()
        for f in sorted(source.iterdir())
        if f.is_file() and not is_engine_file(f) and f.name not in RUN_FILES
    }


def write_side_files(files: Dict[str, bytes], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (out_dir / name).write_bytes(data)


class PolicyModel:
    """A loaded causal LM: the module, its last hidden states and output head, saving."""

    def __init__(self, module: nn.Module, source: Path):
        self.module, self.source = module, source
        self.side_files = read_side_files(source)
        self.lora = isinstance(module, PeftModel)

    @property
    def kind(self) -> str:
        return self.module.config.model_type

    def hidden(self, module: nn.Module, ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """[B, T, H] final hidden states (after the last norm): the output head is applied in chunks."""
        return module.get_decoder()(input_ids=ids, attention_mask=attention_mask, use_cache=False).last_hidden_state

    def head(self, module: nn.Module) -> nn.Linear:
        return module.get_output_embeddings()

    def logits(self, module: nn.Module, ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return module(input_ids=ids, attention_mask=attention_mask, use_cache=False).logits

    def save(self, out_dir: Path, state: Optional[Dict[str, torch.Tensor]] = None) -> None:
        """The checkpoint: full weights (`state` when the module's own are partitioned), or for LoRA the adapter alone."""
        write_side_files(self.side_files, out_dir)
        save_weights(self.module, out_dir, state)

    def save_merged(self, out_dir: Path, state: Optional[Dict[str, torch.Tensor]] = None) -> Path:
        """A full model dir; returns it. For LoRA: the adapter in out_dir, W + (alpha/r) B A merged in a copy in merged/.

        The merged model gets its own dir: transformers (and vLLM) read a dir with adapter_config.json
        as an adapter, so one dir cannot be both.
        """
        if not self.lora:
            self.save(out_dir, state)
            return out_dir
        self.save(out_dir)
        merged = out_dir / MERGED_DIR
        write_side_files(self.side_files, merged)
        save_weights(copy.deepcopy(self.module).merge_and_unload(), merged)
        return merged


def load_model(
    model_dir: Path,
    device: torch.device,
    dtype: torch.dtype,
    lora: Optional[LoraSettings] = None,
    gradient_checkpointing: bool = True,
    attn: Optional[str] = None,
) -> PolicyModel:
    """A model dir, or a LoRA checkpoint (adapter_config.json, no config.json) on top of its base dir."""
    model_dir = model_dir.resolve()
    adapter = (model_dir / ADAPTER_CONFIG).is_file() and not (model_dir / 'config.json').is_file()
    base_dir = adapter_base(model_dir) if adapter else model_dir
    if not (base_dir / 'config.json').is_file():
        raise FileNotFoundError(f'{base_dir / "config.json"}: no config.json in the model dir')
    module = AutoModelForCausalLM.from_pretrained(
        str(base_dir), dtype=dtype, attn_implementation=attn or attn_implementation(device)
    )
    module.config.use_cache = False
    if gradient_checkpointing:
        # Long multi-turn episodes: recompute each block's activations in backward instead of keeping them.
        module.activation_checkpointing_enable(activation_checkpointing_kwargs={'use_reentrant': False})
        if adapter or lora is not None:
            # The frozen embeddings give no grad-requiring input to the first checkpointed block.
            module.enable_input_require_grads()
    if adapter:
        module = load_adapter(module, model_dir)
    elif lora is not None:
        module = wrap(module, lora)
    module.to(device)
    return PolicyModel(module, model_dir)
