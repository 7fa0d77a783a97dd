/**
 * prepareInputs with a tiny model already on disk: it must be a llama whose sizes match
 * model.create_tiny, or the run stops before any work, naming the setting and the directory.
 * A dataset an older importer wrote (camelCase meta.json) is imported again from dataset.import.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadRunConfig, type RunConfig } from '../src/config/index';
import { prepareInputs } from '../src/controller/prepare';
import { FORMAT_VERSION, importSettings, NezhaSettings } from '@thinkfl/env';
import { camelCaseKeys } from '../../../testkit/camel-keys';
import { ensureNezhaDataset, NEZHA_DATASET, nezhaCut, REPO_ROOT } from '../../../testkit/nezha';

let dir: string;
let base: RunConfig;

beforeAll(async () => {
  await ensureNezhaDataset();
  dir = mkdtempSync(join(tmpdir(), 'prepare-'));
  writeFileSync(
    join(dir, 'config.json'),
    JSON.stringify({
      model_type: 'llama',
      hidden_size: 128,
      num_hidden_layers: 2,
      num_attention_heads: 2,
      num_key_value_heads: 2,
      head_dim: 64,
      intermediate_size: 256,
    }),
  );
  base = loadRunConfig(join(REPO_ROOT, 'configs', 'tiny-cpu.yaml'), { checkPaths: false }).config;
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function withTiny(sizes: Partial<NonNullable<RunConfig['model']['create_tiny']>>): RunConfig {
  const c = structuredClone(base);
  c.dataset.path = NEZHA_DATASET;
  c.model.dir = dir;
  c.model.create_tiny = { seed: 0, ...sizes };
  return c;
}

describe('prepareInputs', () => {
  it('refuses an existing tiny model whose sizes differ from model.create_tiny', async () => {
    await expect(prepareInputs(withTiny({ hidden_size: 128, layers: 3 }), () => undefined)).rejects.toThrow(
      `model.create_tiny.layers is 3, but the model in ${dir} has num_hidden_layers 2: delete that directory to create the tiny model anew, or set model.dir elsewhere`,
    );
  });

  it('refuses a tiny model of the former custom architecture', async () => {
    const old = mkdtempSync(join(tmpdir(), 'prepare-old-'));
    writeFileSync(join(old, 'config.json'), JSON.stringify({ model_type: 'thinkfl-tiny', hidden_size: 128 }));
    const c = withTiny({});
    c.model.dir = old;
    await expect(prepareInputs(c, () => undefined)).rejects.toThrow(
      `the model in ${old} has model_type thinkfl-tiny: delete that directory`,
    );
    rmSync(old, { recursive: true, force: true });
  });

  it('keeps an existing tiny model whose sizes match, and one whose sizes the config leaves open', async () => {
    const logs: string[] = [];
    await prepareInputs(withTiny({ hidden_size: 128, layers: 2, heads: 2, head_dim: 64, intermediate_size: 256 }), (l) => logs.push(l));
    await prepareInputs(withTiny({}), (l) => logs.push(l));
    expect(logs).toEqual([]);
  });
});

describe('prepareInputs on a dataset imported before the snake_case rename', () => {
  // The head of meta.json as the format-2 importer (camelCase) and the format-3 one (meta.json in snake_case) wrote it.
  const heads = (cut: string): [number, Record<string, unknown>][] => [
    [2, { name: 'old', format: 'nezha', formatVersion: 2, source: cut, createdAt: '2026-11-27T12:21:40.529Z' }],
    [3, { name: 'old', format: 'nezha', format_version: 3, source: cut, created_at: '2026-11-27T15:04:12.635Z' }],
  ];

  it('imports it again from dataset.import, into snake_case', async () => {
    const cut = nezhaCut(['08_58', '08_59']);
    for (const [version, head] of heads(cut)) {
      const ds = mkdtempSync(join(tmpdir(), 'prepare-old-dataset-'));
      writeFileSync(join(ds, 'meta.json'), JSON.stringify(head));
      const c = structuredClone(base);
      c.dataset.path = ds;
      const settings = importSettings(NezhaSettings).parse({ importer: { date: '2023-01-29', logs: false } });
      c.dataset.import = { format: 'nezha', src: cut, settings };
      c.model.dir = dir;
      c.model.create_tiny = undefined;
      const logs: string[] = [];
      await prepareInputs(c, (l) => logs.push(l));
      expect(logs.slice(0, 2)).toEqual([
        `prepare: ${ds} has dataset format ${version}, this code reads ${FORMAT_VERSION}: importing it again`,
        `prepare: importing nezha from ${cut} into ${ds}`,
      ]);
      const meta = JSON.parse(readFileSync(join(ds, 'meta.json'), 'utf8'));
      expect(meta.format_version).toBe(FORMAT_VERSION);
      expect(meta.settings.importer).toMatchObject({ date: '2023-01-29', fault_window_sec: 180, logs: false });
      expect(camelCaseKeys(meta, 'meta.json')).toEqual([]);
      for (const part of ['cases.json', 'faults.json', 'traces.json']) {
        expect(camelCaseKeys(JSON.parse(readFileSync(join(ds, part), 'utf8')), part)).toEqual([]);
      }
      rmSync(ds, { recursive: true, force: true });
    }
    rmSync(cut, { recursive: true, force: true });
  });
});
