export * from './advantages';
