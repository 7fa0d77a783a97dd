import { beforeAll, describe, expect, it } from 'vitest';
import {
  createExpert,
  ExpertSettingsSchema,
  loadDataset,
  runEpisode,
  type ChatMessage,
  type OpenAIToolCall,
  type ToolSpec,
} from '@thinkfl/env';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { fixtureModelDir, npmQwen3Dir, type FixtureModel } from '../fixtures/chat-models/assemble';
import { allToolSpecs, EpisodeTokens, loadChatModel, TemplatePrefixError, tokenizeEpisode, type ChatModel } from '../src/chat/index';
import { generatedRuns } from '../../../testkit/masks';

const tools: ToolSpec[] = [
  {
    name: 'search_traces',
    description: 'Child spans of a span.',
    parameters: { type: 'object', properties: { parent_span_id: { type: 'string' } }, required: ['parent_span_id'] },
  },
  {
    name: 'print_results',
    description: 'Final ranked root causes.',
    parameters: { type: 'object', properties: { root_causes: { type: 'array' } }, required: ['root_causes'] },
  },
];

function call(id: string, name: string, args: unknown): OpenAIToolCall[] {
  return [{ id, type: 'function', function: { name, arguments: JSON.stringify(args) } }];
}

const episode: ChatMessage[] = [
  { role: 'system', content: 'You localize the root cause of a slow request.' },
  { role: 'user', content: 'Entry span s1: ts-ui-dashboard GET /api/v1/orderservice/order, 5123 ms.' },
  { role: 'assistant', content: '', tool_calls: call('c1', 'search_traces', { parent_span_id: 's1' }) },
  { role: 'tool', content: 's2 ts-order-service POST /order/refresh 5012 ms (usual 40 ms)', tool_call_id: 'c1' },
  { role: 'assistant', content: '', tool_calls: call('c2', 'search_traces', { parent_span_id: 's2' }) },
  { role: 'tool', content: 'no children', tool_call_id: 'c2' },
  {
    role: 'assistant',
    content: '',
    tool_calls: call('c3', 'print_results', { root_causes: [{ service: 'ts-order-service' }] }),
  },
];

/** The assistant turns as each template writes them, with the end-of-turn token. */
const expectedTurns: Record<FixtureModel, string[]> = {
  'qwen2.5-instruct': [
    '<tool_call>\n{"name": "search_traces", "arguments": {"parent_span_id": "s1"}}\n</tool_call><|im_end|>',
    '<tool_call>\n{"name": "search_traces", "arguments": {"parent_span_id": "s2"}}\n</tool_call><|im_end|>',
    '<tool_call>\n{"name": "print_results", "arguments": {"root_causes": [{"service": "ts-order-service"}]}}\n</tool_call><|im_end|>',
  ],
  'llama-3.1-instruct': [
    '{"name": "search_traces", "parameters": {"parent_span_id": "s1"}}<|eot_id|>',
    '{"name": "search_traces", "parameters": {"parent_span_id": "s2"}}<|eot_id|>',
    '{"name": "print_results", "parameters": {"root_causes": [{"service": "ts-order-service"}]}}<|eot_id|>',
  ],
  'llama-3.2-instruct': [],
};
expectedTurns['llama-3.2-instruct'] = expectedTurns['llama-3.1-instruct'];

const models: FixtureModel[] = ['qwen2.5-instruct', 'llama-3.1-instruct', 'llama-3.2-instruct'];
const loaded = new Map<FixtureModel, ChatModel>();
beforeAll(() => {
  for (const m of models) loaded.set(m, loadChatModel(fixtureModelDir(m)));
});

describe.each(models)('episode ids and generated mask: %s', (name) => {
  it('mask covers exactly the assistant turns and their end token', () => {
    const { tokenizer, template } = loaded.get(name)!;
    const { ids, mask } = tokenizeEpisode(episode, template, tokenizer, { tools });
    expect(ids.length).toBe(mask.length);
    const runs = generatedRuns(ids, mask);
    expect(runs.map((r) => tokenizer.decode(r))).toEqual(expectedTurns[name]);
    const eot = tokenizer.requireId(tokenizer.eosToken!);
    for (const r of runs) expect(r[r.length - 1]).toBe(eot);
    // Everything else is prompt, tool results or template scaffolding.
    const context = ids.filter((_, i) => mask[i] === 0);
    const contextText = tokenizer.decode(context);
    expect(contextText).toContain('s2 ts-order-service POST /order/refresh 5012 ms (usual 40 ms)');
    expect(contextText).not.toContain('"parent_span_id": "s1"}}');
  });

  it('the ids are the template render, encoded without drift', () => {
    const { tokenizer, template } = loaded.get(name)!;
    const { ids } = tokenizeEpisode(episode, template, tokenizer, { tools });
    const text = tokenizer.decode(ids);
    const full = template.render(episode, { tools });
    // The text after the last end-of-turn token (Qwen's "\n") belongs to the next segment.
    expect(full.startsWith(text)).toBe(true);
    expect(full.slice(text.length)).toMatch(/^\n?$/);
    expect(tokenizer.encode(text)).toEqual(ids);
  });

  it('re-rendering a longer episode never changes earlier tokens', () => {
    const { tokenizer, template } = loaded.get(name)!;
    let prev = { ids: [] as number[], mask: [] as number[] };
    for (let k = 2; k <= episode.length; k++) {
      const cur = tokenizeEpisode(episode.slice(0, k), template, tokenizer, { tools });
      expect(cur.ids.length).toBeGreaterThan(prev.ids.length);
      expect(cur.ids.slice(0, prev.ids.length)).toEqual(prev.ids);
      expect(cur.mask.slice(0, prev.mask.length)).toEqual(prev.mask);
      prev = cur;
    }
  });

  it('token-in/token-out keeps the backend ids and closes a truncated turn', () => {
    const { tokenizer, template } = loaded.get(name)!;
    const ep = new EpisodeTokens(template, tokenizer, { tools });
    const promptIds = ep.prompt(episode.slice(0, 2));
    expect(ep.mask.every((m) => m === 0)).toBe(true);
    expect(promptIds).toEqual(ep.ids);
    // A non-canonical split of the turn's text, one id per character: kept as generated.
    const turn = expectedTurns[name][0];
    const body = turn.slice(0, turn.lastIndexOf('<|'));
    const charIds = [...body].flatMap((ch) => tokenizer.encode(ch));
    expect(charIds.length).toBeGreaterThan(tokenizer.encode(body).length);
    ep.appendGenerated(charIds, { content: episode[2].content, tool_calls: episode[2].tool_calls });
    const eot = tokenizer.requireId(tokenizer.eosToken!);
    expect(ep.ids.slice(promptIds.length)).toEqual([...charIds, eot]);
    expect(ep.mask.slice(promptIds.length)).toEqual([...charIds.map(() => 1), 0]);
    // The next segment follows the template, whatever ids the model produced.
    ep.prompt([episode[3]]);
    const tail = tokenizer.decode(ep.ids.slice(promptIds.length + charIds.length + 1));
    expect(tail).toContain(episode[3].content);
    // A turn that ends with the end-of-turn token gets nothing added.
    const done = tokenizer.encode(expectedTurns[name][1]);
    const before = ep.ids.length;
    ep.appendGenerated(done, { content: episode[4].content, tool_calls: episode[4].tool_calls });
    expect(ep.ids.slice(before)).toEqual(done);
    expect(ep.mask.slice(before).every((m) => m === 1)).toBe(true);
  });

  it('turns out of order are an error', () => {
    const { tokenizer, template } = loaded.get(name)!;
    const ep = new EpisodeTokens(template, tokenizer, { tools });
    expect(() => ep.appendAssistant({ content: 'x' })).toThrow(/needs a prompt/);
    ep.prompt(episode.slice(0, 2));
    expect(() => ep.prompt([episode[3]])).toThrow(/twice/);
    expect(() => new EpisodeTokens(template, tokenizer).prompt([episode[2]])).toThrow(/appendAssistant/);
  });
});

describe('templates that rewrite history', () => {
  it("Qwen3's own template (drops earlier <think> blocks) is refused with a clear error", () => {
    const { tokenizer, template } = loadChatModel(npmQwen3Dir());
    const run = () => tokenizeEpisode(episode, template, tokenizer, { tools });
    expect(run).toThrow(TemplatePrefixError);
    expect(run).toThrow(/not prefix-stable: rendering \d+ messages changes earlier text at character \d+/);
  });
});

describe('real scripted-expert episodes on Nezha cases', () => {
  it.each(models)('%s: decode(generated ids) is the assistant turns; decode(all ids) is the render', async (name) => {
    const ds = await loadDataset(await ensureNezhaDataset());
    const { tokenizer, template } = loaded.get(name)!;
    const eos = tokenizer.eosToken!;
    const trim = name.startsWith('llama');
    for (const c of [ds.cases[0], ds.cases[Math.floor(ds.cases.length / 2)]]) {
      const rec = await runEpisode({ dataset: ds, case: c, policy: createExpert(ds, ExpertSettingsSchema.parse({})) });
      const { ids, mask } = tokenizeEpisode(rec.messages, template, tokenizer, { tools: allToolSpecs() });
      const turns = rec.messages.filter((m) => m.role === 'assistant').map((m) => (trim ? m.content.trim() : m.content) + eos);
      expect(generatedRuns(ids, mask).map((r) => tokenizer.decode(r))).toEqual(turns);
      // Episodes end with print_results' tool result: the ids then end with a generation prompt.
      const open = rec.messages[rec.messages.length - 1].role !== 'assistant';
      const full = template.render(rec.messages, { tools: allToolSpecs(), addGenerationPrompt: open });
      expect(tokenizer.decode(ids)).toBe(open ? full : full.replace(/\n$/, ''));
    }
  });
});
