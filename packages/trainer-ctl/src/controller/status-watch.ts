/**
 * `trainer-ctl status RUN_DIR --watch`: on a terminal the status is redrawn in place every
 * interval; in a log (non-terminal) each new metrics line and evaluation is written once as a
 * plain line, so a CI log gets one line per step. Returns when the run is done.
 */
import type { ProgressStream } from '../progress';
import { readMetrics } from '../run-files/metrics-log';
import { evalLine, formatStatus, metricsLine, runStatus } from './status-report';

export interface WatchOptions {
  intervalMs: number;
  stream: ProgressStream;
  tail?: number;
  redisUrl?: string;
  /** Waits between rounds (injectable so that tests need not wait). */
  sleep?: (ms: number) => Promise<void>;
}

const CLEAR = '\x1b[H\x1b[2J';

export async function watchStatus(runDir: string, opts: WatchOptions): Promise<void> {
  const sleep = opts.sleep ?? ((ms) => new Promise<void>((done) => setTimeout(done, ms)));
  let lines = 0;
  const evals = new Set<string>();
  for (;;) {
    const s = await runStatus(runDir, { tail: opts.tail, redisUrl: opts.redisUrl });
    if (opts.stream.isTTY) opts.stream.write(`${CLEAR}${formatStatus(s)}\n`);
    else {
      const counted = readMetrics(runDir).slice(0, s.state.metrics_lines);
      // A resumed run cuts metrics back: its replayed steps are shown again.
      lines = Math.min(lines, counted.length);
      for (const m of counted.slice(lines)) opts.stream.write(`${metricsLine(m).trim()}\n`);
      lines = counted.length;
      for (const e of s.evals.filter((x) => !evals.has(x.name))) {
        opts.stream.write(`${evalLine(e)}\n`);
        evals.add(e.name);
      }
    }
    if (s.state.done) {
      if (!opts.stream.isTTY) opts.stream.write(`run ${s.state.run_name} done: ${s.state.updates} updates\n`);
      return;
    }
    await sleep(opts.intervalMs);
  }
}
