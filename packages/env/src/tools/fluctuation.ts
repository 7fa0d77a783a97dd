/** n-sigma fluctuation of one metric series around a time (ThinkFL Eq. 6-7). */
import type { MetricSeries } from '../types';
import type { ToolSettings } from './settings';

export interface FluctuationWindow {
  tS: number;
  deltaS: number;
  baselineS: number;
  nSigma: number;
  minBaselinePoints: number;
  stdFloorRatio: number;
}

/** The window the tool settings give around tS (seconds): the one definition search_fluctuating_metrics and the protocols' sketches share. */
export function fluctuationWindow(
  tools: Pick<ToolSettings, 'metric_delta_s' | 'baseline_window_s' | 'n_sigma' | 'min_baseline_points' | 'std_floor_ratio'>,
  tS: number,
): FluctuationWindow {
  return {
    tS,
    deltaS: tools.metric_delta_s,
    baselineS: tools.baseline_window_s,
    nSigma: tools.n_sigma,
    minBaselinePoints: tools.min_baseline_points,
    stdFloorRatio: tools.std_floor_ratio,
  };
}

export interface Fluctuation {
  component: string;
  level: MetricSeries['level'];
  metric: string;
  /** Regular mean and std over the baseline window outside [t - delta, t + delta]. */
  mean: number;
  std: number;
  /** Signed deviation, in sigmas, of the value farthest from the mean. */
  max_deviation_sigma: number;
  peak_value: number;
  /** Unix seconds of the peak value. */
  peak_ts: number;
  /** Values in [t - delta, t + delta] and their Unix-second times. */
  ts: number[];
  values: number[];
}

/** First index with ts[i] >= x. */
function lowerBound(ts: Float64Array, x: number): number {
  let lo = 0;
  let hi = ts.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (ts[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * The series' fluctuation around t, or undefined when it has no inspected values or too few
 * baseline points. Whether it breaks the band is |max_deviation_sigma| > nSigma.
 */
export function measureFluctuation(s: MetricSeries, w: FluctuationWindow): Fluctuation | undefined {
  const from = lowerBound(s.ts, w.tS - w.baselineS);
  const lo = lowerBound(s.ts, w.tS - w.deltaS);
  const hi = lowerBound(s.ts, w.tS + w.deltaS + 1e-9);
  const to = lowerBound(s.ts, w.tS + w.baselineS + 1e-9);
  if (hi <= lo) return undefined;
  let n = 0;
  let sum = 0;
  let sq = 0;
  for (let i = from; i < to; i++) {
    if (i >= lo && i < hi) continue;
    const v = s.values[i];
    if (!Number.isFinite(v)) continue;
    n++;
    sum += v;
    sq += v * v;
  }
  if (n < w.minBaselinePoints) return undefined;
  const mean = sum / n;
  const std = Math.sqrt(Math.max(0, sq / n - mean * mean));
  const sigma = Math.max(std, w.stdFloorRatio * Math.abs(mean), 1e-12);
  let best = -1;
  let dev = 0;
  const ts: number[] = [];
  const values: number[] = [];
  for (let i = lo; i < hi; i++) {
    const v = s.values[i];
    ts.push(s.ts[i]);
    values.push(v);
    if (!Number.isFinite(v)) continue;
    const d = (v - mean) / sigma;
    if (best < 0 || Math.abs(d) > Math.abs(dev)) {
      best = i;
      dev = d;
    }
  }
  if (best < 0) return undefined;
  return {
    component: s.component,
    level: s.level,
    metric: s.name,
    mean,
    std,
    max_deviation_sigma: dev,
    peak_value: s.values[best],
    peak_ts: s.ts[best],
    ts,
    values,
  };
}
