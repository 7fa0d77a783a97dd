/**
 * ModelPolicy on a real (untrained) tiny model and real Nezha cases: the trajectory's
 * generated runs are exactly the assistant messages the protocol recorded, the rest is the
 * rendered conversation, log-probabilities line up, seeds reproduce episodes, and an episode
 * that outgrows the context ends with the reason recorded.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDataset, runEpisode, type Case, type Dataset, type EpisodeRecord } from '@thinkfl/env';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { openOnnxBackend, type OnnxBackend } from '../src/backends/index';
import { loadChatModel, type ChatModel } from '../src/chat/index';
import { ModelPolicy, turnSeed, type ModelPolicySettingsInput } from '../src/policy/index';
import { scratchDir } from './backend-fixtures';
import { createTinyModel } from '../../../testkit/tiny-model';
import { generatedRuns } from '../../../testkit/masks';

let dataset: Dataset;
let chat: ChatModel;
let backend: OnnxBackend;
let kase: Case;
const episodeSettings = { d_max: 2, tool_settings: { span_aliases: true } };

async function play(settings: ModelPolicySettingsInput, c = kase): Promise<{ record: EpisodeRecord; policy: ModelPolicy }> {
  const policy = new ModelPolicy({ backend, chat, settings });
  const record = await runEpisode({ dataset, case: c, policy, settings: episodeSettings });
  return { record, policy };
}

beforeAll(async () => {
  dataset = await loadDataset(await ensureNezhaDataset());
  const dir = await createTinyModel(join(scratchDir('policy'), 'model'), 3);
  chat = loadChatModel(dir);
  backend = await openOnnxBackend({ model_dir: dir, threads: 1 });
  kase = dataset.cases[0];
}, 300_000);
afterAll(async () => {
  await backend?.close();
});

describe('ModelPolicy', () => {
  it('plays a real episode whose trajectory decodes to exactly the recorded conversation', async () => {
    const { record, policy } = await play({ temperature: 1, seed: 11, maxTokens: 48 });
    const t = policy.trajectory();
    const assistant = record.messages.filter((m) => m.role === 'assistant');
    expect(record.error).toBeUndefined();
    expect(assistant.length).toBe(record.turns.length);
    expect(assistant.length).toBeGreaterThanOrEqual(3); // d_max 2 tool turns and the forced answer
    expect(t.mask).toHaveLength(t.ids.length);
    expect(t.logprobs).toHaveLength(t.ids.length);

    const eot = '<|im_end|>';
    const runs = generatedRuns(t.ids, t.mask);
    expect(runs).toHaveLength(assistant.length);
    runs.forEach((run, i) => {
      const text = chat.tokenizer.decode(run);
      // A turn cut by maxTokens gets the end-of-turn token appended outside the mask.
      expect(text.endsWith(eot) ? text.slice(0, -eot.length) : text).toBe(assistant[i].content);
    });

    t.mask.forEach((m, i) => {
      if (m === 0) expect(t.logprobs[i]).toBe(0);
      else {
        expect(Number.isFinite(t.logprobs[i])).toBe(true);
        expect(t.logprobs[i]).toBeLessThan(0);
      }
    });

    // Everything up to the last reply is the template's own rendering of the recorded messages.
    const lastReply = record.messages.lastIndexOf(assistant[assistant.length - 1]);
    const rendered = chat.template.render(record.messages.slice(0, lastReply + 1), { tools: policy.offeredTools });
    expect(`${chat.tokenizer.decode(t.ids)}\n`).toBe(rendered);
  });

  it('leaves the tools to the system prompt when asked not to render them', async () => {
    const withTools = (await play({ temperature: 0, maxTokens: 8 })).policy.trajectory();
    const { record, policy } = await play({ temperature: 0, maxTokens: 8, renderTools: false });
    const text = chat.tokenizer.decode(policy.trajectory().ids);
    expect(policy.offeredTools).toEqual([]);
    expect(chat.tokenizer.decode(withTools.ids)).toContain('<tools>');
    expect(text).not.toContain('<tools>');
    expect(text.startsWith(`<|im_start|>system\n${record.messages[0].content}<|im_end|>`)).toBe(true);
  });

  it('replays an episode from its seed and samples another with another seed', async () => {
    const a = (await play({ temperature: 1, seed: 5, maxTokens: 32 })).policy.trajectory();
    const b = (await play({ temperature: 1, seed: 5, maxTokens: 32 })).policy.trajectory();
    const c = (await play({ temperature: 1, seed: 6, maxTokens: 32 })).policy.trajectory();
    expect(b.ids).toEqual(a.ids);
    expect(b.mask).toEqual(a.mask);
    expect(c.ids).not.toEqual(a.ids);
  });

  it('plays back the turns of a replay as context and samples its own from there', async () => {
    const anchor = await play({ temperature: 1, seed: 5, maxTokens: 32 });
    const at = anchor.policy.trajectory();
    const texts = anchor.record.messages.filter((m) => m.role === 'assistant').map((m) => m.content);
    expect(at.turns).toHaveLength(texts.length);
    // Each span holds exactly the turn's generated run.
    expect(at.turns.map(([s, e]) => at.ids.slice(s, e))).toEqual(generatedRuns(at.ids, at.mask));
    const replay = at.turns.slice(0, 2).map(([s, e], i) => ({ ids: at.ids.slice(s, e), text: texts[i] }));
    const policy = new ModelPolicy({ backend, chat, settings: { temperature: 1, seed: 6, maxTokens: 32 }, replay });
    const record = await runEpisode({ dataset, case: kase, policy, settings: episodeSettings });
    const t = policy.trajectory();
    const branch = at.turns[2][0];
    expect(
      record.messages
        .filter((m) => m.role === 'assistant')
        .slice(0, 2)
        .map((m) => m.content),
    ).toEqual(texts.slice(0, 2));
    expect(t.ids.slice(0, branch)).toEqual(at.ids.slice(0, branch));
    expect(t.turns.slice(0, 2)).toEqual(at.turns.slice(0, 2));
    expect(t.turns[2][0]).toBe(branch);
    expect(t.mask.slice(0, branch).every((m) => m === 0)).toBe(true);
    expect(t.logprobs.slice(0, branch).every((x) => x === 0)).toBe(true);
    // The forced answer turn is this episode's own: generated (mask 1) and sampled with its own seed.
    expect(generatedRuns(t.ids, t.mask)).toEqual([t.ids.slice(t.turns[2][0], t.turns[2][1])]);
  });

  it('ends the episode with the reason recorded when the prompt outgrows the context', async () => {
    const { record, policy } = await play({ temperature: 0, maxTokens: 16, maxContext: 64 });
    expect(record.stop_reason).toBe('policy_error');
    expect(record.error).toMatch(/context limit: the prompt of turn 0 has \d+ tokens, the model takes 64/);
    expect(record.turns).toHaveLength(0);
    expect(policy.trajectory().mask.every((m) => m === 0)).toBe(true);
  });

  it('names the offending setting', () => {
    expect(() => new ModelPolicy({ backend, chat, settings: { topP: 0 } })).toThrow(/policy\.topP/);
    expect(() => new ModelPolicy({ backend, chat, settings: { temperature: 1, bogus: 1 } as never })).toThrow(
      /invalid model policy settings/,
    );
  });

  it('spreads turn seeds so that no two episodes share one', () => {
    expect(turnSeed(0, 20)).toBeLessThan(turnSeed(1, 0));
    expect(() => turnSeed(1, 32)).toThrow(/outside/);
  });
});
