export { main } from './cli';
export * from './engine/index';
