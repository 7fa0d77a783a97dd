export * from './settings';
export * from './model-policy';
