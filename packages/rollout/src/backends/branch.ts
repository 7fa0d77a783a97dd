/**
 * Branching an episode at a turn without generating its prefix again: a RecordingBackend keeps
 * each turn's prompt ids and generation as a policy plays, and a PrefixBackend answers the first
 * recorded turns from that record before it hands the rest to a live backend. A ModelPolicy on a
 * PrefixBackend therefore continues the recorded episode token for token up to the branch turn
 * (each prompt is checked against the recorded one) and samples its own turns after it.
 * Both wrap one request per call, as ModelPolicy sends them; neither closes the backend it wraps.
 */
import type { Generation, GenerationBackend, GenerationRequest } from './types';

/** One model turn as the backend saw it. */
export interface RecordedTurn {
  promptIds: number[];
  generation: Generation;
}

function single(requests: GenerationRequest[], who: string): GenerationRequest {
  if (requests.length !== 1) throw new Error(`${who} takes one request per call (a policy's turn), got ${requests.length}`);
  return requests[0];
}

export class RecordingBackend implements GenerationBackend {
  readonly name: string;
  readonly turns: RecordedTurn[] = [];

  constructor(private readonly live: GenerationBackend) {
    this.name = `recording(${live.name})`;
  }

  async generate(requests: GenerationRequest[]): Promise<Generation[]> {
    const req = single(requests, this.name);
    const [generation] = await this.live.generate([req]);
    this.turns.push({ promptIds: [...req.promptIds], generation });
    return [generation];
  }

  async close(): Promise<void> {}
}

/** The recorded prefix of one episode differs from the episode being replayed. */
export class PrefixMismatchError extends Error {
  override name = 'PrefixMismatchError';
}

export class PrefixBackend implements GenerationBackend {
  readonly name: string;
  private turn = 0;
  /** Set once a prompt differed from the recorded one (the policy sees the throw as its own error). */
  mismatch?: string;

  /** `prefix`: the turns answered from the record (turns 0..prefix.length-1); later turns go to `live`. */
  constructor(
    private readonly live: GenerationBackend,
    private readonly prefix: readonly RecordedTurn[],
  ) {
    this.name = `prefix(${live.name}, ${prefix.length} turns)`;
  }

  async generate(requests: GenerationRequest[]): Promise<Generation[]> {
    const req = single(requests, this.name);
    const t = this.turn++;
    if (t >= this.prefix.length) return this.live.generate([req]);
    const rec = this.prefix[t];
    const same = rec.promptIds.length === req.promptIds.length && rec.promptIds.every((id, i) => id === req.promptIds[i]);
    if (!same) {
      this.mismatch =
        `turn ${t}: the prompt (${req.promptIds.length} tokens) is not the recorded one (${rec.promptIds.length} tokens); ` +
        'the episode left the recorded prefix before the branch turn';
      throw new PrefixMismatchError(this.mismatch);
    }
    const g = rec.generation;
    return [{ ...g, tokenIds: [...g.tokenIds], logprobs: [...g.logprobs] }];
  }

  async close(): Promise<void> {}
}
