// Public API of @thinkfl/rollout: each part appends one export line for its barrel.
export * from './backends/index';
export * from './chat/index';
export * from './serve/index';
export * from './policy/index';
