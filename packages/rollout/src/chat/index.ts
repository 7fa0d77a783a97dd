export * from './model-dir';
export * from './tokenizer';
export * from './template';
export * from './episode-tokens';
export * from './chat-model';
export * from './tiny-vocab';
export * from './tiny-tokenizer';
