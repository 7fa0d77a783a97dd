export * from './rollout-worker';
export * from './policy-sync';
export * from './episode-player';
export * from './chat-from-config';
export * from './run-files';
export * from './train-step';
export * from './train-worker';
export * from './start';
