export { hubAccess, type HubAccess } from './endpoint';
export { downloadModel, HubDownloadError, type DownloadOptions } from './download';
export { pushRun, pushSource, type PushOptions } from './push';
export { evaluationTable, modelCard } from './model-card';
