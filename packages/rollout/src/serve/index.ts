export { startServer, type RunningServer, type ServerOptions } from './server';
export { openLocalModel, type LocalModelOptions } from './local-model';
export { ServedModels } from './models';
export type { ServedModel } from './served-model';
