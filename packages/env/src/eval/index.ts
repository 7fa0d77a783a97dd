export * from './match';
export * from './metrics';
export * from './evaluate';
export * from './format';
export * from './select';
export * from './solver';
