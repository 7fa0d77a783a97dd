/** RCAFlow: behaviour-tree semantics by hand, the 0.90 re-plan, the OpenRCA reader, the protocol with a replayed policy. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { loadDataset, readOpenRca } from '../src/datasets/index';
import { ReplayPolicy, runEpisode } from '../src/episodes/index';
import { BtInterpreter, parseWorkflow, type BtNode, type BtRuntime } from '../src/episodes/rcaflow/tree';
import type { Dataset } from '../src/types';
import { toolCallText } from '../../../testkit/tool-calls';

const leaf = (tool: string): BtNode => ({ type: 'tool', tool, name: tool });

/** A runtime whose leaves succeed as listed, with confidences given in order; records what ran. */
function runtime(success: Record<string, boolean>, confidences: number[] = []) {
  const ran: string[] = [];
  let replans = 0;
  const rt: BtRuntime = {
    leaf: async (n) => (ran.push(n.tool), success[n.tool] ?? false),
    confidence: async () => confidences.shift() ?? 1,
    replan: async () => (replans++, ran.push('replan'), true),
    alive: () => true,
  };
  return { rt, ran, replans: () => replans };
}

const run = async (root: BtNode, success: Record<string, boolean>, confidences?: number[], workflows: Record<string, BtNode> = {}) => {
  const r = runtime(success, confidences);
  const bt = new BtInterpreter(parseWorkflow({ name: 'w', root, workflows }), r.rt, { theta: 0.9 });
  const ok = await bt.run();
  return { ok, ran: r.ran, bt, replans: r.replans() };
};

describe('behaviour-tree semantics', () => {
  it('Sequence runs in order and stops at the first failure', async () => {
    const seq: BtNode = { type: 'sequence', children: [leaf('a'), leaf('b'), leaf('c')] };
    expect(await run(seq, { a: true, b: true, c: true })).toMatchObject({ ok: true, ran: ['a', 'b', 'c'] });
    expect(await run(seq, { a: true, b: false, c: true })).toMatchObject({ ok: false, ran: ['a', 'b'] });
  });

  it('Selector falls through failures and stops at the first success', async () => {
    const sel: BtNode = { type: 'selector', children: [leaf('a'), leaf('b'), leaf('c')] };
    expect(await run(sel, { a: false, b: true, c: true })).toMatchObject({ ok: true, ran: ['a', 'b'] });
    expect(await run(sel, { a: false, b: false, c: false })).toMatchObject({ ok: false, ran: ['a', 'b', 'c'] });
  });

  it('Parallel runs every child and needs min_success of them (default all)', async () => {
    const par = (min?: number): BtNode => ({
      type: 'parallel',
      children: [leaf('a'), leaf('b'), leaf('c')],
      ...(min ? { min_success: min } : {}),
    });
    expect(await run(par(), { a: true, b: false, c: true })).toMatchObject({ ok: false, ran: ['a', 'b', 'c'] });
    expect(await run(par(2), { a: true, b: false, c: true })).toMatchObject({ ok: true, ran: ['a', 'b', 'c'] });
  });

  it('re-plans after a Selector when the confidence is at most 0.90, not above', async () => {
    const sel: BtNode = {
      type: 'sequence',
      children: [
        { type: 'selector', children: [leaf('a')] },
        { type: 'selector', children: [leaf('b')] },
        { type: 'selector', children: [leaf('c')] },
      ],
    };
    const r = await run(sel, { a: true, b: true, c: true }, [0.9, 0.91, 0.2]);
    expect(r.ran).toEqual(['a', 'replan', 'b', 'c', 'replan']);
    expect(r.bt.checkpoints).toEqual([
      { after: 'selector', confidence: 0.9, replanned: true },
      { after: 'selector', confidence: 0.91, replanned: false },
      { after: 'selector', confidence: 0.2, replanned: true },
    ]);
  });

  it('a nested workflow runs on its own branch, merged into the parent and followed by a confidence check', async () => {
    const seen: string[][] = [];
    const r = runtime({ a: true, b: true });
    const rt: BtRuntime = { ...r.rt, leaf: async (_n, stack) => (seen.push(stack.map((b) => b.name)), true) };
    const bt = new BtInterpreter(
      parseWorkflow({
        name: 'main',
        root: { type: 'sequence', children: [leaf('a'), { type: 'workflow', workflow: 'sub' }] },
        workflows: { sub: leaf('b') },
      }),
      rt,
      { theta: 0.9 },
    );
    expect(await bt.run()).toBe(true);
    expect(seen).toEqual([['main'], ['main', 'sub']]);
    expect(bt.stack.map((b) => b.name)).toEqual(['main']);
    expect(bt.stack[0].workspace).toEqual([
      { tool: 'a', success: true },
      { tool: 'b', success: true },
    ]);
    expect(bt.checkpoints).toEqual([{ after: 'branch', confidence: 1, replanned: false }]);
  });

  it('validates workflows against the schema, naming the path', () => {
    expect(() => parseWorkflow({ name: 'w', root: { type: 'sequence', children: [] } })).toThrow(/workflow\.root\.children/);
    expect(() => parseWorkflow({ name: 'w', root: { type: 'workflow', workflow: 'x' } })).toThrow(/unknown workflow "x"/);
    expect(() =>
      parseWorkflow({ name: 'w', root: { type: 'workflow', workflow: 'x' }, workflows: { x: { type: 'workflow', workflow: 'x' } } }),
    ).toThrow(/nests itself/);
    expect(() => parseWorkflow({ name: 'w', root: { type: 'parallel', min_success: 3, children: [leaf('a')] } })).toThrow(/min_success/);
  });
});

describe('OpenRCA record.csv / query.csv', () => {
  it('reads records by column name and queries with their failures and window', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'openrca-'));
    // Column order as in one system; another order must read the same.
    writeFileSync(
      join(dir, 'record.csv'),
      'timestamp,level,component,datetime,reason\n1614841020,pod,Tomcat01,2021-03-04 14:57:00,high memory usage\n',
    );
    writeFileSync(
      join(dir, 'query.csv'),
      'task_index,instruction,scoring_points\n' +
        'task_3,"On March 4, 2021, from 14:30 to 15:00, one failure occurred. Find its component.","The only predicted root cause component is Tomcat01"\n' +
        'task_7,"Within March 4, 2021, 18:00 to 19:30, there were two failures.","The 1-th root cause occurrence time is within 1 minutes (i.e., <=1min) of 2021-03-04 18:10:00\nThe 1-th predicted root cause component is A\nThe 1-th predicted root cause reason is x\nThe 2-th root cause occurrence time is within 1 minutes (i.e., <=1min) of 2021-03-04 19:00:00\nThe 2-th predicted root cause component is B\nThe 2-th predicted root cause reason is y"\n',
    );
    const { records, queries } = await readOpenRca(dir);
    expect(records).toEqual([
      { level: 'pod', component: 'Tomcat01', timestampS: 1614841020, datetime: '2021-03-04 14:57:00', reason: 'high memory usage' },
    ]);
    expect(queries.map((q) => [q.task, q.failures, q.window])).toEqual([
      ['task_3', 1, { from: '2021-03-04 14:30', to: '2021-03-04 15:00' }],
      ['task_7', 2, { from: '2021-03-04 18:00', to: '2021-03-04 19:30' }],
    ]);
    writeFileSync(join(dir, 'query.csv'), 'task_index,instruction,scoring_points\ntask_9,x,The only predicted root cause component is A\n');
    await expect(readOpenRca(dir)).rejects.toThrow(/query\.csv:2.*task_9/);
  });
});

describe('rcaflow protocol with a replayed policy', () => {
  let ds: Dataset;
  beforeAll(async () => {
    ds = await loadDataset(await ensureNezhaDataset());
  });

  it('offers one tool per step, re-plans at confidence 0.9, and takes an OpenRCA-style answer', async () => {
    const kase = ds.cases[0];
    const ts = Math.floor(kase.timestamp_us / 1e6);
    const pod = kase.truth.pod!;
    const offered: string[][] = [];
    const replay = new ReplayPolicy([
      toolCallText('search_traces', { parent_span_id: kase.entry_span_id }), // anomaly detection
      toolCallText('search_traces', { parent_span_id: kase.entry_span_id }), // selector: trace first
      toolCallText('search_fluctuating_metrics', { service_name: pod, timestamp: ts }), // selector: metrics (if the first failed)
      toolCallText('report_confidence', { confidence: 0.9 }), // after the selector: re-plan
      toolCallText('search_logs', { service_name: kase.truth.service, timestamp: ts }), // the inserted step
      toolCallText('search_logs', { service_name: kase.truth.service, timestamp: ts }), // branch: logs
      toolCallText('search_traces', { parent_span_id: kase.entry_span_id }), // branch: trace
      toolCallText('report_confidence', { confidence: 0.95 }), // after the branch: go on
      toolCallText('print_results', { root_causes: [{ pod, type: 'exception', time: '2023-01-29 08:43:00' }] }),
    ]);
    const policy = {
      name: 'spy',
      next: async (ctx: Parameters<ReplayPolicy['next']>[0]) => (offered.push(ctx.tools.map((t) => t.name)), replay.next(ctx)),
    };
    const ep = await runEpisode({ dataset: ds, case: kase, policy, protocol: 'rcaflow' });
    expect(ep.stop_reason).toBe('answered');
    expect(ep.answer).toEqual([{ pod, type: 'exception', time: '2023-01-29 08:43:00' }]);
    expect(offered[0]).toEqual(['search_traces']);
    const conf = offered.findIndex((t) => t[0] === 'report_confidence');
    expect(offered[conf + 1]).toEqual(['search_traces', 'search_fluctuating_metrics', 'search_logs']);
    expect(offered.at(-1)).toEqual(['print_results']);
    expect(ep.parse_errors).toEqual([]);
  });
});
