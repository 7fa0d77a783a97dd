// Entry of the tokenizer thread (tokenize-thread.ts). Plain JavaScript: a worker thread does
// not inherit the parent's TypeScript loader, so it registers tsx itself before loading the
// project's Tokenizer.
import { parentPort, workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
const { loadTokenizer } = await import('../chat/tokenizer.ts');
const tokenizer = loadTokenizer(workerData.modelDir);

/** Characters per counting piece: large enough that the pieces' boundaries do not matter. */
const PIECE = 65_536;
/** Tokens one boundary may add or save against tokenizing the whole text. */
const SLACK = 4;

/**
 * A lower bound on the text's token count when it is above `limit`, else null. Counts
 * piece by piece, cut before a space where there is one (where byte-level pre-tokenizers
 * split anyway), and stops as soon as the count minus the boundaries' slack passes `limit`:
 * a text far beyond the context costs about the context's worth of tokenization.
 */
function atLeastBeyond(text, limit) {
  let count = 0;
  for (let at = 0, pieces = 1; at < text.length; pieces++) {
    let end = Math.min(text.length, at + PIECE);
    if (end < text.length) {
      const space = text.lastIndexOf(' ', end);
      if (space > at) end = space;
    }
    count += tokenizer.encode(text.slice(at, end)).length;
    at = end;
    if (count - SLACK * pieces > limit) return count - SLACK * pieces;
  }
  return null;
}

parentPort.on('message', ({ id, text, limit }) => {
  try {
    const atLeast = text.length > 2 * PIECE ? atLeastBeyond(text, limit) : null;
    if (atLeast !== null) return parentPort.postMessage({ id, atLeast });
    const ids = Int32Array.from(tokenizer.encode(text));
    parentPort.postMessage({ id, ids }, [ids.buffer]);
  } catch (e) {
    parentPort.postMessage({ id, error: e instanceof Error ? e.message : String(e) });
  }
});
