/**
 * What the controller needs from the job transport (the rollout and train queues on Redis,
 * queue/jobs.ts). One interface so the step logic reads as the algorithm it is; the Redis
 * implementation is in redis-transport.ts.
 */
import type { RolloutJob, TrainJob, TrainResult, TrainSample, Trajectory, WorkerBeat } from '../queue/index';

export interface ControlTransport {
  /** Enqueues rollout jobs; a job already queued or done for the same (group, sample) is not added twice. */
  enqueueRollouts(jobs: RolloutJob[]): Promise<void>;
  /** The G trajectories of a group in sample order, once all have arrived. */
  waitGroup(groupId: string, size: number, timeoutMs: number): Promise<Trajectory[]>;
  /**
   * Hands a graded group's train rows over before train() (at most maxGroups calls per update),
   * so that the bulk data is on its way while other groups still play. Optional.
   */
  stageTrainRows?(update: number, samples: TrainSample[], maxGroups: number): void;
  /** Submits a train job and resolves with its result (the stored one when the update ran before). */
  train(job: TrainJob, timeoutMs: number): Promise<TrainResult>;
  /** Frees a group's stored trajectories once the step that used them is complete. */
  dropGroups(groupIds: string[]): Promise<void>;
  workers(): Promise<WorkerBeat[]>;
  close(): Promise<void>;
}
