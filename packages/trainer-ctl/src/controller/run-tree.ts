/**
 * What a `trainer-ctl train` started (the embedded Redis, the worker processes, its own
 * connections) and how it is taken down: workers first (the train worker stops its engine),
 * then the controller's connections, Redis last, so no client is left talking to a server
 * that has gone. Closing is idempotent and quick: a worker still busy after `graceMs` is
 * killed, since whatever it was doing is redone on resume. Anything started after closing
 * began is stopped at once. A worker that exits by itself, or a Redis that died and could not
 * be started again, ends the run through `onFailure`.
 */
import { existsSync, readFileSync } from 'node:fs';
import type { EmbeddedRedis } from '../redis/embedded';
import { recordProcesses, stopWorkerProcesses, type ProcessRecord, type WorkerProcess } from './processes';
import type { RedisTransport } from './redis-transport';

/** The reason a worker gave for giving up (its last "fatal:" log line), as ": <reason>". */
function fatalLine(logFile: string): string {
  if (!existsSync(logFile)) return '';
  const line = readFileSync(logFile, 'utf8')
    .split('\n')
    .reverse()
    .find((l) => / fatal: /.test(l));
  return line ? `: ${line.slice(line.indexOf(' fatal: ') + 8)}` : '';
}

export class RunTree {
  private readonly workers: WorkerProcess[] = [];
  private redis?: EmbeddedRedis;
  private transport?: RedisTransport;
  private closing?: Promise<void>;

  constructor(
    private readonly runDir: string,
    /** Called once when a part of the tree fails on its own (not while closing). */
    private readonly onFailure: (err: Error) => void,
    private readonly graceMs = 6_000,
  ) {}

  get closed(): boolean {
    return this.closing !== undefined;
  }

  async addRedis(redis: EmbeddedRedis): Promise<void> {
    this.redis = redis;
    if (this.closed) await redis.stop();
  }

  async addTransport(transport: RedisTransport): Promise<void> {
    this.transport = transport;
    if (this.closed) await transport.close();
  }

  /** Adopts a started worker: its unexpected exit fails the run. */
  async addWorker(w: WorkerProcess, logFile: string): Promise<void> {
    this.workers.push(w);
    w.child.once('exit', (code, signal) => {
      if (this.closed) return;
      const how = signal ? `signal ${signal}` : `code ${code}`;
      this.onFailure(new Error(`worker ${w.record.role} exited (${how})${fatalLine(logFile)}; its log is ${logFile}`));
    });
    if (this.closed) await stopWorkerProcesses([w], this.graceMs);
  }

  /** Writes RUN_DIR/processes.json: what a later controller must stop if this one is killed. */
  record(): void {
    if (this.closed) return;
    const records: ProcessRecord[] = [];
    if (this.redis) records.push({ pid: this.redis.pid, marker: 'redis-server', role: 'redis' });
    records.push(...this.workers.map((w) => w.record));
    recordProcesses(this.runDir, records);
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      await stopWorkerProcesses(this.workers, this.graceMs);
      await this.transport?.close();
      await this.redis?.stop();
      try {
        recordProcesses(this.runDir, []);
      } catch {
        // A full or read-only run directory keeps the old list: its processes are gone, and the
        // next controller stops only those still alive (stopLeftovers).
      }
    })();
    return this.closing;
  }
}
