export * from './driver';
export * from './protocol';
export * from './loss-settings';
export * from './optimizer-settings';
export * from './tiny-model-config';
