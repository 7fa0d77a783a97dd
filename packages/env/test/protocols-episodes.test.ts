import { beforeAll, describe, expect, it } from 'vitest';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { loadDataset } from '../src/datasets/index';
import { ReplayPolicy, runEpisode } from '../src/episodes/index';
import type { AssistantMessage, Case, Dataset, Policy, PolicyContext } from '../src/types';
import { toolCallText } from '../../../testkit/tool-calls';

let ds: Dataset;
let kase: Case;

beforeAll(async () => {
  ds = await loadDataset(await ensureNezhaDataset());
  kase = ds.cases[0];
});

const traces = (id: string) => toolCallText('search_traces', { parent_span_id: id });
const answer = (pod: string) => toolCallText('print_results', { root_causes: [{ pod }] });

/** Replays messages and remembers what each turn offered. */
class Recording implements Policy {
  readonly name = 'recording';
  readonly seen: { tools: string[]; final: boolean; turn: number }[] = [];
  private readonly replay: ReplayPolicy;
  constructor(messages: (AssistantMessage | string)[]) {
    this.replay = new ReplayPolicy(messages);
  }
  next(ctx: PolicyContext): Promise<AssistantMessage> {
    this.seen.push({ tools: ctx.tools.map((t) => t.name), final: ctx.final, turn: ctx.turn });
    return this.replay.next(ctx);
  }
}

describe('rot', () => {
  it('plays a search then an answer, recording calls, turns, path and messages', async () => {
    const pod = kase.truth.pod as string;
    const ep = await runEpisode({ dataset: ds, case: kase, policy: new ReplayPolicy([traces(kase.entry_span_id), answer(pod)]) });
    expect(ep).toMatchObject({ case_id: kase.id, protocol: 'rot', stop_reason: 'answered', answer: [{ pod }], parse_errors: [] });
    expect(ep.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'assistant', 'tool']);
    expect(ep.messages[0].content).toMatch(/search_traces:.*\n- search_fluctuating_metrics:/s);
    expect(ep.messages[1].content).toContain(`Entry span: ${kase.entry_span_id}`);
    expect(ep.turns).toEqual([0, 1].map((turn) => expect.objectContaining({ turn, parsed: true, offered_tool: true, args_valid: true })));
    expect(ep.tool_calls.map((c) => c.name)).toEqual(['search_traces', 'print_results']);
    const entry = ds.traces.span(kase.entry_span_id)!;
    expect(ep.path).toEqual([
      {
        tool: 'search_traces',
        args: JSON.stringify({ parent_span_id: kase.entry_span_id }),
        components: expect.arrayContaining([entry.service, entry.pod]),
      },
    ]);
    expect(ep.messages[3].content).toBe(ep.tool_calls[0].observation.text);
  });

  it("ends each exploration turn's result or error with the tool turns left when turns_left_note is on, and only then", async () => {
    const msgs = [traces(kase.entry_span_id), 'no call here', traces(kase.entry_span_id), answer('ts-order-service')];
    const noted = await runEpisode({
      dataset: ds,
      case: kase,
      policy: new ReplayPolicy(msgs),
      settings: { d_max: 3, turns_left_note: true },
    });
    const plain = await runEpisode({ dataset: ds, case: kase, policy: new ReplayPolicy(msgs), settings: { d_max: 3 } });
    expect(noted.stop_reason).toBe('forced_answer');
    const after = (ep: typeof noted) =>
      ep.messages.filter((_, i) => i > 1 && ep.messages[i - 1].role === 'assistant').map((m) => m.content);
    const [n, p] = [after(noted), after(plain)];
    expect(n[0]).toBe(`${p[0]}\n[2 tool turns left]`);
    expect(n[1]).toBe(`${p[1]}\n[1 tool turn left]`);
    // The last exploration turn is followed by the forced-answer message, not a count of zero.
    expect(n[2]).toBe(p[2]);
    expect(n[2]).not.toMatch(/turns? left\]/);
    expect(p.some((c) => /turns? left\]/.test(c))).toBe(false);
    expect(noted.tool_calls[0].observation.text).toBe(plain.tool_calls[0].observation.text);
  });

  it('forces a final print_results turn after D_max turns, offering only that tool', async () => {
    const p = new Recording(['hmm', 'let me think', 'no call here', answer('ts-order-service')]);
    const ep = await runEpisode({ dataset: ds, case: kase, policy: p, settings: { d_max: 3 } });
    expect(ep.stop_reason).toBe('forced_answer');
    expect(ep.answer).toEqual([{ pod: 'ts-order-service' }]);
    expect(p.seen.map((s) => s.final)).toEqual([false, false, false, true]);
    expect(p.seen[3].tools).toEqual(['print_results']);
    expect(p.seen[0].tools).toEqual(['search_traces', 'search_fluctuating_metrics', 'search_logs', 'print_results']);
    expect(ep.parse_errors.map((e) => e.turn)).toEqual([0, 1, 2]);
    expect(ep.turns.map((t) => t.parsed)).toEqual([false, false, false, true]);
    expect(ep.messages.filter((m) => m.role === 'user' && m.content.startsWith('Error: no tool call found'))).toHaveLength(3);
  });

  it('ends with no answer when the forced turn is not a valid print_results', async () => {
    const ep = await runEpisode({
      dataset: ds,
      case: kase,
      policy: new ReplayPolicy(['x', traces(kase.entry_span_id)]),
      settings: { d_max: 1 },
    });
    expect(ep).toMatchObject({ stop_reason: 'no_answer', answer: null });
    expect(ep.turns[1]).toMatchObject({
      parsed: true,
      offered_tool: false,
      args_valid: false,
      error: expect.stringMatching(/not offered/),
    });
    expect(ep.path).toEqual([]);
  });

  it('records tools not offered, invalid arguments and unknown spans as readable errors', async () => {
    const msgs = [
      toolCallText('search_everything', {}),
      toolCallText('search_traces', { parent_span_id: 5 }),
      traces('0000000000000000'),
      answer('p'),
    ];
    const ep = await runEpisode({ dataset: ds, case: kase, policy: new ReplayPolicy(msgs) });
    expect(ep.turns.map((t) => [t.parsed, t.offered_tool, t.args_valid])).toEqual([
      [true, false, false],
      [true, true, false],
      [true, true, true],
      [true, true, true],
    ]);
    expect(ep.parse_errors.map((e) => e.turn)).toEqual([0, 1]);
    const toolMsgs = ep.messages.filter((m) => m.role === 'tool').map((m) => m.content);
    expect(toolMsgs[0]).toMatch(/^Error: tool "search_everything" is not offered/);
    expect(toolMsgs[1]).toMatch(/^Error: invalid arguments for search_traces: parent_span_id/);
    expect(toolMsgs[2]).toMatch(/^Error: unknown span id "0000000000000000"/);
    expect(ep.tool_calls[0].observation.ok).toBe(false);
    expect(ep.stop_reason).toBe('answered');
  });

  it('stops with policy_error when the policy throws, keeping what happened so far', async () => {
    const ep = await runEpisode({ dataset: ds, case: kase, policy: new ReplayPolicy([traces(kase.entry_span_id)]) });
    expect(ep).toMatchObject({ stop_reason: 'policy_error', answer: null });
    expect(ep.tool_calls).toHaveLength(1);
    const broken: Policy = {
      name: 'broken',
      next: async () => {
        throw new TypeError('boom');
      },
    };
    expect(await runEpisode({ dataset: ds, case: kase, policy: broken })).toMatchObject({ stop_reason: 'policy_error', error: 'boom' });
    expect(ep.error).toBe('replay exhausted after 1 messages');
    const weird: Policy = { name: 'weird', next: async () => null as never };
    const ep2 = await runEpisode({ dataset: ds, case: kase, policy: weird, settings: { d_max: 1 } });
    expect(ep2).toMatchObject({ stop_reason: 'no_answer' });
  });

  it('answers OpenAI tool calls by id and ignores extra calls in one turn', async () => {
    const tc = (id: string, name: string, args: unknown) => ({
      id,
      type: 'function' as const,
      function: { name, arguments: JSON.stringify(args) },
    });
    const msg: AssistantMessage = {
      content: '',
      tool_calls: [tc('call_a', 'search_traces', { parent_span_id: kase.entry_span_id }), tc('call_b', 'search_logs', {})],
    };
    const ep = await runEpisode({ dataset: ds, case: kase, policy: new ReplayPolicy([msg, answer('p')]) });
    const tools = ep.messages.filter((m) => m.role === 'tool');
    expect(tools[0]).toMatchObject({ tool_call_id: 'call_a', name: 'search_traces' });
    expect(tools[0].content).toMatch(/1 more call\(s\) in this message ignored/);
    expect(tools[1]).toMatchObject({ tool_call_id: 'call_b', content: 'Ignored: one tool call per turn.' });
    expect(ep.messages[2].tool_calls).toHaveLength(2);
    expect(ep.tool_calls).toHaveLength(2);
  });

  it('stores malformed tool_calls in the contract shape and grades them as format errors', async () => {
    const bad = { content: '', tool_calls: [null, { id: 3, function: { name: 'search_logs', arguments: { a: 1 } } }] } as never;
    const ep = await runEpisode({ dataset: ds, case: kase, policy: new ReplayPolicy([bad, answer('p')]) });
    expect(ep.messages[2].tool_calls).toEqual([
      { id: 'call_0_0', type: 'function', function: { name: '', arguments: '' } },
      { id: 'call_0_1', type: 'function', function: { name: 'search_logs', arguments: '{"a":1}' } },
    ]);
    expect(ep.turns[0]).toMatchObject({ parsed: false });
    expect(ep.messages.filter((m) => m.role === 'tool' && m.content.startsWith('Error:')).map((m) => m.tool_call_id)).toEqual([
      'call_0_0',
      'call_0_1',
    ]);
  });

  it('runs with span aliases: the prompt names s1 and the tools accept it', async () => {
    const ep = await runEpisode({
      dataset: ds,
      case: kase,
      policy: new ReplayPolicy([traces('s1'), answer('p')]),
      settings: { tool_settings: { span_aliases: true } },
    });
    expect(ep.messages[1].content).toContain('Entry span: s1');
    expect(ep.tool_calls[0].observation.ok).toBe(true);
    expect(ep.messages[3].content).not.toContain(kase.entry_span_id);
    // The call is recorded as written; the path holds real span ids (aliases differ between episodes).
    expect(ep.tool_calls[0].arguments).toEqual({ parent_span_id: 's1' });
    expect(ep.path[0].args).toBe(JSON.stringify({ parent_span_id: kase.entry_span_id }));
  });

  it('caps D_max at 20 and names the bad setting', async () => {
    const p = new Recording(Array.from({ length: 21 }, () => 'nothing'));
    const ep = await runEpisode({ dataset: ds, case: kase, policy: p, settings: { d_max: 20 } });
    expect(ep.turns).toHaveLength(21);
    expect(ep.stop_reason).toBe('no_answer');
    await expect(runEpisode({ dataset: ds, case: kase, policy: p, settings: { d_max: 21 } })).rejects.toThrow(/episode\.d_max/);
    await expect(runEpisode({ dataset: ds, case: kase, policy: p, settings: { tools: ['search_traces'] } })).rejects.toThrow(
      /print_results/,
    );
    await expect(
      runEpisode({ dataset: ds, case: kase, policy: p, settings: { tools: ['search_tracez', 'print_results'] } }),
    ).rejects.toThrow(/episode\.tools: unknown tool; known tools: search_traces/);
    await expect(runEpisode({ dataset: ds, case: kase, policy: p, protocol: 'nope' })).rejects.toThrow(/unknown protocol "nope"/);
  });
});

describe('rclagent', () => {
  const metrics = (name: string) =>
    toolCallText('search_fluctuating_metrics', { service_name: name, timestamp: Math.floor(kase.timestamp_us / 1e6) });
  const answerAll = (pods: string[]) => toolCallText('print_results', { root_causes: pods.map((pod) => ({ pod })) });

  it('runs initial reasoning with trace and format only, reflection that must go below R0, and a final review given R0 and R1', async () => {
    const pod = kase.truth.pod as string;
    const other = ds.topology.pods.find((p) => p.service !== kase.truth.service)!.pod;
    const p = new Recording([
      traces(kase.entry_span_id), // phase 1
      answer(pod), // phase 1: R0
      traces(kase.entry_span_id), // phase 2: repeats a call, not deeper
      metrics(other), // phase 2: new, but not on R0's components
      metrics(pod), // phase 2: metrics of R0: deeper
      answer('second-guess'), // phase 2 answer R1, now offered
      answer(pod), // phase 3
    ]);
    const ep = await runEpisode({ dataset: ds, case: kase, policy: p, protocol: 'rclagent' });
    expect(ep).toMatchObject({ protocol: 'rclagent', stop_reason: 'answered', answer: [{ pod }] });
    const offered = p.seen.map((s) => s.tools);
    expect(offered[0]).toEqual(['search_traces', 'print_results']);
    expect(offered[2]).toEqual(['search_traces', 'search_fluctuating_metrics']);
    expect(offered[3]).toEqual(['search_traces', 'search_fluctuating_metrics']);
    expect(offered[4]).toEqual(['search_traces', 'search_fluctuating_metrics']);
    expect(offered[5]).toEqual(['search_traces', 'search_fluctuating_metrics', 'print_results']);
    expect(offered[6]).toEqual(['print_results']);
    expect(p.seen.map((s) => s.final)).toEqual([false, false, false, false, false, false, true]);
    // The downstream hint follows the deeper call; the final review restates R0 and R1.
    expect(ep.messages.find((m) => m.role === 'tool' && m.content.includes('often originates downstream'))?.name).toBe(
      'search_fluctuating_metrics',
    );
    const review = ep.messages.filter((m) => m.role === 'user').at(-1)!.content;
    expect(review).toContain(`initial answer was ${pod}`);
    expect(review).toContain('you answered second-guess');
    expect(ep.path.map((s) => s.tool)).toEqual([
      'search_traces',
      'search_traces',
      'search_fluctuating_metrics',
      'search_fluctuating_metrics',
    ]);
    expect(ep.parse_errors).toEqual([]);
  });

  it('counts search_traces below an R0 span as deeper', async () => {
    const entryPod = ds.traces.span(kase.entry_span_id)!.pod;
    const child = ds.traces.children(kase.entry_span_id)[0];
    const p = new Recording([answer(entryPod), traces(child.span_id), answer('x'), answer(entryPod)]);
    const ep = await runEpisode({ dataset: ds, case: kase, policy: p, protocol: 'rclagent' });
    expect(p.seen[2].tools).toContain('print_results');
    expect(ep.stop_reason).toBe('answered');
  });

  it('rejects the metrics tool in phase 1 and print_results before going deeper', async () => {
    const p = new Recording([metrics(kase.truth.pod as string), answer('a'), answer('b'), 'x', 'y', 'z', 'w', 'v', 'u']);
    const ep = await runEpisode({ dataset: ds, case: kase, policy: p, protocol: 'rclagent' });
    expect(ep.turns[0]).toMatchObject({ offered_tool: false });
    expect(ep.turns[2]).toMatchObject({ offered_tool: false });
    expect(ep.turns).toHaveLength(1 + 1 + 6 + 1);
    // The final turn failed: the answer is forced to the union R1 then R0, here R0 = [a].
    expect(ep).toMatchObject({ stop_reason: 'forced_answer', answer: [{ pod: 'a' }] });
  });

  it('forces the union R1 then R0 when the final review fails (Eq. 8)', async () => {
    const pod = kase.truth.pod as string;
    const p = new Recording([answerAll(['r0-a', pod]), metrics(pod), answerAll(['r1-a', pod]), 'not a call']);
    const ep = await runEpisode({ dataset: ds, case: kase, policy: p, protocol: 'rclagent' });
    expect(ep.stop_reason).toBe('forced_answer');
    expect(ep.answer).toEqual([{ pod: 'r1-a' }, { pod }, { pod: 'r0-a' }]);
  });

  it('has no answer when no phase answered and the final review is not a valid print_results', async () => {
    const ep = await runEpisode({
      dataset: ds,
      case: kase,
      policy: new ReplayPolicy(['a', 'b', 'c']),
      protocol: 'rclagent',
      settings: { rclagent: { initial_turns: 1, reflection_turns: 1 } },
    });
    expect(ep).toMatchObject({ stop_reason: 'no_answer', answer: null });
    expect(ep.turns).toHaveLength(3);
  });
});
