/**
 * Nezha fault list: `{hour: [{inject_time, inject_timestamp, inject_pod, inject_type}]}`.
 * `inject_time` read as UTC is the truth (it agrees with file names and span times);
 * `inject_timestamp` is about 8 h off for most faults of 2023-01-29 and once duplicates another
 * fault's, so each disagreement is recorded in the fault's notes.
 */
import { readFileSync } from 'node:fs';
import { jsonError, parseJson, type JsonPath } from '../json';
import { serviceOfDeploymentPod } from '../names';
import { isoUs, utcSeconds } from '../time';
import type { FaultDraft } from '../cases';

interface RawFault {
  inject_time: string;
  inject_timestamp: string;
  inject_pod: string;
  inject_type: string;
}

export function readNezhaFaults(
  file: string,
  windowSec: number,
  toleranceSec: number,
  nodeOfPod: (pod: string) => string | undefined,
): FaultDraft[] {
  const text = readFileSync(file, 'utf8');
  const doc = parseJson(file, text);
  const bad = (path: JsonPath, message: string) => jsonError(file, text, path, message);
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw bad([], 'not a map of hour -> list of faults');
  const byHour = doc as Record<string, unknown>;
  const raw: { f: RawFault; path: JsonPath }[] = [];
  for (const hour of Object.keys(byHour).sort()) {
    const list = byHour[hour];
    if (!Array.isArray(list)) throw bad([hour], 'not a list of faults');
    list.forEach((f: unknown, i) => {
      if (typeof f !== 'object' || f === null || Array.isArray(f)) throw bad([hour, i], 'not a fault object');
      raw.push({ f: f as RawFault, path: [hour, i] });
    });
  }
  const stampOwners = new Map<string, string>();
  return raw.map(({ f, path }) => {
    for (const k of ['inject_time', 'inject_timestamp', 'inject_pod', 'inject_type'] as const) {
      if (typeof f[k] !== 'string' || !f[k]) throw bad(path, `missing ${k}`);
    }
    const at = utcSeconds(f.inject_time);
    if (at === undefined) throw bad([...path, 'inject_time'], `'${f.inject_time}' is not YYYY-MM-DD HH:MM:SS`);
    const stamp = Number(f.inject_timestamp);
    if (!Number.isFinite(stamp)) throw bad([...path, 'inject_timestamp'], `'${f.inject_timestamp}' is not a number`);
    const id = `nezha-${f.inject_time.replace(/\D/g, '').replace(/^(\d{8})/, '$1-')}`;
    const notes: string[] = [];
    const off = at - stamp;
    if (Math.abs(off) > toleranceSec) {
      notes.push(
        `inject_timestamp ${f.inject_timestamp} (${isoUs(stamp * 1e6)}) disagrees with inject_time ${f.inject_time} UTC by ${off} s; inject_time used`,
      );
    }
    const owner = stampOwners.get(f.inject_timestamp);
    if (owner) notes.push(`inject_timestamp ${f.inject_timestamp} duplicates that of fault ${owner}`);
    else stampOwners.set(f.inject_timestamp, id);
    const pod = f.inject_pod;
    const node = nodeOfPod(pod);
    return {
      id,
      truth: { level: 'pod', pod, service: serviceOfDeploymentPod(pod), ...(node ? { node } : {}) },
      type: f.inject_type,
      start_us: at * 1e6,
      end_us: (at + windowSec) * 1e6,
      notes,
    };
  });
}
