/**
 * Colocated mode (generation.backend.sleep_during_updates): the vLLM replicas share the train
 * ranks' GPU and sleep through every engine step, so the update has the memory they hold while
 * serving, and wake after it, before the new version is exported and published. A replica that
 * cannot be put to sleep fails the step before the engine moves (the job is retried); one that
 * cannot be woken is logged, not thrown, since the engine has already moved, and the rollout
 * side wakes a replica it finds asleep before it loads the next version on it.
 */
import { ReplicaSleep } from '@thinkfl/rollout';
import type { RunConfig } from '../config/schema';
import type { TrainWorkerOptions } from './train-worker';

/** The train worker's aroundStep for a run config; undefined when its replicas do not sleep. */
export function colocatedSteps(config: RunConfig, log: (line: string) => void): TrainWorkerOptions['aroundStep'] {
  const b = config.generation.backend;
  if (b.kind !== 'vllm' || !b.sleep_during_updates) return undefined;
  const replicas = new ReplicaSleep({ replicas: b.replicas, api_key_env: b.api_key_env, load_timeout_s: b.load_timeout_s });
  return async <T>(update: number, step: () => Promise<T>): Promise<T> => {
    await replicas.sleep();
    log(`colocated: ${b.replicas.length} vLLM replica(s) asleep for update ${update}`);
    try {
      return await step();
    } finally {
      await replicas.wakeUp().then(
        () => log(`colocated: vLLM replica(s) awake after update ${update}`),
        (e: Error) =>
          log(
            `colocated: waking the vLLM replicas after update ${update} failed (${e.message}); the rollout side wakes a replica it finds asleep before loading on it`,
          ),
      );
    }
  };
}
