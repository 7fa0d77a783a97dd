/**
 * TensorBoard event files written by EventFileWriter, read back by TensorBoard's own reader
 * (EventAccumulator from the pinned tensorboard package): tags, steps and float32 values,
 * NaN kept, and a restart that supersedes what a killed process logged for replayed steps.
 * The framing's CRC-32C is checked against the standard check value.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { crc32c, EventFileWriter, maskedCrc32c } from '../src/logs/tensorboard';
import { ensureTensorboard, readTensorboardScalars } from '../../../testkit/tensorboard';

const dir = mkdtempSync(join(tmpdir(), 'tb-'));
beforeAll(() => {
  ensureTensorboard();
}, 600_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('TensorBoard event files', () => {
  it('frames records with CRC-32C (Castagnoli): the check value of "123456789" is 0xE3069283', () => {
    expect(crc32c(Buffer.from('123456789'))).toBe(0xe3069283);
    expect(crc32c(new Uint8Array(32))).toBe(0x8a9136aa); // RFC 3720 B.4: 32 bytes of zeros
    const c = 0xe3069283;
    expect(maskedCrc32c(Buffer.from('123456789'))).toBe((((c >>> 15) | (c << 17)) + 0xa282ead8) >>> 0);
  });

  it('TensorBoard reads back every tag, step and value', () => {
    const logDir = join(dir, 'plain');
    const w = new EventFileWriter(logDir);
    w.scalars(1, { 'sft/train/loss': 2.5, 'sft/lr': 0.005 });
    w.scalars(2, { 'priming/reward/mean': 0.125, 'priming/train/loss': Number.NaN, 'eval/priming/per_fault/service/R@1': 1 / 3 });
    w.scalars(3, { 'priming/reward/mean': -0.75 });
    expect(readdirSync(logDir)).toEqual([expect.stringMatching(/^events\.out\.tfevents\.\d+\..+\.\d+$/)]);
    const got = readTensorboardScalars(logDir);
    expect(Object.keys(got).sort()).toEqual([
      'eval/priming/per_fault/service/R@1',
      'priming/reward/mean',
      'priming/train/loss',
      'sft/lr',
      'sft/train/loss',
    ]);
    expect(got['sft/train/loss']).toEqual([[1, 2.5]]);
    expect(got['priming/reward/mean']).toEqual([
      [2, 0.125],
      [3, -0.75],
    ]);
    expect(got['priming/train/loss']).toEqual([[2, null]]);
    expect(got['sft/lr'][0][1]).toBeCloseTo(0.005, 7); // float32
    expect(got['eval/priming/per_fault/service/R@1'][0][1]).toBeCloseTo(1 / 3, 7);
  });

  it('a restart at step s supersedes the steps from s on that an earlier process logged', () => {
    const logDir = join(dir, 'resumed');
    const first = new EventFileWriter(logDir, () => 1_000_000);
    for (let step = 1; step <= 4; step++) first.scalars(step, { 'priming/reward/mean': step });
    // The resumed process counts 2 lines as done: steps 3 and 4 are played again.
    const second = new EventFileWriter(logDir, () => 2_000_000);
    second.restart(3);
    second.scalars(3, { 'priming/reward/mean': 30 });
    second.scalars(4, { 'priming/reward/mean': 40 });
    expect(readTensorboardScalars(logDir)['priming/reward/mean']).toEqual([
      [1, 1],
      [2, 2],
      [3, 30],
      [4, 40],
    ]);
  });
});
