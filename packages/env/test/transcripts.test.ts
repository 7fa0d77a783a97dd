/**
 * The messages a model reads are the tokens it was trained on: the scripted agents' episodes on
 * a few real cases must render exactly as pinned in transcripts.json (written by
 * `npx tsx scripts/transcripts.ts --out packages/env/test/transcripts.json` at fda29af, before the
 * stored dataset types went snake_case). A change meant to alter the text rewrites the file in
 * the same commit.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { type Transcript, transcripts } from '../../../testkit/transcripts';
import { loadDataset } from '../src/datasets/index';
import type { Dataset } from '../src/types';

const PINNED = (JSON.parse(readFileSync(join(import.meta.dirname, 'transcripts.json'), 'utf8')) as { transcripts: Transcript[] })
  .transcripts;

let ds: Dataset;
beforeAll(async () => {
  ds = await loadDataset(await ensureNezhaDataset());
});

describe('transcripts', () => {
  it('pins every agent on several faults, with and without aliases and verdicts', () => {
    expect(new Set(PINNED.map((t) => t.policy)).size).toBeGreaterThanOrEqual(5);
    expect(new Set(PINNED.map((t) => t.case_id)).size).toBeGreaterThanOrEqual(4);
    expect(PINNED.some((t) => t.messages.some((m) => m.role === 'tool' && m.content.includes('pod=ts-')))).toBe(true);
  });

  it('renders every message byte for byte as pinned', async () => {
    const now = await transcripts(ds);
    expect(now.map((t) => [t.case_id, t.policy, t.tool_settings])).toEqual(PINNED.map((t) => [t.case_id, t.policy, t.tool_settings]));
    for (const [i, t] of now.entries()) {
      const where = `${t.policy} on ${t.case_id} with ${JSON.stringify(t.tool_settings)}`;
      expect(t.messages.length, where).toBe(PINNED[i].messages.length);
      for (const [k, m] of t.messages.entries()) expect(m, `${where}, message ${k}`).toEqual(PINNED[i].messages[k]);
    }
  }, 120_000);
});
