/** Registry of importers: adding a source format is adding a file and a line here. */
import type { Importer } from '../telemetry';
import { aiops2022 } from './aiops2022';
import { nezha } from './nezha';
import { otlp } from './otlp';

export const importers: Record<string, Importer> = {
  [nezha.name]: nezha,
  [aiops2022.name]: aiops2022,
  [otlp.name]: otlp,
};

export function importer(name: string): Importer {
  const imp = importers[name];
  if (!imp) throw new Error(`unknown dataset format '${name}' (known: ${Object.keys(importers).join(', ')})`);
  return imp;
}
