/**
 * The cases `trainer-ctl eval` and `trainer-ctl probe` play, by the split of a run config
 * (dataset.split, run.seed; controller/cases.ts, as the run trains and evaluates): every case,
 * the training faults', the held-out faults', or the held-out faults' on a simulated redeploy
 * (every pod re-hashed consistently, env's loadRedeployedDataset), which asks whether a policy
 * plays on another day of the same system.
 */
import { loadDataset, loadRedeployedDataset, type Case, type Dataset } from '@thinkfl/env';
import { loadRunConfig } from '../config/index';
import { runCases } from '../controller/cases';

export const CASE_SPLITS = ['all', 'train', 'eval', 'redeploy'] as const;
export type CaseSplitName = (typeof CASE_SPLITS)[number];

export interface SplitCases {
  dataset: Dataset;
  cases: Case[];
  /** Old pod name -> new, on the redeploy split. */
  podNames?: Map<string, string>;
}

/**
 * Loads the dataset in `dir` and picks a split's cases. Every split but `all` needs the run
 * config (`configFile`) whose split it is; `redeploySeed` seeds the new pod names.
 */
export async function loadSplit(dir: string, split: CaseSplitName, configFile: string | undefined, redeploySeed = 1): Promise<SplitCases> {
  if (split === 'all') {
    const dataset = await loadDataset(dir);
    return { dataset, cases: dataset.cases };
  }
  if (!configFile)
    throw new Error(`--split ${split} needs the run config whose dataset.split it is: --config FILE, or a --model inside a run directory`);
  const { config } = loadRunConfig(configFile, { checkPaths: false });
  if (split === 'redeploy') {
    const dataset = await loadRedeployedDataset(dir, redeploySeed);
    return { dataset, cases: runCases(dataset, config).eval, podNames: dataset.podNames };
  }
  const dataset = await loadDataset(dir);
  const cases = runCases(dataset, config);
  return { dataset, cases: split === 'train' ? cases.train : cases.eval };
}
