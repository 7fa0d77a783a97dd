/**
 * The stage-1 teacher as the run config describes it: the scripted expert (stages.priming.sft.teacher)
 * plays the run's episode protocol on training cases, only correct answers are kept (sft/teacher.ts),
 * tokenized with the run's chat model (sft/samples.ts), up to stages.priming.sft.conversations.
 */
import type { Case, Dataset } from '@thinkfl/env';
import type { RunConfig } from '../config/index';
import type { TrainSample } from '../queue/index';
import { sftSample, teacherEpisodes } from '../sft/index';
import { chatModelFromConfig } from '../workers/chat-from-config';

export function configTeacher(config: RunConfig, dataset: Dataset, train: Case[]): () => Promise<TrainSample[]> {
  return async () => {
    const want = config.stages.priming.sft.conversations;
    const data = await teacherEpisodes({
      dataset,
      cases: train,
      episode: config.episode,
      expert: config.stages.priming.sft.teacher,
      // Enough plays of each case to reach the wanted count even if only some answers are correct.
      variants: Math.max(1, Math.ceil(want / Math.max(1, train.length))),
      seed: config.run.seed,
    });
    const chat = chatModelFromConfig(config);
    return data.episodes.slice(0, want).map((ep) => sftSample(ep, chat));
  };
}
