/**
 * vLLM's sleep mode endpoints (with --enable-sleep-mode; vLLM serves them when
 * VLLM_SERVER_DEV_MODE=1, vllm/entrypoints/serve/dev/sleep/api_router.py): POST /sleep?level=L&mode=M,
 * POST /wake_up, GET /is_sleeping. As in vLLM, a sleeping server takes requests but starts no
 * generation until it wakes; `mode` says what happens to generations running at the call:
 * `abort` (vLLM's default) stops them, their answers ending with finish_reason "abort", `wait`
 * answers the call once they have finished. This server has no GPU memory to give back, so what
 * it models is that protocol: level 1 (vLLM: weights to host memory, KV cache dropped) and level
 * 0 (scheduling paused) keep the loaded models; level 2 (weights discarded until reloaded) and
 * `keep` (running requests frozen) are refused.
 */
import { BadRequest } from './errors';
import type { GenerationGate } from './gate';

export class SleepMode {
  sleeping = false;
  /** Calls answered, for /metrics. */
  sleeps = 0;
  wakeUps = 0;
  /** Aborted by a sleep in `abort` mode: the generations running at that moment stop. */
  private stop = new AbortController();

  constructor(private readonly gate: GenerationGate) {}

  /** What a generation's own signal is combined with. */
  get signal(): AbortSignal {
    return this.stop.signal;
  }

  async sleep(query: URLSearchParams): Promise<{ status: string; level: number }> {
    const level = Number(query.get('level') ?? '1');
    const mode = query.get('mode') ?? 'abort';
    if (!Number.isInteger(level) || level < 0 || level > 2)
      throw new BadRequest(`level: must be 0, 1 or 2, got ${query.get('level')}`, 'level');
    if (level === 2) throw new BadRequest('level 2 (weights discarded) is not supported by this server', 'level');
    if (mode !== 'abort' && mode !== 'wait') throw new BadRequest(`mode: ${mode} is not supported by this server (abort or wait)`, 'mode');
    this.gate.pause();
    this.sleeping = true;
    this.sleeps++;
    if (mode === 'abort') {
      this.stop.abort(new Error('the server was put to sleep'));
      this.stop = new AbortController();
    }
    await this.gate.idle();
    return { status: 'sleeping', level };
  }

  wakeUp(query: URLSearchParams): { status: string; tags: null } {
    if (query.getAll('tags').length) throw new BadRequest('tags: waking part of the server is not supported by this server', 'tags');
    this.sleeping = false;
    this.wakeUps++;
    this.gate.resume();
    return { status: 'awake', tags: null };
  }
}
