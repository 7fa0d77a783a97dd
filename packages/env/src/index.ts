// Public API of @thinkfl/env: each part appends one export line for its barrel.
export * from './types';
