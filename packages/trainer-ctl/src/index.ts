export { main } from './cli';
export * from './engine/index';
export * from './sft/index';
export * from './teacher-data/teacher';
export * from './teacher-data/detours';
export * from './teacher-data/rename';
export * from './queue/index';
export * from './workers/index';
