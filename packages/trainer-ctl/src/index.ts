export { main } from './cli';
export * from './engine/index';
export * from './sft/index';
export * from './queue/index';
export * from './workers/index';
