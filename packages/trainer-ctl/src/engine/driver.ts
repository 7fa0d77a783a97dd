/**
 * Starts the Python train engine (`python3 -m thinkfl_engine`) and talks to it over stdio.
 * Every request has an id and a timeout. If the process exits, every pending request is
 * rejected with the tail of its stderr; a timed-out engine is killed, since its state is
 * unknown and it may never answer (the caller restarts it, e.g. from a checkpoint).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { EngineOp, EngineOps, EngineRequest, EngineResponse } from './protocol';
import { forksEngines, TEMPLATE_IDLE_ENV, templateSocket, type EngineLaunch } from './templates';

export const ENGINE_DIR = resolve(import.meta.dirname, '..', '..', '..', '..', 'engine');
/** The engine's virtual environment, built by scripts/setup.sh from engine/requirements.txt. */
export const ENGINE_PYTHON = resolve(ENGINE_DIR, '..', '.cache', 'venv', 'bin', 'python');

export interface EngineOptions {
  /** Python interpreter; default $THINKFL_PYTHON or the project's venv (ENGINE_PYTHON). */
  python?: string;
  /** Directory holding the thinkfl_engine package. Default: the repository's engine/. */
  engineDir?: string;
  /**
   * Processes to start (launched by torchrun on this machine), each running its share of every
   * request's micro-batches; rank 0 speaks the protocol and hands each request to the others.
   * Default 1.
   */
  ranks?: number;
  /**
   * Start through torchrun even with one rank, so that the engine finds a launcher's process
   * group (DeepSpeed needs one; without RANK/WORLD_SIZE it would look for MPI). Implied by ranks > 1.
   * Default false: one rank is a plain python process.
   */
  distributed?: boolean;
  /**
   * A world of several nodes: this process tree is node `rank` of `count`, each with `ranks`
   * processes, meeting at `rendezvous` (host:port of node 0's torchrun agent). Node ranks are
   * fixed (torchrun's static rendezvous), so global rank 0, which speaks the protocol, is on node 0.
   */
  nodes?: { count: number; rank: number; rendezvous: string; timeoutS: number };
  /** Extra environment for the engine process. */
  env?: Record<string, string>;
  /** Variables of this process's environment that the engine does not get. Default: none. */
  withoutEnv?: string[];
  /**
   * 'fork': from an engine template that imported the engine once (templates.ts; about 0.2 s of CPU
   * a start instead of 5.5 s); 'spawn': a fresh Python process; 'auto': fork a single-process engine
   * where the machine has no NVIDIA device. Default $THINKFL_ENGINE_LAUNCH or 'auto'. Multi-process
   * engines (torchrun) always spawn.
   */
  launch?: EngineLaunch;
  /** The directory of template sockets. Default: this user's (templates.ts, defaultTemplateDir). */
  templateDir?: string;
  /** Timeout of a request that names none, in ms. Default 10 minutes. */
  defaultTimeoutMs?: number;
  /** Receives the engine's stderr (its logs) as it arrives. */
  onStderr?: (text: string) => void;
  /** Characters of stderr kept for error messages. Default 8000. */
  stderrTailChars?: number;
}

export class EngineError extends Error {
  constructor(
    message: string,
    readonly op: EngineOp,
    readonly kind: 'failed' | 'timeout' | 'exited',
    readonly traceback?: string,
  ) {
    super(message);
    this.name = 'EngineError';
  }
}

interface Pending {
  op: EngineOp;
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout;
}

export class TrainEngine {
  private readonly child: ChildProcess;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private stderrTail = '';
  private deadReason: string | null = null;
  private readonly closed: Promise<void>;

  constructor(private readonly opts: EngineOptions = {}) {
    const engineDir = opts.engineDir ?? ENGINE_DIR;
    const pythonPath = [engineDir, process.env.PYTHONPATH].filter(Boolean).join(':');
    const ranks = opts.ranks ?? 1;
    if (!Number.isInteger(ranks) || ranks < 1) throw new Error(`engine ranks must be a positive integer, got ${ranks}`);
    const launcher = launcherArgs(ranks, opts);
    const python = opts.python ?? process.env.THINKFL_PYTHON ?? ENGINE_PYTHON;
    // OpenMP threads that sleep while waiting: spinning ones starve each other (and the rollout
    // side) on a loaded CPU; measured 30 s vs > 300 s for the gradient check on 2 busy cores.
    const env: NodeJS.ProcessEnv = {
      OMP_WAIT_POLICY: 'PASSIVE',
      ...process.env,
      ...opts.env,
      PYTHONPATH: pythonPath,
      PYTHONUNBUFFERED: '1',
    };
    for (const name of opts.withoutEnv ?? []) delete env[name];
    const launch = opts.launch ?? (process.env.THINKFL_ENGINE_LAUNCH as EngineLaunch | undefined) ?? 'auto';
    if (!['auto', 'spawn', 'fork'].includes(launch)) throw new Error(`THINKFL_ENGINE_LAUNCH must be auto, spawn or fork, got ${launch}`);
    const idle = env[TEMPLATE_IDLE_ENV];
    if (idle && !(Number.isFinite(Number(idle)) && Number(idle) >= 0))
      throw new Error(`${TEMPLATE_IDLE_ENV} must be a number of seconds (0 or more), got ${idle}`);
    let args = [...launcher, '-m', 'thinkfl_engine'];
    const shim = resolve(engineDir, 'thinkfl_engine', 'shim.py');
    if (forksEngines(launch, launcher.length === 0) && existsSync(shim)) {
      const socket = templateSocket(python, engineDir, env, opts.templateDir);
      if (socket) args = ['-I', '-S', shim, socket];
    }
    this.child = spawn(python, args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
    const keep = opts.stderrTailChars ?? 8000;
    this.child.stderr!.setEncoding('utf8').on('data', (text: string) => {
      this.stderrTail = (this.stderrTail + text).slice(-keep);
      opts.onStderr?.(text);
    });
    createInterface({ input: this.child.stdout! }).on('line', (line) => this.onLine(line));
    // A write to a dead engine is reported through 'close', not as an unhandled stream error.
    this.child.stdin!.on('error', () => undefined);
    this.closed = new Promise((done) => {
      this.child.on('error', (e) => {
        this.fail(`engine could not be started: ${e.message}`);
        done();
      });
      this.child.on('close', (code, signal) => {
        this.fail(this.deadReason ?? `engine exited (code ${code}, signal ${signal})`);
        done();
      });
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Resolves once the process has exited (for whatever reason). */
  get exited(): Promise<void> {
    return this.closed;
  }

  /** True once the process has exited or been killed; every later request is rejected. */
  get dead(): boolean {
    return this.deadReason !== null;
  }

  request<K extends EngineOp>(op: K, args: EngineOps[K]['args'], timeoutMs?: number): Promise<EngineOps[K]['result']> {
    if (this.deadReason !== null) {
      return Promise.reject(new EngineError(`${op}: ${this.deadReason}${this.tail()}`, op, 'exited'));
    }
    const id = this.nextId++;
    const ms = timeoutMs ?? this.opts.defaultTimeoutMs ?? 600_000;
    return new Promise((resolvePromise, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new EngineError(`${op} timed out after ${ms} ms; engine killed${this.tail()}`, op, 'timeout'));
        this.kill(`engine killed after ${op} timed out`);
      }, ms);
      this.pending.set(id, { op, resolve: resolvePromise as (v: unknown) => void, reject, timer });
      const req: EngineRequest = { id, op, args };
      this.child.stdin!.write(`${JSON.stringify(req)}\n`);
    });
  }

  /** Asks the engine to exit and waits for it; kills it if it does not exit within timeoutMs. */
  async shutdown(timeoutMs = 10_000): Promise<void> {
    if (this.deadReason === null) {
      await this.request('shutdown', {}, timeoutMs).catch(() => undefined);
      this.child.stdin!.end();
      const timer = setTimeout(() => this.kill('engine killed: it did not exit after shutdown'), timeoutMs);
      await this.closed;
      clearTimeout(timer);
    }
  }

  /**
   * SIGTERM, then SIGKILL after timeoutMs: a torchrun agent stops its ranks on SIGTERM (a SIGKILLed
   * agent would leave them running). For an engine that takes no requests (another node's ranks).
   */
  async terminate(timeoutMs = 10_000): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.kill('engine killed: it did not exit after SIGTERM'), timeoutMs);
    await this.closed;
    clearTimeout(timer);
  }

  /** Kills the process now; pending requests are rejected. */
  async dispose(): Promise<void> {
    this.kill('engine disposed');
    await this.closed;
  }

  private kill(reason: string): void {
    if (this.deadReason === null) this.deadReason = reason;
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
  }

  private tail(): string {
    const t = this.stderrTail.trim();
    return t ? `\n--- engine stderr (tail) ---\n${t}` : '';
  }

  private fail(reason: string): void {
    this.deadReason ??= reason;
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(new EngineError(`${p.op}: ${reason}${this.tail()}`, p.op, 'exited'));
      this.pending.delete(id);
    }
  }

  private onLine(line: string): void {
    let msg: EngineResponse;
    try {
      msg = JSON.parse(line) as EngineResponse;
    } catch {
      this.opts.onStderr?.(`[driver] engine wrote a non-protocol line: ${line.slice(0, 200)}\n`);
      return;
    }
    const p = msg.id === null ? undefined : this.pending.get(msg.id);
    if (!p) {
      this.opts.onStderr?.(`[driver] response for no pending request: ${line.slice(0, 200)}\n`);
      return;
    }
    this.pending.delete(msg.id as number);
    clearTimeout(p.timer);
    if (msg.ok) {
      p.resolve(msg.result);
      return;
    }
    // A fatal failure (a lost peer rank) leaves an engine that cannot serve again: it is dead from now on.
    if (msg.fatal) this.kill(`engine failed for good: ${msg.error}`);
    p.reject(new EngineError(msg.error, p.op, msg.fatal ? 'exited' : 'failed', msg.traceback));
  }
}

/** torchrun's arguments, or none for a single plain process. */
function launcherArgs(ranks: number, opts: EngineOptions): string[] {
  const n = opts.nodes;
  if (n && n.count > 1) {
    const at = n.rendezvous.lastIndexOf(':');
    return [
      '-m',
      'torch.distributed.run',
      `--nnodes=${n.count}`,
      `--node-rank=${n.rank}`,
      `--nproc-per-node=${ranks}`,
      `--master-addr=${n.rendezvous.slice(0, at)}`,
      `--master-port=${n.rendezvous.slice(at + 1)}`,
      `--rdzv-conf=timeout=${Math.ceil(n.timeoutS)}`,
    ];
  }
  return ranks > 1 || opts.distributed ? ['-m', 'torch.distributed.run', '--standalone', `--nproc-per-node=${ranks}`] : [];
}
