/**
 * The stage-1 teacher as the run config describes it: the scripted expert (stages.priming.sft.teacher)
 * plays the run's episode protocol on training cases (stages.priming.sft.cases), only correct
 * answers are kept (teacher-data/teacher.ts), replaced by consistently renamed copies when
 * stages.priming.sft.rename asks (teacher-data/rename.ts), tokenized with the run's chat model
 * (sft/samples.ts), up to stages.priming.sft.conversations.
 */
import type { Case, Dataset } from '@thinkfl/env';
import type { RunConfig } from '../config/index';
import type { TrainSample } from '../queue/index';
import { renamedEpisodes } from '@thinkfl/env';
import { sftSample } from '../sft/index';
import { teacherEpisodes, type TeacherEpisode } from '@thinkfl/env';
import { chatModelFromConfig } from '../workers/chat-from-config';

/** Up to n episodes taken round-robin over their cases (variant 0 of every case before any variant 1). */
function spread(episodes: TeacherEpisode[], n: number): TeacherEpisode[] {
  const byCase = new Map<string, TeacherEpisode[]>();
  for (const e of episodes) byCase.set(e.case.id, [...(byCase.get(e.case.id) ?? []), e]);
  const out: TeacherEpisode[] = [];
  for (let round = 0; out.length < Math.min(n, episodes.length); round++) {
    for (const list of byCase.values()) if (round < list.length && out.length < n) out.push(list[round]);
  }
  return out;
}

/** The cases stages.priming.sft.cases names: the run's training cases, or every case of their faults. */
export function teacherCases(config: RunConfig, dataset: Dataset, train: Case[]): Case[] {
  if (config.stages.priming.sft.cases === 'run') return train;
  const faults = new Set(train.map((c) => c.fault_id));
  return dataset.cases.filter((c) => faults.has(c.fault_id));
}

/** The teacher conversations SFT trains on, before tokenization (scripts/sft-plan.ts counts them). */
export async function teacherConversations(config: RunConfig, dataset: Dataset, train: Case[]): Promise<TeacherEpisode[]> {
  const sft = config.stages.priming.sft;
  const data = await teacherEpisodes({
    dataset,
    cases: teacherCases(config, dataset, train),
    episode: config.episode,
    expert: sft.teacher,
    variants: sft.variants,
    detours: sft.detours,
    seed: config.run.seed,
    reasoning: sft.reasoning,
    answerSpans: sft.answer_spans ? sft.answer_choice : undefined,
  });
  const episodes = renamedEpisodes(data.episodes, dataset.topology, sft.rename, config.run.seed);
  // Spread over the cases rather than the first ones' variants when there are more than wanted.
  return spread(episodes, sft.conversations);
}

export function configTeacher(config: RunConfig, dataset: Dataset, train: Case[]): () => Promise<TrainSample[]> {
  return async () => {
    const episodes = await teacherConversations(config, dataset, train);
    const chat = chatModelFromConfig(config);
    return episodes.map((ep) => sftSample(ep, chat, { renderTools: config.generation.render_tools }));
  };
}
