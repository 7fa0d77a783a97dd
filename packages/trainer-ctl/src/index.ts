export { main } from './cli';
export * from './engine/index';
export * from './algo/core/loss-settings';
export * from './algo/core/optimizer-settings';
export * from './sft/index';
export * from './algo/sft/schedule';
export * from './queue/index';
export * from './workers/index';
