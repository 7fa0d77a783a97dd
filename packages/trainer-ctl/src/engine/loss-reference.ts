/**
 * TypeScript reference of the engine's GRPO/GSPO loss math (engine/thinkfl_engine/grpo_loss.py),
 * on ragged per-sequence arrays aligned with token ids. It exists to check the engine against
 * the shared test vectors and to let TypeScript code reason about losses without Python.
 */
import { LossSettingsSchema, type LossSettings, type LossSettingsInput } from './loss-settings';

export interface LossBatch {
  /** Current policy log-probabilities, per sequence, one per token id. */
  logp: number[][];
  old: number[][];
  /** Reference-model log-probabilities; needed when kl_coef > 0. */
  ref?: number[][];
  /** 1 where the model generated the token. */
  mask: number[][];
  /** One advantage per sequence. */
  advantages: number[];
}

export interface LossValues {
  loss: number;
  pg_loss: number;
  kl_loss: number;
  /** Token-mean of the chosen KL estimator (0 without a KL term). */
  kl: number;
  /** Fraction of generated tokens whose clipped surrogate was the active branch. */
  clip_fraction: number;
  /** Fraction of generated tokens capped by the dual clip. */
  dual_clip_fraction: number;
  /** Token-mean of the importance ratio pi/pi_old; exactly 1 on the first update of on-policy data. */
  ratio_mean: number;
}

export function klEstimate(d: number, estimator: LossSettings['kl_estimator']): number {
  if (estimator === 'k1') return d;
  if (estimator === 'k2') return 0.5 * d * d;
  return Math.exp(-d) + d - 1;
}

function aggregate(x: number[][], mask: number[][], s: Pick<LossSettings, 'aggregation' | 'norm_length'>): number {
  let total = 0;
  let tokens = 0;
  let seqMeans = 0;
  let seqs = 0;
  x.forEach((row, i) => {
    let rowSum = 0;
    let rowTokens = 0;
    row.forEach((v, t) => {
      if (mask[i][t]) {
        rowSum += v;
        rowTokens += 1;
      }
    });
    total += rowSum;
    tokens += rowTokens;
    if (rowTokens > 0) {
      seqMeans += rowSum / rowTokens;
      seqs += 1;
    }
  });
  if (s.aggregation === 'token-mean') return total / Math.max(tokens, 1);
  if (s.aggregation === 'seq-mean-token-mean') return seqMeans / Math.max(seqs, 1);
  // Dr.GRPO's B counts sequences with a generated token: an empty one adds nothing to the sum.
  return total / (Math.max(seqs, 1) * (s.norm_length as number));
}

const tokenMean = (x: number[][], mask: number[][]) => aggregate(x, mask, { aggregation: 'token-mean', norm_length: null });

function checkShapes(b: LossBatch, needRef: boolean): void {
  const n = b.logp.length;
  if (b.old.length !== n || b.mask.length !== n || b.advantages.length !== n || (needRef && b.ref?.length !== n)) {
    throw new Error(`loss batch: logp, old, mask, advantages${needRef ? ', ref' : ''} must all have ${n} sequences`);
  }
  b.logp.forEach((row, i) => {
    const others = [b.old[i], b.mask[i], ...(needRef ? [b.ref![i]] : [])];
    if (others.some((o) => o.length !== row.length)) throw new Error(`loss batch: sequence ${i} has ragged per-token arrays`);
  });
}

export function grpoLossReference(batch: LossBatch, settings: LossSettingsInput = {}): LossValues {
  const s = LossSettingsSchema.parse(settings);
  const useKl = s.kl_coef !== 0;
  if (useKl && !batch.ref) throw new Error('kl_coef > 0 needs reference log-probabilities');
  checkShapes(batch, useKl);
  const pg: number[][] = [];
  const clipped: number[][] = [];
  const dual: number[][] = [];
  const kl: number[][] = [];
  const ratios: number[][] = [];
  batch.logp.forEach((lp, i) => {
    const a = batch.advantages[i];
    const m = batch.mask[i];
    let logRatioSum = 0;
    let n = 0;
    lp.forEach((x, t) => {
      if (m[t]) {
        logRatioSum += x - batch.old[i][t];
        n += 1;
      }
    });
    const seqRatio = Math.exp(logRatioSum / Math.max(n, 1));
    const rowPg: number[] = [];
    const rowClip: number[] = [];
    const rowDual: number[] = [];
    const rowKl: number[] = [];
    const rowRatio: number[] = [];
    lp.forEach((x, t) => {
      const r = s.ratio_level === 'sequence' ? seqRatio : Math.exp(x - batch.old[i][t]);
      rowRatio.push(r);
      const unclipped = -a * r;
      const clippedLoss = -a * Math.min(Math.max(r, 1 - s.eps_low), 1 + s.eps_high);
      let loss = Math.max(unclipped, clippedLoss);
      rowClip.push(clippedLoss > unclipped ? 1 : 0);
      let dualActive = 0;
      if (s.dual_clip !== null && a < 0) {
        const bound = -a * s.dual_clip;
        dualActive = bound < loss ? 1 : 0;
        loss = Math.min(loss, bound);
      }
      rowDual.push(dualActive);
      rowPg.push(loss);
      rowKl.push(useKl ? klEstimate(x - batch.ref![i][t], s.kl_estimator) : 0);
    });
    pg.push(rowPg);
    clipped.push(rowClip);
    dual.push(rowDual);
    kl.push(rowKl);
    ratios.push(rowRatio);
  });
  const pgLoss = aggregate(pg, batch.mask, s);
  const klLoss = useKl ? s.kl_coef * aggregate(kl, batch.mask, s) : 0;
  return {
    loss: pgLoss + klLoss,
    pg_loss: pgLoss,
    kl_loss: klLoss,
    kl: useKl ? tokenMean(kl, batch.mask) : 0,
    clip_fraction: tokenMean(clipped, batch.mask),
    dual_clip_fraction: tokenMean(dual, batch.mask),
    ratio_mean: tokenMean(ratios, batch.mask),
  };
}
