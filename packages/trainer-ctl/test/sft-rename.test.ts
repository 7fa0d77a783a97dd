/**
 * Consistent renaming of teacher conversations on real Nezha cases: whole names only (a pod
 * outside the mapping by its prefix, never a name inside a longer one), one bijection over the
 * topology's services and pods, and renamed conversations whose answer names the renamed true service
 * and that rename back to the original word for word.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadDataset, spreadCases, type Case, type Dataset } from '@thinkfl/env';
import { writeTinyTokenizer } from '@thinkfl/rollout';
import { loadRunConfig } from '../src/config/index';
import { configTeacher } from '../src/controller/teacher';
import { ensureNezhaDataset, REPO_ROOT } from '../../../testkit/nezha';
import { renamedEpisode, renamedEpisodes, nameRenamer, namePermutation } from '@thinkfl/env';
import { splitCases } from '../src/sft/index';
import { teacherEpisodes, type TeacherEpisode } from '@thinkfl/env';

const episode = { d_max: 4, tool_settings: { span_aliases: true } };
let dataset: Dataset;
let datasetDir: string;
let cases: Case[];
let episodes: TeacherEpisode[];

beforeAll(async () => {
  datasetDir = await ensureNezhaDataset();
  dataset = await loadDataset(datasetDir);
  cases = spreadCases(splitCases(dataset.cases, { by: 'fault', eval_fraction: 0.3 }, 0).train, 30);
  episodes = (await teacherEpisodes({ dataset, cases, episode, reasoning: false })).episodes;
}, 120_000);

const inverse = (m: ReadonlyMap<string, string>) => new Map([...m].map(([a, b]) => [b, a]));

describe('nameRenamer', () => {
  it('renames whole names and pod prefixes, never a name inside a longer one', () => {
    const rename = nameRenamer(
      new Map([
        ['ts-order-service', 'ts-seat-service'],
        ['ts-order-other-service', 'ts-order-service'],
        ['ts-food-service', 'ts-user-service'],
      ]),
    );
    const text =
      '- s4 ts-order-service pod=ts-order-service-7d8f9c-abcde "HTTP GET"\n' +
      'ts-order-other-service, ts-station-food-service, ts-admin-order-service, ts-food-service.\n' +
      '{"service":"ts-food-service","pod":"ts-food-service-5f-x2"} /api/v1/orderservice';
    expect(rename(text)).toBe(
      '- s4 ts-seat-service pod=ts-seat-service-7d8f9c-abcde "HTTP GET"\n' +
        'ts-order-service, ts-station-food-service, ts-admin-order-service, ts-user-service.\n' +
        '{"service":"ts-user-service","pod":"ts-user-service-5f-x2"} /api/v1/orderservice',
    );
  });
});

describe('namePermutation', () => {
  it("is a bijection of the topology services, each pod going to the new service's pod, different between seeds", () => {
    const { services, pods } = dataset.topology;
    const a = namePermutation(dataset.topology, 1);
    const b = namePermutation(dataset.topology, 2);
    const servicesOf = (m: Map<string, string>) => services.map((s) => m.get(s)!);
    expect(servicesOf(a).sort()).toEqual([...services].sort());
    expect(servicesOf(a)).not.toEqual(servicesOf(b));
    expect(servicesOf(a).filter((s, i) => s === services[i]).length).toBeLessThan(services.length / 2);
    // Nezha's topology has one pod per service.
    expect(pods).toHaveLength(services.length);
    for (const p of pods) expect(dataset.topology.serviceOfPod(a.get(p.pod)!)).toBe(a.get(p.service));
    expect(a.size).toBe(services.length + pods.length);
    expect(namePermutation(dataset.topology, 1)).toEqual(a);
  });
});

describe('renamed teacher conversations', () => {
  it('answer with the renamed true service and rename back to the original conversation', () => {
    expect(episodes.length).toBeGreaterThan(3);
    for (const [i, ep] of episodes.entries()) {
      const mapping = namePermutation(dataset.topology, 100 + i);
      const renamed = renamedEpisode(ep, mapping);
      const truth = ep.case.truth.service!;
      expect(renamed.record.answer![0].service).toBe(mapping.get(truth));
      expect(renamed.record.answer![0].pod).toBe(mapping.get(ep.record.answer![0].pod!));
      expect(dataset.topology.serviceOfPod(renamed.record.answer![0].pod!)).toBe(mapping.get(truth));
      const lastCall = renamed.record.messages.filter((m) => m.role === 'assistant').at(-1)!.content;
      expect(lastCall).toContain(`"service":"${mapping.get(truth)}"`);
      // The user prompt names the entry service under its new name.
      const entry = /Service: (\S+),/.exec(ep.record.messages[1].content)![1];
      expect(renamed.record.messages[1].content).toContain(`Service: ${mapping.get(entry)},`);
      const back = nameRenamer(inverse(mapping));
      renamed.record.messages.forEach((m, k) => expect(back(m.content)).toBe(ep.record.messages[k].content));
      expect(renamed.case).toBe(ep.case);
      expect(renamed.untrainedTurns).toEqual(ep.untrainedTurns);
    }
  });

  it('replaces each conversation by `copies` copies with their own permutations; 0 keeps the originals', () => {
    const some = episodes.slice(0, 3);
    expect(renamedEpisodes(some, dataset.topology, {}, 0)).toEqual(some);
    const copies = renamedEpisodes(some, dataset.topology, { copies: 4 }, 7);
    expect(copies).toHaveLength(12);
    expect(copies.map((c) => c.case.id)).toEqual(some.flatMap((e) => Array(4).fill(e.case.id)));
    const answers = copies.slice(0, 4).map((c) => c.record.answer![0].service);
    expect(new Set(answers).size).toBeGreaterThan(1);
    expect(() => renamedEpisodes(some, dataset.topology, { copies: -1 }, 0)).toThrow();
  });
});

describe("the run config's teacher (stages.priming.sft.rename)", () => {
  it('tokenizes rename.copies copies of each correct conversation, as long as the original: every renamed name is one token too', async () => {
    const model = mkdtempSync(join(tmpdir(), 'sft-rename-'));
    await writeTinyTokenizer(model, datasetDir);
    const config = loadRunConfig(join(REPO_ROOT, 'configs', 'cpu-learn.yaml'), { checkPaths: false }).config;
    config.model.dir = model;
    Object.assign(config.stages.priming.sft, { cases: 'run', variants: 1, conversations: 10_000 });
    const plain = await configTeacher(
      {
        ...config,
        stages: { ...config.stages, priming: { ...config.stages.priming, sft: { ...config.stages.priming.sft, rename: { copies: 0 } } } },
      },
      dataset,
      cases,
    )();
    const renamed = await configTeacher(config, dataset, cases)();
    const copies = config.stages.priming.sft.rename.copies;
    expect(plain.length).toBeGreaterThan(3);
    expect(renamed).toHaveLength(copies * plain.length);
    // Round-robin over the cases: copy k of every conversation before copy k + 1 of any.
    renamed.forEach((r, j) => {
      const original = plain[j % plain.length];
      expect(r.ids).toHaveLength(original.ids.length);
      expect(r.mask).toEqual(original.mask);
    });
    expect(renamed.filter((r, j) => r.ids.some((id, t) => id !== plain[j % plain.length].ids[t])).length).toBeGreaterThan(
      renamed.length / 2,
    );
  }, 120_000);
});
