export * from './match';
export * from './metrics';
export * from './evaluate';
export * from './format';
