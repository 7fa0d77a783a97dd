export * from './split';
export * from './detours';
export * from './teacher';
export * from './rename';
export * from './samples';
export * from './train';
export * from './figures';
