/** A peer in its own process, spoken to in JSON lines: a line in on stdin, a JSON line back on stdout. */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';

export class LineChild {
  private readonly proc: ChildProcessWithoutNullStreams;
  private readonly waiting: ((line: string) => void)[] = [];
  private readonly lines: string[] = [];
  private stderr = '';
  private exited: string | undefined;

  constructor(
    readonly name: string,
    command: string,
    args: string[],
    options: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
  ) {
    this.proc = spawn(command, args, { cwd: options.cwd, env: { ...process.env, ...options.env }, stdio: ['pipe', 'pipe', 'pipe'] });
    createInterface({ input: this.proc.stdout }).on('line', (line) => {
      const w = this.waiting.shift();
      if (w) w(line);
      else this.lines.push(line);
    });
    this.proc.stderr.on('data', (d: Buffer) => {
      this.stderr = (this.stderr + d.toString()).slice(-6000);
    });
    this.proc.on('exit', (code, signal) => {
      this.exited = `${name} exited (${signal ?? `code ${code}`}); its stderr ends:\n${this.stderr}`;
      for (const w of this.waiting.splice(0)) w('');
    });
  }

  /** The next JSON line the child writes. */
  async next<T>(): Promise<T> {
    const line = this.lines.shift() ?? (this.exited ? '' : await new Promise<string>((r) => this.waiting.push(r)));
    if (!line) throw new Error(this.exited ?? `${this.name}: no output`);
    try {
      return JSON.parse(line) as T;
    } catch {
      throw new Error(`${this.name}: not a JSON line: ${line.slice(0, 300)}\nits stderr ends:\n${this.stderr}`);
    }
  }

  /** Sends a line (an object is sent as JSON) and returns the child's answer. */
  async ask<T>(msg: unknown): Promise<T> {
    this.proc.stdin.write(`${typeof msg === 'string' ? msg : JSON.stringify(msg)}\n`);
    return this.next<T>();
  }

  async close(): Promise<void> {
    if (this.exited) return;
    const done = new Promise((r) => this.proc.once('exit', r));
    this.proc.stdin.end();
    const kill = setTimeout(() => this.proc.kill('SIGKILL'), 10_000);
    await done;
    clearTimeout(kill);
  }
}
