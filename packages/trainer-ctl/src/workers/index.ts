export * from './rollout-worker';
export * from './policy-sync';
export * from './episode-player';
export * from './chat-from-config';
export * from './run-files';
export { safetensorsProblem, syncTree } from './checkpoint-integrity';
export * from './train-step';
export * from './train-worker';
export * from './start';
