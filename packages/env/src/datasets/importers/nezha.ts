/**
 * Nezha TrainTicket importer (IntelligentDDS/Nezha layout, one day): traces, metrics and logs
 * of rca_data/<date>, fault-free traces of construct_data/<date> as the baseline, and the
 * day's fault list. Quirks handled: µs durations vs ns times, wrong inject_timestamp,
 * service = pod less its last two dash segments, pod -> node from the logs' Node column
 * (completed from identical Node* metric series). The layout is checked first (nezha-layout);
 * front_service.csv goes to the front-end service: the setting, or the service of the entry spans.
 */
import { basename } from 'node:path';
import { z } from 'zod';
import type { Span } from '../../types';
import { SettingsError } from '../errors';
import { serviceOfDeploymentPod } from '../names';
import type { Importer } from '../telemetry';
import { readNezhaFaults } from './nezha-faults';
import { nezhaLayout } from './nezha-layout';
import { readNezhaLogs } from './nezha-logs';
import { readNezhaMetrics } from './nezha-metrics';
import { openNezha } from './nezha-source';
import { readNezhaSpans } from './nezha-spans';

export const NezhaSettings = z
  .object({
    /** Day to import, YYYY-MM-DD; names the tgz files and the data folders. Default 2023-01-29. */
    date: z
      .string()
      .regex(/^\d{4}-\d{2}-\d{2}$/)
      .default('2023-01-29')
      .describe('Day to import, YYYY-MM-DD; names the tgz files and the data folders. Default 2023-01-29.'),
    /** Length of a fault window after inject_time, in seconds (faults last about 3 minutes). Default 180. */
    fault_window_sec: z
      .number()
      .positive()
      .default(180)
      .describe('Length of a fault window after inject_time, in seconds (faults last about 3 minutes). Default 180.'),
    /** inject_timestamp agrees with inject_time when within this many seconds. Default 60. */
    inject_tolerance_sec: z
      .number()
      .nonnegative()
      .default(60)
      .describe('inject_timestamp agrees with inject_time when within this many seconds. Default 60.'),
    /**
     * Service that front_service.csv (the whole 'Frontend') is attached to. Default: the service
     * of the entry spans (ts-gateway-service on TrainTicket, frontend on Online Boutique), when
     * one service holds most of them; otherwise it must be set.
     */
    frontend_service: z
      .string()
      .min(1)
      .optional()
      .describe(
        "Service that front_service.csv (the whole 'Frontend') is attached to. Default: the service of the entry spans " +
          '(ts-gateway-service on TrainTicket, frontend on Online Boutique), when one service holds most of them; otherwise it must be set.',
      ),
    /** Import the logs (rca_data/<date>/log, 133 MB for 2023-01-29). Default true. */
    logs: z.boolean().default(true).describe('Import the logs (rca_data/<date>/log, 133 MB for 2023-01-29). Default true.'),
  })
  .strict();

/** The front-end: the setting, or the service holding most entry spans; none when there are no entry spans. */
function frontendOf(setting: string | undefined, spans: Span[]): { service: string; chosen_by: string } | undefined {
  if (setting) return { service: setting, chosen_by: 'setting importer.frontend_service' };
  const count = new Map<string, number>();
  let total = 0;
  for (const s of spans) {
    if (s.parent_id !== null) continue;
    count.set(s.service, (count.get(s.service) ?? 0) + 1);
    total++;
  }
  if (total === 0) return undefined;
  const ranked = [...count].sort((a, b) => b[1] - a[1]);
  if (ranked[0][1] * 2 > total) {
    return { service: ranked[0][0], chosen_by: `detected: the service of ${ranked[0][1]} of the ${total} entry spans` };
  }
  const seen = ranked
    .slice(0, 5)
    .map(([svc, n]) => `${svc} (${n})`)
    .join(', ');
  throw new SettingsError(
    `importer.frontend_service: front_service.csv's series need the front-end service, and no service holds most entry spans ` +
      `(${seen}); set it`,
  );
}

export const nezha: Importer<typeof NezhaSettings> = {
  name: 'nezha',
  describe: 'Nezha TrainTicket (rca_data + construct_data of one day, tgz or extracted)',
  settings: NezhaSettings,
  async import(src, s, progress) {
    progress(`opening ${src} for ${s.date}`);
    const tree = await openNezha(src, s.date, s.logs);
    try {
      const layout = nezhaLayout(tree, s.date, s.logs);
      const logs = layout.logFiles.length
        ? await readNezhaLogs(layout.logFiles, (f) => progress(`logs ${basename(f)}`))
        : { nodeOfPod: new Map<string, string>(), templates: { templates: [] }, records: [], badTimes: 0, corrupt: [] };
      if (logs.badTimes) progress(`logs: ${logs.badTimes} rows with an overflowed TimeUnixNano timed by their Timestamp`);
      if (logs.corrupt.length) progress(`logs: skipped ${logs.corrupt.length} corrupt rows (first ${logs.corrupt[0]})`);
      const spans: Span[] = [];
      for (const file of layout.traceFiles) {
        progress(`traces ${basename(file)}`);
        await readNezhaSpans(file, spans);
      }
      const hasFront = layout.metricFiles.some((f) => basename(f) === 'front_service.csv');
      const frontend = hasFront ? frontendOf(s.frontend_service, spans) : undefined;
      if (frontend) progress(`front-end service ${frontend.service} (${frontend.chosen_by})`);
      const parts = [...layout.gaps.parts];
      if (hasFront && !frontend)
        parts.push('front_service.csv left out: no entry span tells the front-end service (set importer.frontend_service)');
      progress('metrics');
      const metrics = await readNezhaMetrics(layout.metricFiles, frontend?.service, logs.nodeOfPod);
      if (metrics.inferred.length) progress(`metrics: ${metrics.inferred.length} pods placed on a node by their Node* series`);
      const nodeOf = (pod: string) => metrics.nodeOfPod.get(pod);
      const baselineSpans: Span[] = [];
      for (const file of layout.baselineFiles) await readNezhaSpans(file, baselineSpans);
      const faults = readNezhaFaults(layout.faultList, s.fault_window_sec, s.inject_tolerance_sec, nodeOf);
      const metricPods = new Set(metrics.series.filter((m) => m.level === 'pod').map((m) => m.component));
      const unmeasured = [...new Set(spans.map((x) => x.pod))].filter((p) => !metricPods.has(p)).sort();
      if (unmeasured.length) {
        const some = `${unmeasured.slice(0, 5).join(', ')}${unmeasured.length > 5 ? ', ...' : ''}`;
        parts.push(`metric files missing for ${unmeasured.length} pods seen in the traces (${some}): the dataset has no metrics for them`);
      }
      const podNames = new Set([...spans.map((x) => x.pod), ...metricPods]);
      const pods = [...podNames].map((pod) => {
        const node = nodeOf(pod);
        return { pod, service: serviceOfDeploymentPod(pod), ...(node ? { node } : {}) };
      });
      return {
        spans,
        baselineSpans,
        metrics: metrics.series,
        logs: { templates: logs.templates.templates, records: logs.records },
        pods,
        faults,
        gaps: { ...layout.gaps, parts },
        ...(frontend ? { frontend } : {}),
      };
    } finally {
      tree.dispose();
    }
  },
};
