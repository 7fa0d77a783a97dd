/** queue, workers, checkpoints, logging: how the run executes and what it keeps. */
import { z } from 'zod';

export const QueueSection = z
  .strictObject({
    redis_url: z
      .url({ protocol: /^rediss?$/, error: 'expected a redis:// or rediss:// URL' })
      .nullable()
      .default(null)
      .describe(
        'Redis holding the rollout and train queues (BullMQ), e.g. redis://10.0.0.5:6379. null: trainer-ctl starts ' +
          'its own redis-server on a free loopback port with data in <run dir>/redis (append-only file on, so the run ' +
          'can be resumed) and stops it at the end. --redis on the command line, then THINKFL_REDIS_URL, override it. Keep the ' +
          'password out of it: REDIS_PASSWORD supplies it (for the default user or the ACL user the URL names); a URL is ' +
          'shown and recorded as redis://:***@host:port. Default null.',
      ),
    prefix: z
      .string()
      .regex(/^[A-Za-z0-9._-]+$/)
      .default('thinkfl')
      .describe("Key prefix of the queues; a run's queues are <prefix>:<run.name>:<queue>. Default thinkfl."),
    redis_server: z.string().default('redis-server').describe('Executable of the embedded Redis. Default redis-server (from PATH).'),
    ready_timeout_s: z
      .number()
      .positive()
      .default(10)
      .describe('Wait at most this long for the embedded Redis to start, seconds. Default 10.'),
  })
  .prefault({})
  .describe('The job transport.');

export const WorkersSection = z
  .strictObject({
    rollout: z
      .strictObject({
        count: z
          .number()
          .int()
          .min(0)
          .default(1)
          .describe('Rollout workers trainer-ctl starts itself (0: only external ones join). Default 1.'),
        concurrency: z
          .number()
          .int()
          .positive()
          .default(1)
          .describe(
            'Episodes one rollout worker plays at once; on the onnx backend their turns decode as one batch (up to its max_batch rows). Default 1.',
          ),
        job_timeout_s: z
          .number()
          .positive()
          .default(600)
          .describe('An episode job failing to finish in this time is retried, seconds. Default 600.'),
      })
      .prefault({})
      .describe('Rollout workers: queue consumers that play episodes with the generation backend.'),
    train: z
      .strictObject({
        python: z
          .string()
          .optional()
          .describe('Python interpreter of the train engine. Default: the venv scripts/setup.sh builds (.cache/venv/bin/python).'),
        device: z.enum(['cpu', 'cuda']).default('cpu').describe('Where the engine trains. Default cpu.'),
        deepspeed_config: z.string().optional().describe('DeepSpeed JSON config (ZeRO stage 2 or 3). Default none.'),
        ranks: z
          .number()
          .int()
          .positive()
          .default(1)
          .describe(
            "Engine processes, started by torchrun on this machine: each trains its share of every update's micro-batches " +
              '(balanced by tokens) and their gradients are averaged, so an update is the same as one process makes over ' +
              'the whole batch; DeepSpeed ZeRO partitions optimizer state (stage 3: weights too) across them. An engine ' +
              'with a deepspeed_config goes through torchrun at 1 rank too. Default 1.',
          ),
        nodes: z
          .number()
          .int()
          .positive()
          .default(1)
          .describe(
            'Train nodes forming one engine world of nodes x ranks processes (one DeepSpeed world, driven through global ' +
              "rank 0 on node 0). Every node runs `trainer-ctl worker train --node-rank K`; node 0's worker takes the " +
              "train jobs, the others start their node's ranks and start them again when the engine restarts. Default 1.",
          ),
        node_rank: z
          .number()
          .int()
          .min(0)
          .default(0)
          .describe(
            "This node's index among workers.train.nodes (0 drives the engine); `trainer-ctl worker train --node-rank` overrides it. Default 0.",
          ),
        rendezvous: z
          .string()
          .regex(/^[^\s:/]+:\d{1,5}$/, { error: 'expected host:port, e.g. trainer-0.trainer:29500' })
          .nullable()
          .default(null)
          .describe(
            "host:port where node 0's torchrun agent serves the rendezvous (a c10d TCPStore) of a multi-node engine; every " +
              "node must reach it, and the ranks must reach each other. Node ranks are fixed (torchrun's static " +
              'rendezvous): global rank 0, which speaks to the train worker, is always on node 0. Required when nodes > 1. Default null.',
          ),
        rendezvous_timeout_s: z
          .number()
          .positive()
          .default(600)
          .describe('How long a multi-node engine waits for all its nodes to join, seconds. Default 600.'),
        job_timeout_s: z
          .number()
          .positive()
          .default(3600)
          .describe(
            'The controller gives up on a train job (one update, its export and checkpoint) not done in this time, seconds. Default 3600.',
          ),
        autocast: z
          .enum(['auto', 'float32', 'bfloat16', 'float16'])
          .nullable()
          .default(null)
          .describe(
            "Compute precision of the engine's forward and backward (torch.autocast), overriding model.dtype; " +
              'parameters and optimizer state stay float32 either way. auto on CPU: the engine times a few training ' +
              'passes of the loaded model in float32 and in bfloat16 and takes the faster (CPU flags do not tell: ' +
              'with avx512_bf16 but no AMX a tiny-model SFT step ran 0.68x as fast in bfloat16, issue 29; emulated ' +
              'on an AVX2 EPYC ~17x slower, issue 8), kept in autocast_cache per CPU model, flags, torch version ' +
              'and model shape; the engine logs both times and its choice. auto on CUDA: bfloat16 where supported. ' +
              'float16 is for CUDA only. ' +
              'Default null (model.dtype).',
          ),
        autocast_cache: z
          .string()
          .default('.cache/autocast')
          .describe(
            'Directory where autocast auto keeps its measurements, one file per CPU model, flags, torch version, ' +
              'kernel-choosing environment (ONEDNN_MAX_CPU_ISA, ATEN_CPU_CAPABILITY, ...), model shape and thread count, so that every (re)start on that machine takes the same choice without ' +
              'timing again; delete a file to measure again. Relative to run.base_dir. Default .cache/autocast.',
          ),
        onnx_graph_cache: z
          .string()
          .nullable()
          .default('.cache/onnx-graphs')
          .describe(
            "Directory where the onnx backend's policy export keeps its traced graphs, one entry per model layout, " +
              'library versions and tracing code, so that a new, resumed or restarted engine writes the weights into ' +
              'them instead of tracing again (a first export took 0.76 s traced against 0.05 s cached for the tiny ' +
              'model, 117 s against 4.7 s for a Qwen2.5-0.5B-shaped one on an AMD EPYC; scripts/bench/onnx-graph-cache.py). ' +
              'An entry that does not read or fit is traced again with a ' +
              'warning; delete the directory to trace anew. null: trace in every engine. Relative to run.base_dir. ' +
              'Default .cache/onnx-graphs.',
          ),
        threads: z
          .number()
          .int()
          .positive()
          .nullable()
          .default(null)
          .describe('torch threads of the engine. Default null: every core the engine process may run on (its CPU affinity).'),
        micro_batch_size: z
          .number()
          .int()
          .positive()
          .default(1)
          .describe('Episodes per forward/backward pass; gradients accumulate to the whole batch. Default 1.'),
        micro_batch_tokens: z
          .number()
          .int()
          .positive()
          .nullable()
          .default(null)
          .describe(
            'Padded tokens per forward/backward pass (episodes x the longest of them); a longer episode gets a pass of ' +
              'its own. Bounds activation memory when episode lengths vary. Default null: micro_batch_size alone.',
          ),
        gradient_checkpointing: z
          .boolean()
          .default(true)
          .describe(
            "Recompute each decoder block's activations in backward instead of keeping them: far less memory for long " +
              'episodes, about 30% more compute. Worth turning off only for models whose activations are small (the tiny CPU model). Default true.',
          ),
        engine_restarts: z
          .number()
          .int()
          .min(0)
          .default(2)
          .describe(
            'Times the train worker starts a dead engine (OOM kill, crash) again from the latest checkpoint and retries ' +
              'the job it was running, per job; beyond that the job fails and the run stops (--resume runs it again). Default 2.',
          ),
      })
      .prefault({})
      .describe('The train worker and its engine (a Python process driven over stdio).'),
    max_staleness: z
      .number()
      .int()
      .min(0)
      .default(0)
      .describe('Policy versions a rollout may lag behind the trainer (0: strictly on-policy). Default 0.'),
    sync_timeout_s: z.number().positive().default(300).describe('Hard limit of one weight sync to the rollout side, seconds. Default 300.'),
  })
  .prefault({})
  .describe('Rollout and train workers.');

export const CheckpointsSection = z
  .strictObject({
    every_steps: z
      .number()
      .int()
      .positive()
      .default(10)
      .describe('Save a checkpoint every this many GRPO steps (and at each stage end). Default 10.'),
    keep_last: z
      .number()
      .int()
      .positive()
      .default(3)
      .describe('Checkpoints kept; older ones are deleted (stage-end ones are kept). Default 3.'),
    resume: z
      .enum(['auto', 'never', 'require'])
      .default('auto')
      .describe(
        "auto: continue from the run directory's latest checkpoint if any; never: refuse a run directory that has one; require: fail without one. Default auto.",
      ),
  })
  .prefault({})
  .describe('Checkpoints and resume.');

export const LoggingSection = z
  .strictObject({
    level: z.enum(['debug', 'info', 'warn', 'error']).default('info').describe('Least severe log level printed. Default info.'),
    metrics_every_steps: z
      .number()
      .int()
      .positive()
      .default(1)
      .describe('Write step metrics to <run dir>/metrics.jsonl every this many steps. Default 1.'),
    episodes_per_step: z
      .number()
      .int()
      .min(0)
      .default(1)
      .describe('Full episodes per step written to <run dir>/episodes.jsonl for inspection. Default 1.'),
    track: z
      .strictObject({
        cases: z
          .number()
          .int()
          .min(0)
          .default(0)
          .describe(
            'Training cases played greedily to follow learning during the run: a fixed set, spread over the training ' +
              'faults, the same at every point. Each point is a metrics.jsonl line (kind track) with format validity and ' +
              'Recall@k/MRR per request and per fault, TensorBoard scalars track/<figure>, and a curve in the run report. ' +
              '0: off. Default 0.',
          ),
        every_updates: z
          .number()
          .int()
          .positive()
          .default(10)
          .describe('Play them before the first update and after every this many updates (SFT and GRPO updates alike). Default 10.'),
      })
      .prefault({})
      .describe('Learning tracked during the run on training cases (held-out cases are evaluated at stage ends only).'),
  })
  .prefault({})
  .describe('What the run records.');

export const ResourcesSection = z
  .strictObject({
    gpus: z.number().int().positive().describe('GPUs the run may use on its node. Required.'),
    gpu_memory_gib: z.number().positive().describe('Memory of each of those GPUs, GiB (an H100 SXM: 80). Required.'),
    vllm_gpu_memory_utilization: z
      .number()
      .gt(0)
      .lt(1)
      .default(0.9)
      .describe(
        "Fraction of one GPU's memory a vLLM replica takes (its --gpu-memory-utilization; weights, adapters and KV " +
          "cache live in it). Default 0.9 (vLLM's).",
      ),
    colocate: z
      .boolean()
      .default(false)
      .describe(
        "vLLM replicas share the train ranks' GPUs (docker/compose.yaml puts both on GPU 0): each train rank then " +
          'has the rest, (1 - vllm_gpu_memory_utilization) of its GPU, and the run needs max(ranks, replicas) GPUs ' +
          'instead of ranks + replicas. Default false.',
      ),
  })
  .describe(
    'The GPUs a run declares. `trainer-ctl config validate` prints the memory estimate of a train rank and of a ' +
      'vLLM replica against them (packages/trainer-ctl/src/config/memory.ts) and fails when they cannot fit. ' +
      'One replica per GPU. Default none: no estimate (CPU runs).',
  );
