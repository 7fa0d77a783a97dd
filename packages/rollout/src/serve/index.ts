export { startServer, type RunningServer } from './server';
export { openLocalModel, type LocalModelOptions } from './local-model';
export type { ServedModel } from './served-model';
