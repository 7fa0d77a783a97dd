import { describe, expect, it } from 'vitest';
import { createProgress, type ProgressStream } from '../src/progress';

function sink(isTTY: boolean): ProgressStream & { out: string } {
  const s = { isTTY, columns: 80, out: '', write: (c: string) => ((s.out += c), true) };
  return s;
}

describe('progress', () => {
  it('writes occasional plain lines when not on a terminal', () => {
    const stream = sink(false);
    let t = 0;
    const p = createProgress({ total: 100, label: 'eval', stream, everyPct: 25, everyMs: 1e9, now: () => t });
    for (let i = 1; i <= 100; i++) {
      t += 10;
      p.update(i);
    }
    p.finish('done');
    const lines = stream.out.trim().split('\n');
    // 1% (first), 26%, 51%, 76%, then the final line.
    expect(lines).toHaveLength(5);
    expect(stream.out).not.toContain('\r');
    expect(lines[4]).toMatch(/^eval 100\/100 100% 1s done$/);
  });

  it('writes a line after everyMs even without enough progress', () => {
    const stream = sink(false);
    let t = 0;
    const p = createProgress({ total: 1000, label: 'x', stream, everyPct: 50, everyMs: 1000, now: () => t });
    p.update(1);
    t = 500;
    p.update(2);
    t = 1200;
    p.update(3);
    expect(stream.out.trim().split('\n')).toHaveLength(2);
  });

  it('redraws one line in place on a terminal, with a bar and an eta', () => {
    const stream = sink(true);
    let t = 0;
    const p = createProgress({ total: 4, label: 'eval', stream, now: () => t });
    t = 1000;
    p.update(1, 'R@1 0.5');
    t = 2000;
    p.update(2);
    expect(stream.out).toContain('\r\x1b[K');
    expect(stream.out).not.toContain('\n');
    expect(stream.out).toContain('[######..................] 1/4 25% 1s eta 3s R@1 0.5');
    t = 3000;
    p.update(4);
    p.finish();
    expect(stream.out.endsWith('\r\x1b[Keval [########################] 4/4 100% 3s\n')).toBe(true);
  });

  it('cuts the line to the terminal width', () => {
    const stream = { ...sink(true), columns: 20 };
    const p = createProgress({ total: 2, label: 'a-long-label', stream, now: () => 0 });
    p.update(2, 'a very long note that does not fit');
    const drawn = stream.out.split('\r\x1b[K').filter(Boolean);
    expect(drawn.every((l) => l.length <= 19)).toBe(true);
  });

  it("times from startedAt, and leaves a resumed run's earlier count out of the rate", () => {
    const stream = sink(false);
    let t = 16_000;
    // A stage of 12 steps resumed after 6; the first step after the resume took 6 s.
    const resumed = createProgress({ total: 12, label: 'priming', stream, everyPct: 0, now: () => t, done: 6 });
    t = 22_000;
    resumed.update(7);
    expect(stream.out).toBe('priming 7/12 58% 6s eta 30s\n');
    // An SFT loop learns its total from its first update's record, 16 s after it began.
    const sft = createProgress({ total: 7, label: 'sft', stream, everyPct: 0, now: () => t, startedAt: 6_000 });
    sft.update(1);
    expect(stream.out.split('\n')[1]).toBe('sft 1/7 14% 16s eta 1m36s');
  });
});
