/**
 * OpenRCA scoring (microsoft/OpenRCA `main/evaluate.py`, used by RCAFlow, ../shared/seeds/004):
 * a query's scoring points name, per failure, its occurrence time (within 60 s), component and
 * reason (exact strings); the prediction is JSON-like text read with the reference's regular
 * expressions, including their quirks (keys only in the order datetime, component, reason; `{}`
 * is one empty prediction). A wrong number of predictions scores 0; otherwise the best
 * permutation of predictions counts. Score = points matched / points, rounded to 2 decimals
 * as Python's round() does; Correct means score 1.
 */

export interface OpenRcaPrediction {
  datetime: string;
  component: string;
  reason: string;
}

export interface OpenRcaPoints {
  times: string[];
  components: string[];
  reasons: string[];
}

export interface OpenRcaScore {
  /** Scoring points matched by the best permutation (in the order the reference lists them). */
  passed: string[];
  /** The other scoring points, distinct. */
  failed: string[];
  /** Points matched / points, rounded to 2 decimals (half to even on the binary value). */
  score: number;
  /** score === 1. */
  correct: boolean;
  predictions: number;
}

// The reference's predict_pattern, unchanged: each key optional, in this order only.
const PREDICT =
  /\{\s*(?:"root cause occurrence datetime":\s*"(.*?)")?,?\s*(?:"root cause component":\s*"(.*?)")?,?\s*(?:"root cause reason":\s*"(.*?)")?\s*\}/g;
const COMPONENT = /The (?:\d+-th|only) predicted root cause component is ([^\n]+)/g;
const REASON = /The (?:\d+-th|only) predicted root cause reason is ([^\n]+)/g;
const TIME = /The (?:\d+-th|only) root cause occurrence time is within 1 minutes \(i\.e\., <=1min\) of ([^\n]+)/g;

/** Every `{...}` the reference's pattern finds, empty groups as ''. */
export function parseOpenRcaPrediction(text: string): OpenRcaPrediction[] {
  return [...text.matchAll(PREDICT)].map((m) => ({ datetime: m[1] ?? '', component: m[2] ?? '', reason: m[3] ?? '' }));
}

export function parseScoringPoints(text: string): OpenRcaPoints {
  const all = (re: RegExp): string[] => [...text.matchAll(re)].map((m) => m[1]);
  return { times: all(TIME), components: all(COMPONENT), reasons: all(REASON) };
}

const STRPTIME = /^(\d{4})-(\d{1,2})-(\d{1,2}) (\d{1,2}):(\d{1,2}):(\d{1,2})$/;

/** Seconds of a "%Y-%m-%d %H:%M:%S" time as Python's strptime reads it; undefined where it raises. */
export function strptimeSeconds(text: string): number | undefined {
  const m = STRPTIME.exec(text);
  if (!m) return undefined;
  const [y, mo, d, h, mi, s] = m.slice(1).map(Number);
  if (mo < 1 || mo > 12 || h > 23 || mi > 59 || s > 61) return undefined;
  const ms = Date.UTC(y, mo - 1, d, h, mi, s);
  if (new Date(ms).getUTCDate() !== d) return undefined;
  return ms / 1000;
}

/** Both times parse and lie at most 60 s apart (the reference's time_difference). */
export function withinOneMinute(expected: string, predicted: string): boolean {
  const a = strptimeSeconds(expected);
  const b = strptimeSeconds(predicted);
  return a !== undefined && b !== undefined && Math.abs(a - b) <= 60;
}

/** Python's round(x, 2): to the nearest hundredth of the double's exact value, ties to even. */
export function pyRound2(x: number): number {
  const [int, frac = ''] = Math.abs(x).toFixed(60).split('.');
  const hundredths = Number(int) * 100 + Number(frac.slice(0, 2));
  const rest = frac.slice(2);
  const tie = /^50*$/.test(rest);
  const up = rest[0] >= '5' && !tie;
  const q = up || (tie && hundredths % 2 === 1) ? hundredths + 1 : hundredths;
  return (Math.sign(x) || 1) * (q / 100);
}

function* permutations<T>(items: T[]): Generator<T[]> {
  if (items.length <= 1) {
    yield [...items];
    return;
  }
  for (let i = 0; i < items.length; i++) {
    const rest = [...items.slice(0, i), ...items.slice(i + 1)];
    for (const p of permutations(rest)) yield [items[i], ...p];
  }
}

/** Most predictions scored by permutation (n! orders); a longer answer is a configuration error here. */
export const MAX_OPENRCA_PERMUTED = 8;

export function scoreOpenRca(prediction: string, scoringPoints: string): OpenRcaScore {
  const preds = parseOpenRcaPrediction(prediction);
  const { times, components, reasons } = parseScoringPoints(scoringPoints);
  const n = Math.max(times.length, components.length, reasons.length);
  const points = times.length + components.length + reasons.length;
  if (points === 0)
    throw new Error(`OpenRCA scoring points name no time, component or reason: ${JSON.stringify(scoringPoints.slice(0, 200))}`);
  let best = 0;
  let passed: string[] = [];
  if (n === preds.length) {
    if (n > MAX_OPENRCA_PERMUTED)
      throw new Error(`OpenRCA query with ${n} failures: at most ${MAX_OPENRCA_PERMUTED} are scored by permutation`);
    let bestSoFar = -1;
    for (const perm of permutations(preds)) {
      let score = 0;
      const pass: string[] = [];
      for (let i = 0; i < n; i++) {
        if (components.length === n && perm[i].component === components[i]) {
          score++;
          pass.push(components[i]);
        }
        if (reasons.length === n && perm[i].reason === reasons[i]) {
          score++;
          pass.push(reasons[i]);
        }
        if (times.length === n && withinOneMinute(times[i], perm[i].datetime)) {
          score++;
          pass.push(times[i]);
        }
      }
      if (score > bestSoFar) {
        bestSoFar = score;
        passed = pass;
      }
    }
    best = bestSoFar;
  }
  const passedSet = new Set(passed);
  const failed = [...new Set([...components, ...reasons, ...times])].filter((p) => !passedSet.has(p));
  const score = pyRound2(best / points);
  return { passed, failed, score, correct: score === 1, predictions: preds.length };
}
