/**
 * Nezha TrainTicket importer (IntelligentDDS/Nezha layout, one day): traces, metrics and logs
 * of rca_data/<date>, fault-free traces of construct_data/<date> as the baseline, and the
 * day's fault list. Quirks handled: µs durations vs ns times, wrong inject_timestamp,
 * service = pod less its last two dash segments, pod -> node from the logs' Node column
 * (completed from identical Node* metric series).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import type { Importer } from '../telemetry';
import { readNezhaFaults } from './nezha-faults';
import { readNezhaLogs } from './nezha-logs';
import { readNezhaMetrics } from './nezha-metrics';
import { openNezha } from './nezha-source';
import { csvFiles, readNezhaSpans, readNezhaSpanDir } from './nezha-spans';
import { serviceOfDeploymentPod } from '../names';
import type { Span } from '../../types';

export const NezhaSettings = z
  .object({
    /** Day to import, YYYY-MM-DD; names the tgz files and the data folders. Default 2023-01-29. */
    date: z.string().regex(/^\d{4}-\d{2}-\d{2}$/).default('2023-01-29'),
    /** Length of a fault window after inject_time, in seconds (faults last about 3 minutes). Default 180. */
    faultWindowSec: z.number().positive().default(180),
    /** inject_timestamp agrees with inject_time when within this many seconds. Default 60. */
    injectToleranceSec: z.number().nonnegative().default(60),
    /** Service that front_service.csv (the whole 'Frontend') is attached to. Default ts-ui-dashboard. */
    frontendService: z.string().min(1).default('ts-ui-dashboard'),
    /** Import the logs (rca_data/<date>/log, 133 MB for 2023-01-29). Default true. */
    logs: z.boolean().default(true),
  })
  .strict();

export const nezha: Importer<typeof NezhaSettings> = {
  name: 'nezha',
  describe: 'Nezha TrainTicket (rca_data + construct_data of one day, tgz or extracted)',
  settings: NezhaSettings,
  async import(src, s, progress) {
    progress(`opening ${src} for ${s.date}`);
    const tree = await openNezha(src, s.date, s.logs);
    try {
      const logDir = join(tree.rca, 'log');
      const logs =
        s.logs && existsSync(logDir)
          ? await readNezhaLogs(logDir, (f) => progress(`logs ${f.split('/').pop()}`))
          : { nodeOfPod: new Map<string, string>(), templates: { templates: [] }, records: [], badTimes: 0, corrupt: [] };
      if (logs.badTimes) progress(`logs: ${logs.badTimes} warn/error rows with an overflowed TimeUnixNano timed by their Timestamp`);
      if (logs.corrupt.length) progress(`logs: skipped ${logs.corrupt.length} corrupt rows (first ${logs.corrupt[0]})`);
      progress('metrics');
      const metrics = await readNezhaMetrics(join(tree.rca, 'metric'), s.frontendService, logs.nodeOfPod);
      if (metrics.inferred.length) progress(`metrics: ${metrics.inferred.length} pods placed on a node by their Node* series`);
      const nodeOf = (pod: string) => metrics.nodeOfPod.get(pod);
      const spans: Span[] = [];
      for (const file of csvFiles(join(tree.rca, 'trace'))) {
        progress(`traces ${file.split('/').pop()}`);
        await readNezhaSpans(file, spans);
      }
      const baselineSpans = await readNezhaSpanDir(join(tree.construct, 'trace'));
      const faults = readNezhaFaults(join(tree.rca, `${s.date}-fault_list.json`), s.faultWindowSec, s.injectToleranceSec, nodeOf);
      const podNames = new Set([...spans.map((x) => x.pod), ...metrics.series.filter((m) => m.level === 'pod').map((m) => m.component)]);
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
      };
    } finally {
      tree.dispose();
    }
  },
};
