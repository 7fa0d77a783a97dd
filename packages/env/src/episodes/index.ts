export * from './settings';
export * from './canonical';
export * from './prompts';
export * from './registry';
export * from './session';
export * from './replay-policy';
export * from './run-episode';
