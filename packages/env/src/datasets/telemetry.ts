/** What every importer produces: normalised telemetry of one source, before cases exist. */
import type { z } from 'zod';
import type { LogRecord, LogTemplate, Span } from '../types';
import type { FaultDraft } from './cases';
import type { SourceGaps } from './gaps';
import type { MetricSeriesData } from './stores/metric-store';
import type { PodInfo } from './stores/topology';

export interface Telemetry {
  spans: Span[];
  /** Fault-free spans; when empty, the requests starting outside every fault window serve. */
  baselineSpans: Span[];
  metrics: MetricSeriesData[];
  logs: { templates: LogTemplate[]; records: LogRecord[] };
  pods: PodInfo[];
  faults: FaultDraft[];
  /** What the source lacked and the importer went around. Absent: nothing the layout tells. */
  gaps?: SourceGaps;
  /** Service that front-end-wide series were attached to, and how it was chosen. */
  frontend?: { service: string; chosen_by: string };
}

export type Progress = (message: string) => void;

export interface Importer<S extends z.ZodType = z.ZodType> {
  /** Registry name, the `--format` of the import command. */
  name: string;
  describe: string;
  /** Settings of this importer (zod, a doc comment per knob). */
  settings: S;
  /**
   * Checks the source's layout before reading: a missing required part is a LayoutError naming
   * it and what the format keeps there, a bad row a DataError (file:line); what can be imported
   * around goes to Telemetry.gaps.
   */
  import(src: string, settings: z.infer<S>, progress: Progress): Promise<Telemetry>;
}
