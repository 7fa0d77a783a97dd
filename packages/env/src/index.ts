// Public API of @thinkfl/env: each part appends one export line for its barrel.
export * from './types';
export * from './zod-issues';
export { discriminatorValues, knownKeys, snakeCase, unknownKeyHint, valueAt } from './zod-keys';
export * from './policies/index';
export * from './eval/index';
export * from './datasets/index';
export * from './tools/index';
export * from './parsing/index';
export * from './episodes/index';
export * from './rng';
export * from './teacher-data/teacher';
export * from './teacher-data/detours';
export * from './teacher-data/rename';
