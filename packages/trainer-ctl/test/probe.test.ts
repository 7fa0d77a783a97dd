/**
 * The headroom probe (issue 26, item 1) on the real pipeline: the tiny-cpu preset's model after
 * its SFT (testkit/warm-model.ts, the real engine's checkpoint exported to ONNX), the real Nezha
 * data and the run config's split; `trainer-ctl probe` as a user runs it. And the redeploy split:
 * under pod aliases a re-hashed case reaches the model as the same tokens.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { componentAt, runEpisode, spreadCases, type Case, type Dataset } from '@thinkfl/env';
import { ModelPolicy, type ChatModel, type GenerationBackend } from '@thinkfl/rollout';
import { probeCase, summarizeProbe, type CaseProbe } from '../src/eval/probe';
import { modelPolicySettings, openOnnxModel, playSettingsFromConfig, type PlaySettings } from '../src/eval/solvers';
import { loadSplit } from '../src/eval/splits';
import { camelCaseKeys } from '../../../testkit/camel-keys';
import { ensureNezhaDataset, NEZHA_DATASET, REPO_ROOT } from '../../../testkit/nezha';
import { ensureWarmModel } from '../../../testkit/warm-model';

const run = promisify(execFile);
const BIN = join(REPO_ROOT, 'packages', 'trainer-ctl', 'bin', 'trainer-ctl.mjs');
const scratch = mkdtempSync(join(tmpdir(), 'probe-test-'));
let modelDir: string;
let model: { chat: ChatModel; backend: GenerationBackend; close(): Promise<void> };
let config: string;
let aliased: string;
let play: PlaySettings;
let dataset: Dataset;
let heldOut: Case[];

/** tiny-cpu.yaml on the test's dataset, with tool settings changed by `tools`. */
function writeConfig(name: string, tools: Record<string, unknown> = {}): string {
  const c = parse(readFileSync(join(REPO_ROOT, 'configs', 'tiny-cpu.yaml'), 'utf8')) as Record<string, Record<string, unknown>>;
  c.run = { ...c.run, base_dir: REPO_ROOT };
  c.dataset = { ...c.dataset, path: NEZHA_DATASET };
  c.episode = { ...c.episode, tool_settings: { ...(c.episode.tool_settings as object), ...tools } };
  const file = join(scratch, `${name}.yaml`);
  writeFileSync(file, stringify(c));
  return file;
}

const playOf = (file: string): PlaySettings => ({ ...playSettingsFromConfig(file), temperature: 0, concurrency: 1, threads: 1 });

beforeAll(async () => {
  await ensureNezhaDataset();
  modelDir = await ensureWarmModel('tiny-cpu');
  config = writeConfig('tiny-cpu');
  aliased = writeConfig('tiny-cpu-pod-aliases', { pod_aliases: true });
  play = playOf(config);
  ({ dataset, cases: heldOut } = await loadSplit(NEZHA_DATASET, 'eval', config));
  model = await openOnnxModel(modelDir, 1);
}, 600_000);

afterAll(async () => {
  await model?.close();
  rmSync(scratch, { recursive: true, force: true });
});

/** The backend with every request's prompt ids kept, in order. */
function recording(inner: GenerationBackend): { backend: GenerationBackend; prompts: number[][] } {
  const prompts: number[][] = [];
  const backend: GenerationBackend = {
    name: `recording(${inner.name})`,
    generate: (requests) => {
      for (const r of requests) prompts.push([...r.promptIds]);
      return inner.generate(requests);
    },
    close: async () => {},
  };
  return { backend, prompts };
}

/** The case with its truth relabelled to one service (a hand-made label). */
const labelled = (c: Case, service: string): Case => ({ ...c, truth: { level: 'service', service } });

/** Distinct services of an answer, in order. */
function services(answer: CaseProbe['greedy']['answer']): string[] {
  const out: string[] = [];
  for (const item of answer ?? []) {
    const s = componentAt(item, 'service', dataset.topology);
    if (s !== undefined && !out.includes(s)) out.push(s);
  }
  return out;
}

describe('trainer-ctl probe', () => {
  it('at temperature 0 every sample repeats the greedy answer: best of k is greedy, the share ranked first is 0 or 1 with it', async () => {
    const cases = spreadCases(heldOut, 3);
    for (const [i, c] of cases.entries()) {
      const p = await probeCase(dataset, c, model, play, { k: 3, temperature: 0, seed: 0 }, i);
      expect(p.sample_ranks).toEqual([p.greedy.rank, p.greedy.rank, p.greedy.rank]);
      expect(p.best_rr).toBe(p.greedy_rr);
      expect(p.first_share).toBe(p.greedy.rank === 0 ? 1 : 0);
      expect(p.sample_answered).toBe(p.greedy.answer ? 3 : 0);
    }
  }, 300_000);

  it('ranks a hand-labelled case: the root cause first, second or absent in the greedy answer gives 1, 1/2, 0', async () => {
    // A case whose greedy answer names at least two services; its truth is then labelled by hand.
    let found: { c: Case; names: string[] } | undefined;
    for (const c of spreadCases(heldOut, 8)) {
      const names = services((await probeCase(dataset, c, model, play, { k: 1, temperature: 0, seed: 0 }, 0)).greedy.answer);
      if (names.length >= 2) {
        found = { c, names };
        break;
      }
    }
    expect(found, 'no greedy answer with two services among 8 held-out cases').toBeDefined();
    const { c, names } = found!;
    const s = { k: 2, temperature: 0, seed: 0 };
    const first = await probeCase(dataset, labelled(c, names[0]), model, play, s, 0);
    const second = await probeCase(dataset, labelled(c, names[1]), model, play, s, 0);
    const absent = await probeCase(dataset, labelled(c, 'ts-no-such-service'), model, play, s, 0);
    expect([first.greedy_rr, first.best_rr, first.first_share]).toEqual([1, 1, 1]);
    expect([second.greedy.rank, second.greedy_rr, second.best_rr, second.first_share]).toEqual([1, 0.5, 0.5, 0]);
    expect([absent.greedy.rank, absent.greedy_rr, absent.best_rr, absent.first_share]).toEqual([null, 0, 0, 0]);
  }, 300_000);

  it('samples continue the greedy episode token for token and generate from its answer turn on', async () => {
    const c = heldOut[0];
    const k = 3;
    const rec = recording(model.backend);
    const p = await probeCase(dataset, c, { chat: model.chat, backend: rec.backend }, play, { k, temperature: 1, seed: 5 }, 0);
    const n = p.answer_turn;
    expect(n).toBeGreaterThan(0);
    // The greedy walk asks for turns 0..n, each on a longer prompt; every sample then asks first for the answer turn,
    // on the greedy episode's own prompt of that turn: its turns before it were played back, never generated again.
    const greedyPrompts = rec.prompts.slice(0, n + 1);
    for (let t = 1; t <= n; t++) expect(greedyPrompts[t].slice(0, greedyPrompts[t - 1].length)).toEqual(greedyPrompts[t - 1]);
    const same = (a: number[], b: number[]) => a.length === b.length && a.every((x, i) => x === b[i]);
    const later = rec.prompts.slice(n + 1);
    expect(later.filter((q) => same(q, greedyPrompts[n]))).toHaveLength(k);
    for (let t = 0; t < n; t++) expect(later.some((q) => same(q, greedyPrompts[t]))).toBe(false);
    expect(p.sample_ranks).toHaveLength(k);
    expect(p.branch_turn).toBe(n);
  }, 300_000);

  it('with at: 1 the samples replay only the first walk turn and generate from turn 1 on', async () => {
    // A case whose greedy walk has at least three turns, so that turn 1 is neither the first nor the answer turn.
    let c: Case | undefined;
    for (const x of spreadCases(heldOut, 8)) {
      const p = await probeCase(dataset, x, model, play, { k: 1, temperature: 0, seed: 0 }, 0);
      if (p.answer_turn >= 2) {
        c = x;
        break;
      }
    }
    expect(c, 'no greedy walk of three turns among 8 held-out cases').toBeDefined();
    const k = 3;
    const rec = recording(model.backend);
    const p = await probeCase(dataset, c!, { chat: model.chat, backend: rec.backend }, play, { k, temperature: 1, seed: 5, at: 1 }, 0);
    expect([p.branch_turn, p.sample_ranks.length]).toEqual([1, k]);
    const greedyPrompts = rec.prompts.slice(0, p.answer_turn + 1);
    const same = (a: number[], b: number[]) => a.length === b.length && a.every((x, i) => x === b[i]);
    const later = rec.prompts.slice(p.answer_turn + 1);
    // Each sample's first request is turn 1's prompt of the greedy walk (turn 0 played back); turn 0's prompt is never asked again.
    expect(later.filter((q) => same(q, greedyPrompts[1]))).toHaveLength(k);
    expect(later.some((q) => same(q, greedyPrompts[0]))).toBe(false);
  }, 300_000);

  it('summarizes per fault and names the faults where a sample ranks the root cause first and greedy does not', () => {
    const probe = (faultId: string, greedy: number | null, samples: (number | null)[]): CaseProbe => {
      const rr = (r: number | null) => (r === null ? 0 : 1 / (r + 1));
      return {
        case_id: `${faultId}/${Math.random()}`,
        fault_id: faultId,
        answer_turn: 1,
        branch_turn: 1,
        greedy: { answer: null, rank: greedy, stop_reason: 'answered' },
        sample_ranks: samples,
        sample_answered: samples.length,
        greedy_rr: rr(greedy),
        best_rr: Math.max(0, ...samples.map(rr)),
        first_share: samples.filter((r) => r === 0).length / samples.length,
      };
    };
    const sum = summarizeProbe(
      [
        probe('a', 1, [0, 1, null, 2]),
        probe('a', null, [null, null, null, null]),
        probe('b', 0, [0, 0, 1, 1]),
        probe('c', 2, [1, 2, 2, null]),
      ],
      { k: 4, temperature: 1, seed: 0 },
    );
    // By hand: per request greedy RR 0.5, 0, 1, 1/3; best of 4: 1, 0, 1, 0.5; share first: 1/4, 0, 1/2, 0.
    expect(sum.per_request.greedy_mrr).toBeCloseTo((0.5 + 0 + 1 + 1 / 3) / 4, 12);
    expect(sum.per_request.best_of_k_mrr).toBeCloseTo(2.5 / 4, 12);
    expect(sum.per_request.first_share).toBeCloseTo(0.75 / 4, 12);
    expect(sum.per_request.headroom_cases).toBe(1);
    // Per fault (best request): a 0.5 -> 1, b 1 -> 1, c 1/3 -> 1/2.
    expect(sum.faults.map((f) => [f.fault_id, f.cases, f.greedy_rr, f.best_rr, f.headroom_cases])).toEqual([
      ['a', 2, 0.5, 1, 1],
      ['b', 1, 1, 1, 0],
      ['c', 1, 1 / 3, 0.5, 0],
    ]);
    expect(sum.per_fault.greedy_mrr).toBeCloseTo((0.5 + 1 + 1 / 3) / 3, 12);
    expect(sum.per_fault.best_of_k_mrr).toBeCloseTo(2.5 / 3, 12);
    expect(sum.headroom_faults).toEqual(['a']);
    // By hand: every sample at greedy's rank in the second case only (all absent, greedy absent).
    expect(sum.per_request.greedy_rank_cases).toBe(1);
    const same = summarizeProbe(
      [probe('d', 1, [1, 1, 1, 1]), probe('d', null, [null, null]), probe('d', 1, [1, 1, 1, null]), probe('d', 0, [0, 0, 0, 0])],
      { k: 4, temperature: 1, seed: 0 },
    );
    expect(same.per_request.greedy_rank_cases).toBe(3);
  });

  it('runs as a command on the training faults: the tables and the JSON agree with the library', async () => {
    const out = join(scratch, 'probe.json');
    const { stdout } = await run(
      process.execPath,
      [
        BIN,
        'probe',
        '--model',
        modelDir,
        '--config',
        config,
        '--split',
        'train',
        '--limit',
        '2',
        '--k',
        '2',
        '--temperature',
        '1',
        '--seed',
        '3',
        '--threads',
        '1',
        '--out',
        out,
      ],
      { cwd: scratch, maxBuffer: 1 << 24 },
    );
    const saved = JSON.parse(readFileSync(out, 'utf8')) as {
      split: string;
      cases: CaseProbe[];
      summary: ReturnType<typeof summarizeProbe>;
    };
    const { cases: train } = await loadSplit(NEZHA_DATASET, 'train', config);
    const trainIds = new Set(train.map((c) => c.id));
    const heldIds = new Set(heldOut.map((c) => c.id));
    expect(camelCaseKeys(saved, out)).toEqual([]);
    expect(saved.split).toBe('train');
    expect(saved.cases).toHaveLength(2);
    for (const p of saved.cases) {
      expect(trainIds.has(p.case_id) && !heldIds.has(p.case_id)).toBe(true);
      expect(p.sample_ranks).toHaveLength(2);
    }
    // The same case and seeds through the library give the same figures.
    const c = train.find((x) => x.id === saved.cases[0].case_id)!;
    const again = await probeCase(dataset, c, model, play, { k: 2, temperature: 1, seed: 3 }, 0);
    expect(again).toEqual(saved.cases[0]);
    expect(stdout).toMatch(/per request \(2\): greedy MRR \d\.\d{3}, best-of-2 MRR/);
    expect(stdout).toContain(`${saved.cases[1].case_id}  ${saved.cases[1].greedy_rr.toFixed(3)}  ${saved.cases[1].best_rr.toFixed(3)}`);
    expect(stdout).toMatch(/faults where a sample ranks the root cause first and greedy does not: /);
  }, 600_000);
});

describe('the redeploy split', () => {
  /** Prompt ids of every greedy turn of a case. */
  async function promptIds(ds: Dataset, c: Case, p: PlaySettings): Promise<number[][]> {
    const rec = recording(model.backend);
    await runEpisode({
      dataset: ds,
      case: c,
      policy: new ModelPolicy({ backend: rec.backend, chat: model.chat, settings: modelPolicySettings(p, 0) }),
      settings: p.episode,
    });
    return rec.prompts;
  }

  it('holds the held-out faults with every pod re-hashed, which reach the model as the same tokens under pod aliases (and as others without)', async () => {
    const re = await loadSplit(NEZHA_DATASET, 'redeploy', aliased);
    expect(re.cases.map((c) => c.id)).toEqual(heldOut.map((c) => c.id));
    expect(re.cases[0].truth.pod).toBe(re.podNames!.get(heldOut[0].truth.pod!));
    const withAliases = playOf(aliased);
    for (const c of spreadCases(heldOut, 2)) {
      const r = re.cases.find((x) => x.id === c.id)!;
      const original = await promptIds(dataset, c, withAliases);
      expect(original.length).toBeGreaterThan(1);
      expect(await promptIds(re.dataset, r, withAliases)).toEqual(original);
      expect(await promptIds(re.dataset, r, play)).not.toEqual(await promptIds(dataset, c, play));
    }
  }, 600_000);

  it('is a split of trainer-ctl eval: the held-out cases, truths under the new pod names', async () => {
    const out = join(scratch, 'eval-redeploy.json');
    await run(
      process.execPath,
      [
        BIN,
        'eval',
        '--dataset',
        NEZHA_DATASET,
        '--config',
        aliased,
        '--split',
        'redeploy',
        '--policy',
        'expert',
        '--limit',
        '3',
        '--out',
        out,
      ],
      { cwd: scratch, maxBuffer: 1 << 24 },
    );
    const saved = JSON.parse(readFileSync(out, 'utf8')) as {
      split: string;
      requests: { case_id: string; answer: { pod?: string }[] | null }[];
    };
    const re = await loadSplit(NEZHA_DATASET, 'redeploy', aliased);
    const oldPods = new Set(re.podNames!.keys());
    const newPods = new Set(re.podNames!.values());
    const held = new Set(heldOut.map((c) => c.id));
    expect(saved.split).toBe('redeploy');
    expect(saved.requests).toHaveLength(3);
    const answered = saved.requests
      .flatMap((r) => r.answer ?? [])
      .map((a) => a.pod)
      .filter((p): p is string => !!p);
    expect(answered.length).toBeGreaterThan(0);
    for (const r of saved.requests) expect(held.has(r.case_id)).toBe(true);
    for (const pod of answered) expect([newPods.has(pod), oldPods.has(pod)]).toEqual([true, false]);
  }, 300_000);
});
