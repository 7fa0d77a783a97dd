/**
 * The seed systems' protocols played by a model-like policy (ReplayPolicy messages) on the real
 * Nezha data, through parsing, the environment and grading.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { loadDataset, ReplayPolicy, runEpisode, type Case, type Dataset } from '@thinkfl/env';
import { gradeGroup } from '../src/index';
import { toolCallText } from '../../../testkit/tool-calls';

let ds: Dataset;
let kase: Case;
let faultType: string;

beforeAll(async () => {
  ds = await loadDataset(await ensureNezhaDataset());
  kase = ds.cases[0];
  faultType = ds.faults.find((f) => f.id === kase.fault_id)!.type;
});

const TAGGED = (root: string) =>
  `<think>The sketch shows errors below the order call.</think>\n<Fault>a failing service</Fault>\n<Counterfactual>without it the caller would not fail</Counterfactual>\n<root>${root}</root>`;

/** The first case played under `protocol` by a policy that replays `messages`. */
const replayed = (protocol: string, messages: string[], settings?: Record<string, unknown>) =>
  runEpisode({ dataset: ds, case: kase, protocol, settings, policy: new ReplayPolicy(messages) });

/** An episode of case `q` that ended with `answer` and nothing else, as a protocol's grader reads it. */
const answered = (protocol: string, answer: unknown) =>
  ({
    case_id: 'q',
    protocol,
    messages: [],
    tool_calls: [],
    turns: [],
    parse_errors: [],
    answer,
    path: [],
    stop_reason: 'answered',
    timing: { started_at: 0, wall_ms: 0 },
  }) as never;

describe('oracl', () => {
  it('parses the <root> tag of one tagged turn and grades it with the oracl preset', async () => {
    const pod = kase.truth.pod!;
    const other = ds.topology.pods.find((p) => p.service !== kase.truth.service)!.pod;
    const ep = await replayed('oracl', [TAGGED(`${other} | cpu_contention\n${pod} | ${faultType}`)]);
    expect(ep.stop_reason).toBe('answered');
    expect(ep.answer).toEqual([
      { service: ds.topology.serviceOfPod(other), pod: other, type: 'cpu_contention' },
      { service: kase.truth.service, pod, type: faultType },
    ]);
    expect(ep.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant']);
    expect(ep.messages[1].content).toMatch(/Call graph \(caller -> callee: calls\):\n① -> ②/);
    expect(ep.turns).toEqual([expect.objectContaining({ parsed: true, offered: [] })]);
    const g = await gradeGroup(
      [ep],
      { truth: kase.truth, d_max: 10, podToService: (p) => ds.topology.serviceOfPod(p), faultType },
      'oracl',
    );
    // pods {other, truth}: S_pod = 1/(2+eps); pairs TP 1, FP 1, FN 0: F_2 = 5/(6+eps); bonus 0.5; format 0; length 0
    const eps = 1e-6;
    expect(g.totals[0]).toBeCloseTo(0.1 / (2 + eps) + (0.9 * 5) / (6 + eps) + 0.5, 9);
  });

  it('an answer without <root> is a parse error with no answer, and is graded', async () => {
    const ep = await replayed('oracl', ['<think>no idea</think>']);
    expect(ep.stop_reason).toBe('no_answer');
    expect(ep.parse_errors).toEqual([expect.objectContaining({ message: 'no <root>...</root> in the answer' })]);
    const g = await gradeGroup(
      [ep],
      { truth: kase.truth, d_max: 10, podToService: (p) => ds.topology.serviceOfPod(p), faultType },
      'oracl',
    );
    // result 0 - 0.5 (one miss); format: think passes, Fault/Counterfactual/root absent: 12/16
    expect(g.totals[0]).toBeCloseTo(-0.5 - 0.75, 12);
  });
});

describe('rclagent', () => {
  it('grades a replayed three-phase episode with the stage-3 reward', async () => {
    const pod = kase.truth.pod!;
    const ep = await replayed('rclagent', [
      toolCallText('search_traces', { parent_span_id: kase.entry_span_id }),
      toolCallText('print_results', { root_causes: [{ pod }] }),
      toolCallText('search_fluctuating_metrics', { service_name: pod, timestamp: Math.floor(kase.timestamp_us / 1e6) }),
      toolCallText('print_results', { root_causes: [{ pod }] }),
      'I forgot the format',
    ]);
    // The final review failed: forced answer R1 ∪ R0 = [pod].
    expect(ep).toMatchObject({ stop_reason: 'forced_answer', answer: [{ pod }] });
    const g = await gradeGroup([ep], { truth: kase.truth, d_max: 10, podToService: (p) => ds.topology.serviceOfPod(p) }, 'stage3');
    // R = 1 (rank 0); path of 2 steps, the truth named at step 2 (metrics of the pod): P = min(2/(2-0), 1) = 1; H = 0.
    expect(g.samples[0].graders.multi_factor.parts).toMatchObject({ R: 1, H: 0 });
    expect(g.totals[0]).toBeCloseTo(1 + 0.2 * g.samples[0].graders.multi_factor.parts.P, 12);
  });
});

describe('fault_type grader (KnowledgeMind FT@k)', () => {
  it('scores 1/(r+1) for the true type at place r when the top component is right, else 0', async () => {
    const pod = kase.truth.pod!;
    const other = ds.topology.pods.find((p) => p.service !== kase.truth.service)!.pod;
    const { faultType: grader } = await import('../src/index');
    const ctx = {
      truth: kase.truth,
      d_max: 10,
      questionId: 'q',
      podToService: (p: string) => ds.topology.serviceOfPod(p),
      faultType: 'return',
      settings: (await import('../src/index')).parseGraderSettings({}),
    };
    const ep = (answer: unknown) => answered('knowledgemind', answer);
    // types for the right pod: exception, cpu, return -> return at place 2 -> 1/3
    const three = [
      { pod, type: 'exception' },
      { pod, type: 'CPU contention' },
      { pod, type: 'Return' },
    ];
    expect((await grader.grade(ep(three), ctx)).score).toBeCloseTo(1 / 3, 12);
    expect((await grader.grade(ep([{ pod, type: 'return' }]), ctx)).score).toBe(1);
    // wrong top component: 0 even with the right type further down
    expect(
      (
        await grader.grade(
          ep([
            { pod: other, type: 'return' },
            { pod, type: 'return' },
          ]),
          ctx,
        )
      ).score,
    ).toBe(0);
    expect((await grader.grade(ep([{ pod, type: 'exception' }]), ctx)).score).toBe(0);
  });
});

describe('openrca graders on an rcaflow episode', () => {
  it("turns the answer into OpenRCA's JSON and scores it with the reference rules", async () => {
    const { openRcaAnswer, scoringPointsOf, parseGraderSettings } = await import('../src/index');
    const pod = kase.truth.pod!;
    const fault = ds.faults.find((f) => f.id === kase.fault_id)!;
    const ctx = {
      truth: kase.truth,
      d_max: 10,
      questionId: 'q',
      podToService: (p: string) => ds.topology.serviceOfPod(p),
      faultType,
      faultStartUs: fault.start_us,
      settings: parseGraderSettings({}),
    };
    const t = new Date(Math.floor(fault.start_us / 1000) + 45_000).toISOString().slice(0, 19).replace('T', ' ');
    const sp = scoringPointsOf(ctx);
    expect(sp.failures).toBe(1);
    expect(sp.points.split('\n')).toHaveLength(3);
    const ep = (answer: unknown) => answered('rcaflow', answer);
    expect(openRcaAnswer([{ pod, type: faultType, time: t }], 1, ctx)).toBe(
      JSON.stringify({ '1': { 'root cause occurrence datetime': t, 'root cause component': pod, 'root cause reason': faultType } }),
    );
    // All three points (45 s off is within 60 s): 1, Correct.
    let g = await gradeGroup(
      [ep([{ pod, type: faultType, time: t }])],
      { ...ctx, questionId: 'q' },
      {
        terms: [
          { grader: 'openrca_score', weight: 1 },
          { grader: 'openrca_correct', weight: 10 },
        ],
      },
    );
    expect(g.totals[0]).toBe(11);
    // Right pod, wrong type, no time: 1 of 3 -> 0.33, not Correct.
    g = await gradeGroup(
      [ep([{ pod, type: 'cpu_contention' }])],
      { ...ctx, questionId: 'q' },
      {
        terms: [
          { grader: 'openrca_score', weight: 1 },
          { grader: 'openrca_correct', weight: 10 },
        ],
      },
    );
    expect(g.totals[0]).toBe(0.33);
  });
});

describe('knowledgemind and rcaflow played by a replayed policy, then graded', () => {
  it('knowledgemind: scores through tools, answer graded by recall and fault_type', async () => {
    const pod = kase.truth.pod!;
    const ep = await replayed(
      'knowledgemind',
      [
        toolCallText('score_services', { scores: { [kase.truth.service!]: 8 } }),
        toolCallText('score_simulation', { score: 7 }),
        toolCallText('print_results', {
          root_causes: [
            { pod, type: 'cpu_contention' },
            { pod, type: faultType },
          ],
        }),
      ],
      { knowledgemind: { simulations: 1 } },
    );
    expect(ep.stop_reason).toBe('answered');
    const g = await gradeGroup(
      [ep],
      { truth: kase.truth, d_max: 10, podToService: (p) => ds.topology.serviceOfPod(p), faultType },
      {
        terms: [
          { grader: 'recall', weight: 1 },
          { grader: 'fault_type', weight: 1 },
        ],
      },
    );
    // recall 1 (rank 0); the true type second -> 1/2
    expect(g.totals[0]).toBe(1.5);
  });

  it('rcaflow: the workflow steps, then the answer graded by OpenRCA rules', async () => {
    const pod = kase.truth.pod!;
    const ts = Math.floor(kase.timestamp_us / 1e6);
    const fault = ds.faults.find((f) => f.id === kase.fault_id)!;
    const t = new Date(Math.floor(fault.start_us / 1000)).toISOString().slice(0, 19).replace('T', ' ');
    // Confidence 1 everywhere, so no re-plan: one reply fits every offered step of the default workflow.
    class Stepper extends ReplayPolicy {
      override async next(ctx: Parameters<ReplayPolicy['next']>[0]) {
        const tool = ctx.tools[0].name;
        if (tool === 'search_traces') return { content: toolCallText(tool, { parent_span_id: kase.entry_span_id }) };
        if (tool === 'search_fluctuating_metrics' || tool === 'search_logs')
          return { content: toolCallText(tool, { service_name: pod, timestamp: ts }) };
        if (tool === 'report_confidence') return { content: toolCallText(tool, { confidence: 1 }) };
        return { content: toolCallText('print_results', { root_causes: [{ pod, type: faultType, time: t }] }) };
      }
    }
    const ep = await runEpisode({ dataset: ds, case: kase, protocol: 'rcaflow', policy: new Stepper([]) });
    expect(ep.stop_reason).toBe('answered');
    expect(ep.parse_errors).toEqual([]);
    const g = await gradeGroup(
      [ep],
      { truth: kase.truth, d_max: 10, podToService: (p) => ds.topology.serviceOfPod(p), faultType, faultStartUs: fault.start_us },
      { terms: [{ grader: 'openrca_correct', weight: 1 }] },
    );
    expect(g.totals[0]).toBe(1);
  });
});
