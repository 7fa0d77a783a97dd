// Entry of the JSON thread (json-thread.ts): decodes and parses one request body at a time.
import { parentPort } from 'node:worker_threads';

/** Arrays of more numbers than this come back packed (see json-thread.ts). */
const PACK_ABOVE = 4096;

/** Replaces long arrays of numbers by Float64Arrays, whose buffers go back without a copy. */
function pack(value, transfer, depth) {
  if (depth > 4 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    if (value.length > PACK_ABOVE && value.every((x) => typeof x === 'number')) {
      const packed = Float64Array.from(value);
      transfer.push(packed.buffer);
      return packed;
    }
    for (let i = 0; i < value.length; i++) value[i] = pack(value[i], transfer, depth + 1);
    return value;
  }
  for (const k of Object.keys(value)) value[k] = pack(value[k], transfer, depth + 1);
  return value;
}

parentPort.on('message', ({ id, bytes }) => {
  let body;
  try {
    body = JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch (e) {
    return parentPort.postMessage({ id, error: e instanceof Error ? e.message : String(e) });
  }
  const transfer = [];
  body = pack(body, transfer, 0);
  parentPort.postMessage({ id, body }, transfer);
});
