"""TRL's GRPOTrainer, one optimizer step per line read on stdin (run by grpo.ts in .cache/venv-peers).

argv[1]: JSON settings (model_dir, messages, group_size, max_new_tokens, temperature, lr, beta, eps_low,
eps_high, lora (null or {r, alpha, dropout, target_modules}), gradient_checkpointing, precision, threads, seed, steps,
loss_type).
Each step waits for a line 'go' on stdin, then prints one JSON line on stdout:
{step_s, generation_s, tokens, prompt_tokens}. Generation is the time inside GRPOTrainer._generate
(prompt tokenization, transformers' generate, decoding); the rest of the step (rewards, advantages,
reference log-probabilities, forward, backward, optimizer) is the update.
"""
import json
import os
import sys
import tempfile
import time

settings = json.loads(sys.argv[1])
os.environ.setdefault('TOKENIZERS_PARALLELISM', 'false')

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import TrainerCallback  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

torch.set_num_threads(int(settings['threads']))
out = os.fdopen(os.dup(1), 'w', buffering=1)
os.dup2(2, 1)  # TRL and transformers print to stdout: only our JSON lines go to the real one


def reward(completions, completion_ids, **_):
    """The bench's reward, the same in grpo.ts: the share of distinct token ids of a completion."""
    return [len(set(ids)) / max(len(ids), 1) for ids in completion_ids]


class Pace(TrainerCallback):
    """Blocks before each step until the driver says go, and reports the step's timings after it."""

    def __init__(self):
        self.t0 = 0.0
        self.gen = 0.0
        self.tokens = 0
        self.prompt_tokens = 0

    def on_step_begin(self, args, state, control, **kw):
        line = sys.stdin.readline()
        if line.strip() != 'go':
            sys.exit(0)
        self.gen, self.tokens = 0.0, 0
        self.t0 = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):
        step = time.perf_counter() - self.t0
        out.write(json.dumps({'step_s': step, 'generation_s': self.gen, 'tokens': self.tokens,
                              'prompt_tokens': self.prompt_tokens}) + '\n')


pace = Pace()
lora = settings.get('lora')
peft_config = None
if lora:
    from peft import LoraConfig
    peft_config = LoraConfig(r=lora['r'], lora_alpha=lora['alpha'], lora_dropout=lora['dropout'],
                             target_modules=lora['target_modules'], task_type='CAUSAL_LM')

config = GRPOConfig(
    output_dir=tempfile.mkdtemp(prefix='trl-grpo-'),
    use_cpu=True,
    bf16=settings['precision'] == 'bfloat16',
    # TRL turns it on by default; the engine's side says whether it recomputes activations.
    gradient_checkpointing=settings['gradient_checkpointing'],
    per_device_train_batch_size=settings['group_size'],
    num_generations=settings['group_size'],
    gradient_accumulation_steps=1,
    steps_per_generation=1,
    num_iterations=1,
    max_completion_length=settings['max_new_tokens'],
    temperature=settings['temperature'],
    top_p=1.0,
    top_k=0,
    beta=settings['beta'],
    epsilon=settings['eps_low'],
    epsilon_high=settings['eps_high'],
    loss_type=settings['loss_type'],
    scale_rewards='group',
    learning_rate=settings['lr'],
    lr_scheduler_type='constant',
    warmup_steps=0,
    weight_decay=0.0,
    max_grad_norm=1.0,
    optim='adamw_torch_fused',  # torch's fused AdamW kernel, as the engine's (optim.can_fuse)
    max_steps=settings['steps'],
    logging_steps=1,
    save_strategy='no',
    report_to=[],
    disable_tqdm=True,
    seed=settings['seed'],
    dataloader_num_workers=0,
    model_init_kwargs={'dtype': torch.float32},
)
dataset = Dataset.from_list([{'prompt': settings['messages']}] * (settings['steps'] * settings['group_size']))
trainer = GRPOTrainer(model=settings['model_dir'], reward_funcs=reward, args=config, train_dataset=dataset,
                      peft_config=peft_config)
generate = trainer._generate


def timed_generate(prompts):
    t0 = time.perf_counter()
    result = generate(prompts)
    pace.gen += time.perf_counter() - t0
    prompt_ids, completion_ids = result[0], result[1]
    pace.tokens += sum(len(c) for c in completion_ids)
    pace.prompt_tokens = len(prompt_ids[0])
    return result


trainer._generate = timed_generate
trainer.add_callback(pace)
out.write(json.dumps({'ready': True, 'parameters': sum(p.numel() for p in trainer.model.parameters()),
                      'trainable': sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)}) + '\n')
trainer.train()
