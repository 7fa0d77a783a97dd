export * from './split';
export * from './samples';
export * from './figures';
