/**
 * The tiny tokenizer (fitted to the 2023-01-29 names) on a simulated redeploy of that day (every
 * pod re-hashed, env's loadRedeployedDataset): with pod aliases on, the scripted expert's episodes
 * on the re-hashed cases are the same token ids as on the originals, by transformers'
 * apply_chat_template as the reference; with aliases off, each re-hashed pod name falls apart
 * into pieces the model never saw as one name.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  createExpert,
  ExpertSettingsSchema,
  loadDataset,
  loadRedeployedDataset,
  runEpisode,
  spreadCases,
  type Case,
  type Dataset,
  type EpisodeRecord,
  type RedeployedDataset,
} from '@thinkfl/env';
import { ENGINE_PYTHON } from '../../trainer-ctl/src/engine';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { allToolSpecs, loadChatModel, writeTinyTokenizer, type ChatModel } from '../src/chat/index';

let ds: Dataset;
let re: RedeployedDataset;
let tiny: ChatModel;
let dir: string;

beforeAll(async () => {
  const data = await ensureNezhaDataset();
  ds = await loadDataset(data);
  re = await loadRedeployedDataset(data, 3);
  dir = mkdtempSync(join(tmpdir(), 'tiny-tok-redeploy-'));
  await writeTinyTokenizer(dir, data);
  tiny = loadChatModel(dir);
}, 300_000);

const play = (dataset: Dataset, c: Case, pod_aliases: boolean): Promise<EpisodeRecord> =>
  runEpisode({
    dataset,
    case: c,
    policy: createExpert(dataset, ExpertSettingsSchema.parse({})),
    settings: { d_max: 6, tool_settings: { span_aliases: true, verdicts: true, pod_aliases } },
  });

/** transformers' ids of each conversation (hf_chat_tokens.py: apply_chat_template with the tools). */
function referenceIds(conversations: EpisodeRecord['messages'][]): number[][] {
  const tools = allToolSpecs().map((t) => ({ type: 'function', function: t }));
  const request = {
    dir,
    cases: conversations.map((messages) => ({ messages, tools, add_generation_prompt: false, date_string: '29 Jan 2023' })),
  };
  const out = execFileSync(ENGINE_PYTHON, [join(import.meta.dirname, 'hf_chat_tokens.py')], {
    input: JSON.stringify(request),
    encoding: 'utf8',
    maxBuffer: 1 << 26,
  });
  return JSON.parse(out) as number[][];
}

describe('the tiny tokenizer on a redeployed day', () => {
  it('reads a re-hashed case under pod aliases as the same ids as the original, by transformers', async () => {
    const tools = allToolSpecs();
    const original: EpisodeRecord['messages'][] = [];
    const redeployed: EpisodeRecord['messages'][] = [];
    for (const c of spreadCases(ds.cases, 4)) {
      original.push((await play(ds, c, true)).messages);
      redeployed.push((await play(re, re.cases.find((x) => x.id === c.id)!, true)).messages);
    }
    const ours = original.map((m) => tiny.tokenizer.encode(tiny.template.render(m, { tools })));
    const theirs = referenceIds(redeployed);
    expect(theirs).toEqual(ours);
    // The aliases are pieces the tokenizer has: the service's own token, "-" and a digit chunk.
    for (const s of ds.topology.services) {
      expect(tiny.tokenizer.encode(`${s}-1`)).toEqual([
        tiny.tokenizer.requireId(s),
        tiny.tokenizer.requireId('-'),
        tiny.tokenizer.requireId('1'),
      ]);
    }
    // No byte fallback anywhere: every piece of the conversations is in the fitted vocabulary.
    const bytes = new Set(
      Array.from({ length: 256 }, (_, i) => tiny.tokenizer.requireId(`<0x${i.toString(16).toUpperCase().padStart(2, '0')}>`)),
    );
    expect(ours.flat().filter((id) => bytes.has(id))).toEqual([]);
  }, 300_000);

  it('without aliases, meets each re-hashed pod as several pieces where the original pod is one token', async () => {
    for (const [pod, renamed] of re.podNames) {
      expect(tiny.tokenizer.encode(pod), pod).toHaveLength(1);
      expect(tiny.tokenizer.encode(renamed).length, renamed).toBeGreaterThan(1);
    }
    const c = spreadCases(ds.cases, 1)[0];
    const tools = allToolSpecs();
    const a = tiny.tokenizer.encode(tiny.template.render((await play(ds, c, false)).messages, { tools }));
    const b = tiny.tokenizer.encode(
      tiny.template.render((await play(re, re.cases.find((x) => x.id === c.id)!, false)).messages, { tools }),
    );
    expect(b).not.toEqual(a);
    expect(b.length).toBeGreaterThan(a.length);
  }, 300_000);
});
