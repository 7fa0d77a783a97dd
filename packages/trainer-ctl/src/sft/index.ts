export * from './split';
export * from './samples';
export * from './train';
export * from './figures';
