/**
 * The `onnx` backend's cancellation hook: a request whose AbortSignal fires leaves its batch at
 * the next decode step with finish reason 'abort' and the tokens made so far (a prefix of what
 * it would have generated); the other rows of the batch generate exactly what they would alone.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openOnnxBackend, type OnnxBackend } from '../src/backends/index';
import { loadTokenizer } from '../src/chat/tokenizer';
import { scratchDir } from './backend-fixtures';
import { createTinyModel } from '../../../testkit/tiny-model';

const dir = scratchDir('cancel');
let backend: OnnxBackend;
let prompt: number[];
let other: number[];
/** Greedy, long: the tiny model does not end these early (checked below). */
const LONG = { temperature: 0, max_tokens: 400 };

beforeAll(async () => {
  const model = await createTinyModel(join(dir, 'tiny'), 4);
  backend = await openOnnxBackend({ model_dir: model, threads: 1 });
  const tok = loadTokenizer(model);
  prompt = tok.encode('search_traces');
  other = tok.encode('ts-order-service returned 500');
}, 300_000);
afterAll(async () => {
  await backend.close();
});

/**
 * A signal that fires from outside the decode loop, as a client hanging up does: on the event
 * loop's next turn after the request's `afterTokens`-th token. Counting tokens, not milliseconds,
 * makes the cut the same on a busy machine as on an idle one.
 */
function abortAfterTokens(afterTokens: number): { signal: AbortSignal; onToken: () => void; tokensAfterAbort: () => number } {
  const c = new AbortController();
  let seen = 0;
  let atAbort: number | undefined;
  const onToken = () => {
    seen++;
    if (seen === afterTokens)
      setImmediate(() => {
        atAbort = seen;
        c.abort();
      });
  };
  return { signal: c.signal, onToken, tokensAfterAbort: () => seen - (atAbort ?? seen) };
}

describe('onnx backend cancellation', () => {
  it('does not run a request aborted before it starts', async () => {
    const c = new AbortController();
    c.abort();
    const [g] = await backend.generate([{ promptIds: prompt, sampling: LONG, signal: c.signal }]);
    expect(g).toMatchObject({ tokenIds: [], finishReason: 'abort', text: '' });
  });

  it('stops an aborted request between decode steps, keeping the prefix it made; its batch mates are unaffected', async () => {
    const [full, fullOther] = await backend.generate([
      { promptIds: prompt, sampling: LONG },
      { promptIds: other, sampling: LONG },
    ]);
    expect([full.finishReason, fullOther.finishReason]).toEqual(['length', 'length']);
    const AFTER = 20;
    const hangUp = abortAfterTokens(AFTER);
    const [cut, rest] = await backend.generate([
      { promptIds: prompt, sampling: LONG, signal: hangUp.signal, onToken: hangUp.onToken },
      { promptIds: other, sampling: LONG },
    ]);
    expect(cut.finishReason).toBe('abort');
    // The abort lands while a decode step runs; the row leaves at the end of that step, with at
    // most the one token that step made after the abort (none if it landed between steps).
    expect(hangUp.tokensAfterAbort()).toBeLessThanOrEqual(1);
    expect(cut.tokenIds.length).toBeGreaterThanOrEqual(AFTER);
    expect(cut.tokenIds.length).toBeLessThanOrEqual(AFTER + 1);
    expect(cut.tokenIds).toEqual(full.tokenIds.slice(0, cut.tokenIds.length));
    expect(rest.tokenIds).toEqual(fullOther.tokenIds);
    expect(rest.finishReason).toBe('length');
  });
});
