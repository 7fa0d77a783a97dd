/**
 * The report's transcripts from RUN_DIR/episodes.jsonl: an episode the expert plays on the real
 * dataset, written by the controller's own writer, is read back with its tool calls and stop
 * reason; a line written before issue 28's snake_case rename is named by file and line.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createExpert, ExpertSettingsSchema, loadDataset, runEpisode, type EpisodeRecord } from '@thinkfl/env';
import { gatherReport } from '../src/report/data';
import { appendEpisodes, EPISODES_FILE } from '../src/run-files/metrics-log';
import { initialState, writeState } from '../src/run-files/state';
import { ensureNezhaDataset, REPO_ROOT } from '../../../testkit/nezha';

let runDir: string;
let episode: EpisodeRecord;

beforeAll(async () => {
  const dataset = await loadDataset(await ensureNezhaDataset());
  episode = await runEpisode({ dataset, case: dataset.cases[0], policy: createExpert(dataset, ExpertSettingsSchema.parse({})) });
  runDir = mkdtempSync(join(tmpdir(), 'report-episodes-'));
  writeState(runDir, initialState('report-episodes', '/models/tiny'));
  writeFileSync(join(runDir, 'run.json'), JSON.stringify({ config_file: join(REPO_ROOT, 'configs', 'ci-smoke.yaml') }));
}, 120_000);
afterAll(() => rmSync(runDir, { recursive: true, force: true }));

describe('trainer-ctl report: episodes.jsonl', () => {
  it('shows an episode with its tool calls, stop reason and the case truth', async () => {
    appendEpisodes(runDir, { stage: 'priming', step: 0 }, [{ reward: 0.5, episode }]);
    const data = await gatherReport(runDir, { baselines: false });
    expect(episode.tool_calls.length).toBeGreaterThan(0);
    expect(data.episodes).toEqual([
      expect.objectContaining({ tag: 'priming:0', reward: 0.5, tool_calls: episode.tool_calls.length, stop_reason: 'answered' }),
    ]);
    expect(data.episodes[0].truth?.pod).toBeDefined();
  });

  it('names the line of an episode written with camelCase keys (before the rename)', async () => {
    const { tool_calls, ...rest } = episode;
    writeFileSync(
      join(runDir, EPISODES_FILE),
      `${JSON.stringify({ stage: 'priming', step: 0, episode: { ...rest, toolCalls: tool_calls } })}\n`,
    );
    await expect(gatherReport(runDir, { baselines: false })).rejects.toThrow(
      `${join(runDir, EPISODES_FILE)}:1: not an episode record with snake_case keys (tool_calls)`,
    );
  });
});
