import './builtin';

export * from './registry';
export * from './trace-math';
export * from './pagerank';
export { createSelfTimeRanker, SelfTimeSettingsSchema, type SelfTimeSettings } from './selftime';
export { createMicroRankRanker, MicroRankSettingsSchema, type MicroRankSettings } from './microrank';
export { createExpert, ExpertSettingsSchema, type ExpertSettings } from './expert/expert';
