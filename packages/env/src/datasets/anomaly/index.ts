/** Registry of anomaly rules: adding one is adding a file and a line here. */
import { SettingsError } from '../errors';
import { baselineRule } from './baseline';
import type { AnomalyRule } from './rule';
import { thinkfl } from './thinkfl';

export type { AnomalyContext, AnomalyRule, AnomalyVerdict } from './rule';

export const anomalyRules: Record<string, AnomalyRule> = {
  [thinkfl.name]: thinkfl,
  [baselineRule.name]: baselineRule,
};

export function anomalyRule(name: string): AnomalyRule {
  const rule = anomalyRules[name];
  if (!rule) throw new SettingsError(`cases.anomaly.rule: unknown rule '${name}' (known: ${Object.keys(anomalyRules).join(', ')})`);
  return rule;
}
