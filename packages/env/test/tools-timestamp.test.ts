import { describe, expect, it } from 'vitest';
import { boundItems, boundText, parseTimestamp, parseToolSettings, SpanAliases, TIMESTAMP_FORMATS } from '../src/tools/index';

const all = TIMESTAMP_FORMATS;
const us = 1674981768697000; // 2023-01-29T08:42:48.697Z, a real Nezha span start

describe('parseTimestamp', () => {
  it('reads one instant given in s, ms, µs, ns and ISO-8601 the same', () => {
    const forms: unknown[] = [
      1674981768.697,
      1674981768697,
      us,
      us * 1000,
      '1674981768697',
      '2023-01-29T08:42:48.697Z',
      '2023-01-29 08:42:48.697',
    ];
    for (const f of forms) expect(parseTimestamp(f, all)).toMatchObject({ ok: true, us });
    expect(parseTimestamp('2023-01-29T09:42:48.697+01:00', all)).toMatchObject({ ok: true, us });
    expect(parseTimestamp('2023-01-29T08:42:48.697123Z', all)).toMatchObject({ ok: true, us: us + 123 });
  });
  it('names the unit it read', () => {
    expect(parseTimestamp(1674981768, all)).toMatchObject({ format: 'unix_s' });
    expect(parseTimestamp(us * 1000, all)).toMatchObject({ format: 'unix_ns' });
  });
  it('refuses unparsable, negative and non-accepted forms with a readable error', () => {
    expect(parseTimestamp('yesterday', all)).toMatchObject({ ok: false, error: expect.stringMatching(/cannot read timestamp/) });
    expect(parseTimestamp(-5, all)).toMatchObject({ ok: false });
    expect(parseTimestamp(Number.NaN, all)).toMatchObject({ ok: false });
    expect(parseTimestamp({ t: 1 }, all)).toMatchObject({ ok: false, error: expect.stringMatching(/number or a string/) });
    expect(parseTimestamp('2023-01-29T08:42:48Z', ['unix_s'])).toMatchObject({ ok: false, error: expect.stringMatching(/not accepted/) });
    expect(parseTimestamp(us, ['unix_s'])).toMatchObject({ ok: false, error: expect.stringMatching(/unix_us/) });
    expect(parseTimestamp('2023-13-45T99:00:00Z', all)).toMatchObject({ ok: false });
  });
});

describe('SpanAliases', () => {
  it('gives short stable aliases and resolves them back when enabled', () => {
    const a = new SpanAliases(true);
    expect(a.ref('a4424f20bffee416')).toBe('s1');
    expect(a.ref('520b067330e3ede5')).toBe('s2');
    expect(a.ref('a4424f20bffee416')).toBe('s1');
    expect(a.resolve(' S2 ')).toBe('520b067330e3ede5');
    expect(a.resolve('520b067330e3ede5')).toBe('520b067330e3ede5');
  });
  it('is the identity when disabled', () => {
    const a = new SpanAliases(false);
    expect(a.ref('abc')).toBe('abc');
    expect(a.resolve('s1')).toBe('s1');
  });
});

describe('bounding', () => {
  it('cuts text at a line and says how much was cut', () => {
    const text = Array.from({ length: 100 }, (_, i) => `line ${i} ${'x'.repeat(40)}`).join('\n');
    const b = boundText(text, 1000);
    expect(b.truncated).toBe(true);
    expect(b.text.length).toBeLessThanOrEqual(1000);
    expect(b.text).toMatch(/\[cut: \d+ more line\(s\), \d+ chars over the 1000-char limit\]$/);
    expect(boundText('short', 1000)).toEqual({ text: 'short', truncated: false });
    expect(boundText('y'.repeat(5000), 300).text.length).toBeLessThanOrEqual(300);
  });
  it('keeps the first items and notes the rest', () => {
    expect(boundItems([1, 2, 3, 4], 2, 'spans')).toEqual({ shown: [1, 2], note: '[2 more spans not shown (limit 2)]' });
    expect(boundItems([1], 2, 'spans')).toEqual({ shown: [1] });
  });
});

describe('tool settings', () => {
  it('has the ThinkFL defaults', () => {
    expect(parseToolSettings({})).toMatchObject({ n_sigma: 3, metric_delta_s: 600, baseline_window_s: 1200, span_aliases: false });
  });
  it('names the YAML path of a bad knob', () => {
    expect(() => parseToolSettings({ n_sigma: -1 }, 'env.tools')).toThrow(/env\.tools\.n_sigma/);
    expect(() => parseToolSettings({ metric_delta_s: 900, baseline_window_s: 600 }, 'env.tools')).toThrow(/env\.tools\.baseline_window_s/);
    expect(() => parseToolSettings({ timestamp_formats: ['unix_weeks'] })).toThrow(/tools\.timestamp_formats/);
  });
});
