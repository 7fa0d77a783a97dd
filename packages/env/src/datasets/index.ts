/** Public API of the datasets part: import raw telemetry, load a dataset, the stores. */
export { importDataset, type ImportOptions } from './import';
export { loadDataset, datasetFromFiles, type LoadedDataset } from './load';
export { FORMAT_VERSION, metaFormatVersion, readMeta, type DatasetFiles } from './files';
export { importers, importer } from './importers/index';
export type { Importer, Telemetry, Progress } from './telemetry';
export { anomalyRules, anomalyRule, type AnomalyRule, type AnomalyContext, type AnomalyVerdict } from './anomaly/index';
export { CaseSettings, AnomalySettings, GapSettings, importSettings, parseSettings } from './settings';
export { gapLines } from './gaps';
export { NezhaSettings } from './importers/nezha';
export { Aiops2022Settings } from './importers/aiops2022';
export { OtlpSettings } from './importers/otlp';
export { ContextBaseline, contextKeys, endpointOf, signature } from './stores/baseline';
export { ColumnarTraceStore } from './stores/trace-store';
export { StaticTopology } from './stores/topology';
export { truthName, touchesTruth } from './cases';
export { maskLog } from './log-template';
export { DataError, GapsError, LayoutError, SettingsError } from './errors';
export { formatImportSummary } from './summary';
export {
  readOpenRca,
  readOpenRcaQueries,
  readOpenRcaRecords,
  queryWindow,
  failureCount,
  type OpenRcaQuery,
  type OpenRcaRecord,
} from './importers/openrca';
export { loadRedeployedDataset, podRenamer, redeployPodNames, type RedeployedDataset } from './redeploy';
