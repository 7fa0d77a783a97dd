export * from './errors';
export * from './schema';
export * from './load';
export * from './json-schema';
export { runDir } from './paths';
