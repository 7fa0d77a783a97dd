export * from './cache';
export * from './path-key';
export * from './redis-cache';
