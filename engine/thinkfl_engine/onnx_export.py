"""ONNX export of the tiny model with the Hugging Face optimum KV-cache signature.

Inputs: input_ids [B,T], attention_mask [B,P+T], position_ids [B,T] (int64) and
past_key_values.{i}.key/value [B,kv_heads,P,head_dim] (float32); outputs: logits [B,T,V] and
present.{i}.key/value [B,kv_heads,P+T,head_dim]. B, T and P are dynamic; P may be 0.
"""
from pathlib import Path
import onnx
import torch
from torch import nn

from .tiny_model import TinyCausalLM

OPSET = 14


class _WithCache(nn.Module):
    def __init__(self, model: TinyCausalLM):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, position_ids, *flat_past):
        past = [(flat_past[2 * i], flat_past[2 * i + 1]) for i in range(len(flat_past) // 2)]
        logits, presents = self.model(input_ids, attention_mask, position_ids, past)
        return (logits.float(), *[t.float() for kv in presents for t in kv])


def export_onnx(model: TinyCausalLM, out_file: Path) -> Path:
    """Writes out_file atomically (readers never see a partial model) and checks it with onnx.checker."""
    c = model.config
    cpu = TinyCausalLM(c)
    cpu.load_state_dict({k: v.detach().to('cpu', torch.float32) for k, v in model.state_dict().items()})
    cpu.eval()
    layers = c.num_hidden_layers
    b, t, p = 2, 3, 4
    past = [torch.zeros(b, c.num_key_value_heads, p, c.head_dim) for _ in range(2 * layers)]
    ids = torch.zeros(b, t, dtype=torch.long)
    am = torch.ones(b, p + t, dtype=torch.long)
    pos = (torch.arange(t) + p).unsqueeze(0).expand(b, t).contiguous()
    past_names = [f'past_key_values.{i}.{kind}' for i in range(layers) for kind in ('key', 'value')]
    present_names = [f'present.{i}.{kind}' for i in range(layers) for kind in ('key', 'value')]
    axes = {'input_ids': {0: 'batch_size', 1: 'sequence_length'},
            'attention_mask': {0: 'batch_size', 1: 'total_sequence_length'},
            'position_ids': {0: 'batch_size', 1: 'sequence_length'},
            'logits': {0: 'batch_size', 1: 'sequence_length'}}
    axes.update({n: {0: 'batch_size', 2: 'past_sequence_length'} for n in past_names})
    axes.update({n: {0: 'batch_size', 2: 'total_sequence_length'} for n in present_names})
    out_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_file.with_name(out_file.name + '.tmp')
    with torch.no_grad():
        torch.onnx.export(_WithCache(cpu), (ids, am, pos, *past), str(tmp), opset_version=OPSET,
                          input_names=['input_ids', 'attention_mask', 'position_ids', *past_names],
                          output_names=['logits', *present_names], dynamic_axes=axes, do_constant_folding=True)
    onnx.checker.check_model(onnx.load(str(tmp)))
    tmp.replace(out_file)
    return out_file

