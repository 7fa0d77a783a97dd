/**
 * Gaps: parts and stretches of a source that are missing but can be imported around. An
 * importer reports what its layout tells it (SourceGaps); for a source that declares no
 * recording, long silences between its spans are the gaps. Each fault whose window touches a
 * trace gap gets what it lost.
 */
import type { DatasetGaps, Fault, FaultGap, Span, TimeGap } from '../types';
import { isoUs } from './time';

export interface Interval {
  from_us: number;
  to_us: number;
}

/** Trace coverage of a source: where it recorded, and where its own layout says traces are missing. */
export interface TraceCoverage {
  recorded: Interval[];
  missing: TimeGap[];
}

export interface SourceGaps {
  /** Set when the format keeps fault-free traces and the source lacks them: what is missing. */
  baseline?: string;
  /** Absent: the import finds the silences of the spans instead. */
  traces?: TraceCoverage;
  logs?: TimeGap[];
  /** Other missing parts, each saying what is missing and what the dataset lacks for it. */
  parts?: string[];
}

/** Stretches longer than `maxSilenceUs` between consecutive span starts are missing; the rest is recorded. */
export function silences(spans: Span[], maxSilenceUs: number): TraceCoverage {
  const starts = Float64Array.from(spans, (s) => s.start_us).sort();
  const recorded: Interval[] = [];
  const missing: TimeGap[] = [];
  if (!starts.length) return { recorded, missing };
  let from = starts[0];
  for (let i = 1; i < starts.length; i++) {
    if (starts[i] - starts[i - 1] <= maxSilenceUs) continue;
    recorded.push({ from_us: from, to_us: starts[i - 1] });
    const minutes = ((starts[i] - starts[i - 1]) / 60e6).toFixed(1);
    missing.push({ from_us: starts[i - 1], to_us: starts[i], what: `no span starts for ${minutes} min` });
    from = starts[i];
  }
  recorded.push({ from_us: from, to_us: starts[starts.length - 1] });
  return { recorded, missing };
}

function merged(list: Interval[]): Interval[] {
  const out: Interval[] = [];
  for (const x of [...list].sort((a, b) => a.from_us - b.from_us)) {
    const last = out[out.length - 1];
    if (last && x.from_us <= last.to_us) last.to_us = Math.max(last.to_us, x.to_us);
    else out.push({ from_us: x.from_us, to_us: x.to_us });
  }
  return out;
}

function overlapUs(w: Interval, list: Interval[]): number {
  let n = 0;
  for (const x of list) n += Math.max(0, Math.min(w.to_us, x.to_us) - Math.max(w.from_us, x.from_us));
  return n;
}

/**
 * Faults whose window touches a trace gap. `flagged[i]` counts fault i's anomalous requests
 * (those the rule keeps, before the cap `maxCases`); the lost cases are that count per recorded
 * second times the missing seconds, within the cap.
 */
export function faultGaps(faults: Fault[], flagged: number[], maxCases: number, traces: TraceCoverage): FaultGap[] {
  const missing = merged(traces.missing);
  const recorded = merged(traces.recorded);
  const out: FaultGap[] = [];
  faults.forEach((f, i) => {
    const w = { from_us: f.start_us, to_us: f.end_us };
    const missingUs = overlapUs(w, missing);
    if (missingUs === 0) return;
    const recordedUs = overlapUs(w, recorded);
    const expected = recordedUs > 0 ? Math.min(maxCases, Math.round((flagged[i] * (recordedUs + missingUs)) / recordedUs)) : null;
    out.push({
      fault_id: f.id,
      missing_sec: Math.round(missingUs / 1e6),
      recorded_sec: Math.round(recordedUs / 1e6),
      cases: f.case_count,
      cases_lost: expected === null ? null : Math.max(0, expected - f.case_count),
    });
  });
  return out;
}

function stretch(g: { from_us: number; to_us: number }): string {
  const [a, b] = [isoUs(g.from_us), isoUs(g.to_us)];
  const whole = a.slice(17, 23) === '00.000' && b.slice(17, 23) === '00.000';
  const time = (iso: string) => iso.slice(11, whole ? 16 : 19);
  return `${a.slice(0, 10)} ${time(a)}-${b.slice(0, 10) === a.slice(0, 10) ? '' : `${b.slice(0, 10)} `}${time(b)} UTC`;
}

/** One line per gap, as the import prints them and the run report can show them (none for a dataset imported before gaps were kept). */
export function gapLines(g: DatasetGaps | undefined): string[] {
  const lines: string[] = [];
  if (!g) return lines;
  if (g.baseline) lines.push(`fault-free traces missing: ${g.baseline.missing}; baseline taken from ${g.baseline.fallback}`);
  for (const t of g.traces)
    lines.push(`traces missing for ${stretch(t)}: ${t.what}${t.requests === undefined ? '' : ` (${t.requests} requests listed)`}`);
  for (const l of g.logs) lines.push(`logs missing for ${stretch(l)}: ${l.what}`);
  lines.push(...g.parts);
  for (const f of g.faults) {
    const cost =
      f.cases_lost === null ? 'nothing of its window was recorded, so its lost cases cannot be estimated' : `about ${f.cases_lost} lost`;
    lines.push(
      `fault ${f.fault_id}: ${f.missing_sec} s of its window without traces (${f.recorded_sec} s recorded); ${f.cases} cases kept, ${cost}`,
    );
  }
  return lines;
}
