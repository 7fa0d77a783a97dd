// Entry of the tokenizer thread (tokenize-thread.ts). Plain JavaScript: a worker thread does
// not inherit the parent's TypeScript loader, so it registers tsx itself before loading the
// project's Tokenizer.
import { parentPort, workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
const { loadTokenizer } = await import('../chat/tokenizer.ts');
const tokenizer = loadTokenizer(workerData.modelDir);
parentPort.on('message', ({ id, text }) => {
  try {
    const ids = Int32Array.from(tokenizer.encode(text));
    parentPort.postMessage({ id, ids }, [ids.buffer]);
  } catch (e) {
    parentPort.postMessage({ id, error: e instanceof Error ? e.message : String(e) });
  }
});
