export * from './driver';
export * from './protocol';
export * from './tiny-model-config';
export * from './templates';
