/** The run config: one YAML file per run, validated by this schema; types are inferred from it. */
import { z } from 'zod';
import { DatasetSection } from './sections/dataset';
import { EpisodeSection } from './sections/episode';
import { GenerationSection } from './sections/generation';
import { GradersSection } from './sections/graders';
import { GrpoSection } from './sections/grpo';
import { CheckpointsSection, LoggingSection, QueueSection, ResourcesSection, WorkersSection } from './sections/infra';
import { ModelSection, TokenizerSection } from './sections/model';
import { RunSection } from './sections/run';
import { StagesSection } from './sections/stages';
import { deepStrict } from './strict';

export { STAGE_NAMES, type StageName } from './sections/stages';

/** Every key snake_case, as the packages' settings schemas write them; unknown keys refused at any depth. */
export const RunConfigSchema = deepStrict(
  z.strictObject({
    run: RunSection,
    model: ModelSection,
    tokenizer: TokenizerSection.prefault({}),
    dataset: DatasetSection,
    episode: EpisodeSection.prefault({}),
    generation: GenerationSection.prefault({}),
    grpo: GrpoSection.prefault({}),
    graders: GradersSection.prefault({}),
    stages: StagesSection.prefault({}),
    queue: QueueSection,
    workers: WorkersSection,
    resources: ResourcesSection.optional(),
    checkpoints: CheckpointsSection,
    logging: LoggingSection,
  }),
).superRefine((c, ctx) => {
  if (c.grpo.group_size === 1 && c.grpo.advantage.skip_equal_groups) {
    ctx.addIssue({
      code: 'custom',
      path: ['grpo', 'group_size'],
      message: 'a group of 1 has no group-relative signal and every group would be skipped; use 2 or more',
    });
  }
  if (c.resources !== undefined && c.model.architecture === undefined) {
    ctx.addIssue({
      code: 'custom',
      path: ['model', 'architecture'],
      message: "resources needs model.architecture (the backbone's config.json numbers) to estimate memory",
    });
  }
  const train = c.workers.train;
  if (train.nodes > 1 && train.rendezvous === null) {
    ctx.addIssue({
      code: 'custom',
      path: ['workers', 'train', 'rendezvous'],
      message: `workers.train.nodes is ${train.nodes}: give the host:port where node 0 serves the rendezvous`,
    });
  }
  if (train.node_rank >= train.nodes) {
    ctx.addIssue({
      code: 'custom',
      path: ['workers', 'train', 'node_rank'],
      message: `node_rank ${train.node_rank} is not one of the ${train.nodes} node(s) (0 to ${train.nodes - 1})`,
    });
  }
  const backend = c.generation.backend;
  if (backend.kind === 'vllm' && c.generation.sampling.top_p < 1) {
    ctx.addIssue({
      code: 'custom',
      path: ['generation', 'sampling', 'top_p'],
      message:
        `${c.generation.sampling.top_p} with the vllm backend: vLLM's processed_logprobs are renormalized over the top-p nucleus, while the ` +
        'train engine recomputes log-softmax(logits / T) over the whole vocabulary, so the importance ratios would be off from the ' +
        'first update and the clip would cut in; use 1',
    });
  }
  if (backend.kind === 'vllm' && backend.sleep_during_updates && c.workers.max_staleness > 0) {
    ctx.addIssue({
      code: 'custom',
      path: ['generation', 'backend', 'sleep_during_updates'],
      message:
        `needs workers.max_staleness 0 (it is ${c.workers.max_staleness}): the replicas sleep through every update, so rollouts ` +
        'of the next version cannot overlap it',
    });
  }
  if (backend.kind === 'vllm' && backend.policy_format === 'weights' && c.model.lora === undefined) {
    ctx.addIssue({
      code: 'custom',
      path: ['generation', 'backend', 'policy_format'],
      message:
        "weights without model.lora is the full model, which neither vLLM's load_lora_adapter (adapters only) nor trainer-ctl serve " +
        '(ONNX) can load; set model.lora, or policy_format onnx for trainer-ctl serve replicas',
    });
  }
});

/** A validated run config with every default applied and every path absolute. */
export type RunConfig = z.output<typeof RunConfigSchema>;
