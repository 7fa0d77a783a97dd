export * from './call';
export * from './json-scan';
export * from './registry';
export * from './parse';
