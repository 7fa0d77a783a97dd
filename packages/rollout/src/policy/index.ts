export * from './settings';
export * from './model-policy';
export * from './chat-policy';
