"""ONNX export of a causal LM in transformers' layout, with the KV-cache signature of ONNX Runtime / Optimum.

Inputs: input_ids [B,T], attention_mask [B,P+T], position_ids [B,T] (int64) and
past_key_values.{i}.key/value [B,kv_heads,P,head_dim] (float32); outputs: logits [B,T,V] and
present.{i}.key/value [B,kv_heads,P+T,head_dim]. B, T and P are dynamic; P may be 0.
The exported graph is a float32, eager-attention copy of the saved model dir (for LoRA: the
merged model), so any architecture transformers loads (Llama, Qwen2, ...) exports the same way.
"""

import warnings
from pathlib import Path

import onnx
import torch
from torch import nn
from transformers import AutoModelForCausalLM, DynamicCache, PreTrainedModel

OPSET = 17
# The export wrappers hold the model as `.model`: the traced graphs name its weights with this prefix.
WRAPPED = 'model.'


class _WithCache(nn.Module):
    def __init__(self, model: PreTrainedModel):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, position_ids, *flat_past):
        layers = len(flat_past) // 2
        cache = DynamicCache(
            [(flat_past[2 * i], flat_past[2 * i + 1]) for i in range(layers)], config=self.model.config
        )
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=cache,
            use_cache=True,
        )
        presents = [t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)]
        return (out.logits.float(), *presents)


def head_dim(config) -> int:
    return getattr(config, 'head_dim', None) or config.hidden_size // config.num_attention_heads


def load_for_export(model_dir: Path) -> PreTrainedModel:
    """The model saved in model_dir as the exports trace it: float32, eager attention, eval mode."""
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32, attn_implementation='eager')
    return model.eval()


def export_onnx(model: PreTrainedModel, out_file: Path) -> Path:
    """Traces a model from load_for_export into out_file (onnx_weights.PolicyGraphs writes policies from it)."""
    c = model.config
    layers, kv_heads = c.num_hidden_layers, getattr(c, 'num_key_value_heads', c.num_attention_heads)
    b, t, p = 2, 3, 4
    past = [torch.zeros(b, kv_heads, p, head_dim(c)) for _ in range(2 * layers)]
    ids = torch.zeros(b, t, dtype=torch.long)
    am = torch.ones(b, p + t, dtype=torch.long)
    pos = (torch.arange(t) + p).unsqueeze(0).expand(b, t).contiguous()
    past_names = [f'past_key_values.{i}.{kind}' for i in range(layers) for kind in ('key', 'value')]
    present_names = [f'present.{i}.{kind}' for i in range(layers) for kind in ('key', 'value')]
    axes = {
        'input_ids': {0: 'batch_size', 1: 'sequence_length'},
        'attention_mask': {0: 'batch_size', 1: 'total_sequence_length'},
        'position_ids': {0: 'batch_size', 1: 'sequence_length'},
        'logits': {0: 'batch_size', 1: 'sequence_length'},
    }
    axes.update({n: {0: 'batch_size', 2: 'past_sequence_length'} for n in past_names})
    axes.update({n: {0: 'batch_size', 2: 'total_sequence_length'} for n in present_names})
    # The tracer warns about Python branches on shapes (cache emptiness, mask padding); the traced
    # branches are the general ones, which also hold for an empty past (P = 0).
    return trace_to_onnx(
        _WithCache(model),
        (ids, am, pos, *past),
        out_file,
        ['input_ids', 'attention_mask', 'position_ids', *past_names],
        ['logits', *present_names],
        axes,
    )


def trace_to_onnx(
    module: nn.Module, args: tuple, out_file: Path, input_names: list, output_names: list, axes: dict
) -> Path:
    """Traces module on args into out_file (written atomically, checked with onnx.checker), tracer warnings off.

    Constant folding stores a Linear weight transposed, under a generated name (onnxruntime would
    otherwise transpose every weight each time it loads the graph); onnx_weights maps it back.
    """
    out_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_file.with_name(out_file.name + '.tmp')
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter('ignore')
        torch.onnx.export(
            module,
            args,
            str(tmp),
            opset_version=OPSET,
            dynamo=False,
            input_names=input_names,
            output_names=output_names,
            dynamic_axes=axes,
            do_constant_folding=True,
        )
    # By path: a graph whose weights pass 2 GB (e.g. Qwen2.5-0.5B in float32) has them in external
    # files, and loaded into one proto it could not be serialized for the in-memory check.
    onnx.checker.check_model(str(tmp))
    tmp.replace(out_file)
    return out_file
