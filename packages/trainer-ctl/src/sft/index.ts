export * from './split';
export * from './detours';
export * from './teacher';
export * from './samples';
export * from './train';
export * from './figures';
