/**
 * The engine's log-probabilities at a loss mask's positions run the decoder's last layer at those
 * positions only (thinkfl_engine/decoder.py). Checked against transformers' own causal-LM forward
 * (its full decoder and full-vocabulary logits, log-softmax at each row's temperature): the values and
 * the gradients of a weighted sum of them, for a Llama with grouped-query attention, a Qwen2 with
 * attention biases, a LoRA-wrapped Llama, and a Qwen2 with sliding-window attention (which takes the
 * decoder's own forward); on a right-padded ragged batch where one row has no position to score.
 * A hook on the last layer's MLP counts the rows it ran on.
 */
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { ENGINE_DIR, ENGINE_PYTHON } from '../src/engine';

const SCRIPT = `
import json, torch, transformers
from thinkfl_engine.lora import LoraSettings, wrap
from thinkfl_engine.logprobs import model_logprobs
from thinkfl_engine.decoder import selective
from thinkfl_engine.tiny_model import create_tiny_model

transformers.utils.logging.set_verbosity_error()
SIZES = dict(vocab_size=48, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
             head_dim=8, intermediate_size=64)
CASES = {
    'llama': dict(architecture='llama'),
    'qwen2': dict(architecture='qwen2'),
    'llama-lora': dict(architecture='llama'),
    'qwen2-sliding': dict(architecture='qwen2', use_sliding_window=True, sliding_window=4, max_window_layers=0),
}
g = torch.Generator().manual_seed(0)
lengths = [23, 17, 30]
ids = torch.zeros(3, 30, dtype=torch.long)
am = torch.zeros(3, 30, dtype=torch.long)
needed = torch.zeros(3, 30, dtype=torch.bool)
for b, n in enumerate(lengths):
    ids[b, :n] = torch.randint(1, 48, (n,), generator=g)
    am[b, :n] = 1
needed[0, 8:14] = True; needed[0, 18:23] = True; needed[2, 25:30] = True  # row 1 has none
temps = [1.0, 0.7, 1.3]
weights = torch.randn(3, 30, generator=g)
out = {}
for name, extra in CASES.items():
    model = create_tiny_model({**SIZES, **extra}, seed=1)
    model.config._attn_implementation = 'sdpa'
    if name.endswith('lora'):
        model = wrap(model, LoraSettings(r=4, alpha=8.0))
        for n_, p in model.named_parameters():
            if 'lora_B' in n_:
                torch.nn.init.normal_(p, std=0.05, generator=g)
    model.train()
    params = [(n_, p) for n_, p in model.named_parameters() if p.requires_grad]
    decoder = model.get_decoder()
    rows = []
    hook = decoder.layers[-1].mlp.register_forward_hook(lambda m, i, o: rows.append(i[0].reshape(-1, i[0].shape[-1]).shape[0]))

    def grads(lp, mask):
        for _, p in params:
            p.grad = None
        (lp * mask * weights).sum().backward()
        return {n_: p.grad.clone() for n_, p in params}

    # The reference: transformers' forward, full-vocabulary logits at every position.
    logits = model(input_ids=ids, attention_mask=am).logits.float()
    logp = torch.log_softmax(logits / torch.tensor(temps)[:, None, None], dim=-1)
    ref = torch.zeros(3, 30)
    ref[:, 1:] = logp[:, :-1].gather(-1, ids[:, 1:, None])[..., 0]
    ref_grads = grads(ref, needed.float())
    rows.clear()
    lp = model_logprobs(model, ids, am, temps, chunk=7, needed=needed)
    mine_grads = grads(lp, needed.float())
    scale = max(float(v.abs().max()) for v in ref_grads.values())
    out[name] = {
        'selective': selective(decoder),
        'mlp_rows': sum(rows),
        'needed': int(needed.sum()),
        'lp_diff': float(((lp - ref) * needed).abs().max()),
        'outside_nonzero': int((lp[~needed] != 0).sum()),
        'grad_diff': max(float((mine_grads[k] - ref_grads[k]).abs().max()) for k in ref_grads) / scale,
        'grad_scale': scale,
        'adapters_only': all('lora_' in n_ for n_, _ in params),
    }
    hook.remove()
print(json.dumps(out))
`;

type Result = {
  selective: boolean;
  mlp_rows: number;
  needed: number;
  lp_diff: number;
  outside_nonzero: number;
  grad_diff: number;
  grad_scale: number;
  adapters_only: boolean;
};

describe("the decoder's last layer at the loss mask's positions", () => {
  const results = (): Record<string, Result> => {
    const out = execFileSync(ENGINE_PYTHON, ['-c', SCRIPT], { env: { ...process.env, PYTHONPATH: ENGINE_DIR }, encoding: 'utf8' });
    return JSON.parse(out.trim().split('\n').at(-1)!);
  };

  it("matches transformers' full forward in values and gradients, running the last MLP on the scored positions only", () => {
    const r = results();
    for (const name of ['llama', 'qwen2', 'llama-lora']) {
      expect(r[name].selective, name).toBe(true);
      expect(r[name].mlp_rows, name).toBe(r[name].needed);
    }
    // Sliding-window attention is not reproduced: the decoder's own forward runs every position (3 x 30).
    expect(r['qwen2-sliding'].selective).toBe(false);
    expect(r['qwen2-sliding'].mlp_rows).toBe(90);
    expect(r['llama-lora'].adapters_only).toBe(true);
    expect(r.llama.adapters_only).toBe(false);
    for (const [name, x] of Object.entries(r)) {
      expect(x.needed, name).toBe(16);
      expect(x.outside_nonzero, name).toBe(0);
      expect(x.lp_diff, name).toBeLessThan(2e-5);
      expect(x.grad_scale, name).toBeGreaterThan(1e-3);
      expect(x.grad_diff, name).toBeLessThan(1e-4);
    }
  }, 120_000);
});
