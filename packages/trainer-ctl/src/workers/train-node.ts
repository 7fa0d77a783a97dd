/**
 * A train node other than node 0 (workers.train.nodes > 1): it takes no jobs and needs no Redis.
 * It starts this node's ranks of the engine, which join node 0's rendezvous and then follow
 * global rank 0 (node 0's train worker drives the engine through it), and starts them again
 * whenever they exit: after a shutdown, a failed peer or an engine restart on node 0, the next
 * engine needs this node's ranks again. Closing stops them.
 */
import type { RunConfig } from '../config/schema';
import { TrainEngine, type EngineOptions } from '../engine/driver';
import { engineLaunch } from './engine-supervisor';

export interface TrainNode {
  /** Times this node's ranks were started so far. */
  readonly starts: number;
  close(): Promise<void>;
}

/** Wait between a node's ranks exiting and starting again, ms: node 0 needs a moment to start its own agent. */
const RESTART_DELAY_MS = 2000;

export function startTrainNode(config: RunConfig, nodeRank: number, log: (line: string) => void, engine: EngineOptions = {}): TrainNode {
  const t = config.workers.train;
  if (t.nodes < 2) throw new Error(`--node-rank ${nodeRank}: workers.train.nodes is ${t.nodes}; a single-node engine has only node 0`);
  if (nodeRank < 1 || nodeRank >= t.nodes)
    throw new Error(`--node-rank ${nodeRank}: this node serves ranks only as node 1 to ${t.nodes - 1} (node 0 is the train worker)`);
  let closing = false;
  let starts = 0;
  let current: TrainEngine | undefined;
  let wake: () => void = () => undefined;
  const launch = engineLaunch(config);
  const loop = (async () => {
    while (!closing) {
      starts++;
      current = new TrainEngine({ ...launch, nodes: { ...launch.nodes!, rank: nodeRank }, onStderr: (x) => log(x.trimEnd()), ...engine });
      log(`node ${nodeRank} of ${t.nodes}: ${t.ranks} rank(s) started (pid ${current.pid}), joining ${t.rendezvous}`);
      await current.exited;
      if (closing) break;
      log(`node ${nodeRank}: the engine's ranks exited; starting them again in ${RESTART_DELAY_MS / 1000} s for node 0's next engine`);
      await new Promise<void>((resume) => {
        wake = resume;
        setTimeout(resume, RESTART_DELAY_MS);
      });
    }
  })();
  return {
    get starts() {
      return starts;
    },
    async close() {
      closing = true;
      wake();
      await current?.terminate();
      await loop;
    },
  };
}
