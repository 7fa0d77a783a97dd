/**
 * The server's tokenizer thread: the same ids as the tokenizer in process for a long text
 * within the limit, and for one beyond it a refusal whose count is a true lower bound (at most
 * the text's real token count) above the limit.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadTokenizer, type Tokenizer } from '../src/chat/tokenizer';
import { TooManyTokens } from '../src/serve/served-model';
import { TokenizerThread } from '../src/serve/tokenize-thread';
import { scratchDir } from './backend-fixtures';
import { createTinyModel } from '../../../testkit/tiny-model';

const dir = scratchDir('tokenize-thread');
let thread: TokenizerThread;
let tokenizer: Tokenizer;

beforeAll(async () => {
  const model = await createTinyModel(join(dir, 'tiny'), 4);
  thread = new TokenizerThread(model);
  tokenizer = loadTokenizer(model);
}, 300_000);
afterAll(async () => {
  await thread.close();
});

// Long runs with and without spaces: piece boundaries fall before a space or, in the second, anywhere.
const TEXTS = [
  'ts-order-service returned 500 after 3021 ms; search_traces(parent_span_id) '.repeat(4000),
  'SeatController.getLeftTicketOfInterval|'.repeat(30000),
];

describe('tokenizer thread', () => {
  it.each(TEXTS.map((t, i) => [i, t]))('text %i within the limit: the same ids as in process', async (_i, text) => {
    expect(await thread.encode(text as string)).toEqual(tokenizer.encode(text as string));
  });

  it.each(TEXTS.map((t, i) => [i, t]))('text %i beyond the limit: a lower bound on its count, above the limit', async (_i, text) => {
    const real = tokenizer.encode(text as string).length;
    const limit = 8191;
    expect(real).toBeGreaterThan(3 * limit);
    const e = await thread.encode(text as string, limit).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(e).toBeInstanceOf(TooManyTokens);
    const atLeast = (e as TooManyTokens).atLeast;
    expect(atLeast).toBeGreaterThan(limit);
    expect(atLeast).toBeLessThanOrEqual(real);
    // It stopped early: far below the whole count.
    expect(atLeast).toBeLessThan(real / 2);
  });
});
