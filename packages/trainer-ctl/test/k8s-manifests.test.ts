/**
 * deploy/k8s (issue 30, acceptance 2): every manifest the overlays and the storage kustomization
 * render (with kustomize v5.8.2, built from its Go module by deploy/k8s/kustomize.sh) is valid
 * against the Kubernetes API's own OpenAPI definitions of Kubernetes v1.34.4
 * (api/openapi-spec/swagger.json of the Go module k8s.io/kubernetes@v1.34.4, cut to the kinds
 * used and vendored in deploy/k8s/schema/kubernetes-openapi.json by deploy/k8s/schema/vendor.ts),
 * strictly: an unknown field is an error, as under kubectl's default server-side validation. Then
 * the deployment contract, as a list of violations that must be empty, and which does name each
 * broken rule of a manifest broken on purpose. deploy/slurm's run config and vLLM flags are held
 * to the same config and to docker/compose.yaml. No cluster runs here: manifests are checked,
 * not applied.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ajv, type ValidateFunction } from 'ajv';
import { parse, parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadRunConfig, type RunConfig } from '../src/config/index';
import { REPO_ROOT } from '../../../testkit/nezha';

type Obj = Record<string, any>;
const K8S = join(REPO_ROOT, 'deploy', 'k8s');
const OVERLAYS = ['single-node', 'multi-node'];
let kustomize: string;
let scratch: string;

beforeAll(() => {
  // Built once into .cache/ (a few minutes on 2 busy cores), then reused.
  kustomize = execFileSync('bash', [join(K8S, 'kustomize.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
  scratch = mkdtempSync(join(tmpdir(), 'k8s-manifests-'));
}, 900_000);
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const render = (dir: string): Obj[] =>
  parseAllDocuments(execFileSync(kustomize, ['build', join(K8S, dir)], { encoding: 'utf8' })).map((d) => d.toJS() as Obj);

// ---- the Kubernetes OpenAPI definitions as JSON Schema --------------------------------------

const vendored = JSON.parse(readFileSync(join(K8S, 'schema', 'kubernetes-openapi.json'), 'utf8')) as {
  source: string;
  kinds: Record<string, string>;
  definitions: Record<string, Obj>;
};
/**
 * Two adaptations, as kubeconform's schemas make them: IntOrString and Quantity are declared as
 * strings but the API server's decoders take JSON numbers too (targetPort: 8000, nvidia.com/gpu: 1);
 * and objects with declared properties refuse others (strict field validation). Formats (int32,
 * date-time) are not checked.
 */
function jsonSchema(defs: Record<string, Obj>): Obj {
  const strict = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(strict);
    if (v === null || typeof v !== 'object') return v;
    const o = Object.fromEntries(
      Object.entries(v).map(([k, x]) => [
        k,
        k === 'properties' ? Object.fromEntries(Object.entries(x as Obj).map(([p, s]) => [p, strict(s)])) : strict(x),
      ]),
    ) as Obj;
    if (o.properties && o.additionalProperties === undefined) o.additionalProperties = false;
    return o;
  };
  const out = strict(defs) as Record<string, Obj>;
  for (const name of ['io.k8s.apimachinery.pkg.util.intstr.IntOrString', 'io.k8s.apimachinery.pkg.api.resource.Quantity']) {
    const { type: _t, format: _f, ...rest } = out[name];
    out[name] = { ...rest, anyOf: [{ type: 'string' }, { type: 'integer' }] };
  }
  return { $id: 'k8s', definitions: out };
}
const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
ajv.addSchema(jsonSchema(vendored.definitions));
const validators = new Map<string, ValidateFunction>();

/** Schema errors of one rendered object, as "Kind/name /path: message". */
function schemaErrors(o: Obj): string[] {
  const gvk = `${o.apiVersion}/${o.kind}`;
  const def = vendored.kinds[gvk];
  const id = `${o.kind}/${o.metadata?.name}`;
  if (!def) return [`${id}: no definition of ${gvk} vendored (add it to deploy/k8s/schema/vendor.ts and run it)`];
  if (!validators.has(def)) validators.set(def, ajv.getSchema(`k8s#/definitions/${def}`)!);
  const v = validators.get(def)!;
  if (v(o)) return typeof o.metadata?.name === 'string' ? [] : [`${id}: metadata.name missing`];
  return v.errors!.map(
    (e) =>
      `${id} ${e.instancePath}: ${e.message}${e.params && 'additionalProperty' in e.params ? ` (${e.params.additionalProperty})` : ''}`,
  );
}

// ---- the contract ---------------------------------------------------------------------------

const compose = parse(readFileSync(join(REPO_ROOT, 'docker', 'compose.yaml'), 'utf8'), { merge: true }) as {
  services: Record<string, Obj>;
};
const composeVllm = compose.services.vllm;
/** --flag=value pairs of a command line ([--enable-lora] -> ['--enable-lora', true]). */
const flags = (args: string[]): Map<string, string | true> =>
  new Map(
    args
      .filter((a) => a.startsWith('--'))
      .map((a): [string, string | true] => (a.includes('=') ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] : [a, true])),
  );

/** vLLM flags that differ from docker/compose.yaml's, and compose env variables missing. */
function vllmDrift(args: string[], envNames: string[], where: string): string[] {
  const out: string[] = [];
  const mine = flags(args);
  const theirs = flags(composeVllm.command as string[]);
  for (const [f, v] of theirs) {
    if (!mine.has(f)) out.push(`${where}: vLLM flag ${f} of docker/compose.yaml missing`);
    // A value compose takes from the environment (${VAR:-default}) is a per-deployment knob.
    else if (!(typeof v === 'string' && v.includes('${')) && mine.get(f) !== v)
      out.push(`${where}: vLLM ${f}=${mine.get(f)}, docker/compose.yaml has ${v}`);
  }
  for (const f of mine.keys()) if (!theirs.has(f)) out.push(`${where}: vLLM flag ${f} not in docker/compose.yaml`);
  for (const e of Object.keys(composeVllm.environment))
    if (!envNames.includes(e)) out.push(`${where}: vLLM environment ${e} of docker/compose.yaml missing`);
  return out;
}

/** The run config's own rules: valid under loadRunConfig, LoRA within vLLM's rank, no password in the Redis URL. */
function configViolations(yamlText: string, name: string, maxLoraRank: number): { config?: RunConfig; out: string[] } {
  const file = join(scratch, `${name.replace(/[^A-Za-z0-9.-]/g, '_')}.yaml`);
  writeFileSync(file, yamlText);
  let config: RunConfig;
  try {
    config = loadRunConfig(file, { checkPaths: false }).config;
  } catch (e) {
    return { out: [`${name}: not a valid run config: ${(e as Error).message}`] };
  }
  const out: string[] = [];
  const backend = config.generation.backend;
  if (backend.kind !== 'vllm') out.push(`${name}: generation.backend.kind is ${backend.kind}, not vllm`);
  else if (backend.policy_format !== 'weights')
    out.push(`${name}: policy_format ${backend.policy_format}: vLLM loads the LoRA adapter (weights)`);
  const r = config.model.lora?.r;
  if (r === undefined) out.push(`${name}: no model.lora: vLLM's runtime loading takes LoRA adapters only`);
  else if (r > maxLoraRank) out.push(`${name}: model.lora.r ${r} above vLLM's --max-lora-rank ${maxLoraRank}`);
  const redis = config.queue.redis_url ? new URL(config.queue.redis_url) : undefined;
  if (!redis) out.push(`${name}: queue.redis_url unset: the workers on other pods need the cluster's Redis`);
  else if (redis.password) out.push(`${name}: queue.redis_url carries a password (REDIS_PASSWORD supplies it)`);
  return { config, out };
}

const SECRETISH = /PASSWORD|TOKEN|SECRET|API_?KEY/i;

/** Every contract violation of one overlay's rendered objects (with the storage kustomization's). */
function violations(objs: Obj[]): string[] {
  const out: string[] = [];
  const find = (kind: string, name: string) => objs.find((o) => o.kind === kind && o.metadata?.name === name);
  const need = (kind: string, name: string) => {
    const o = find(kind, name);
    if (!o) out.push(`${kind}/${name} missing`);
    return o;
  };
  const podOf = (o: Obj | undefined): Obj | undefined => o?.spec?.template?.spec;
  const main = (o: Obj | undefined): Obj | undefined => podOf(o)?.containers?.[0];
  const gpus = (c: Obj | undefined, where: 'requests' | 'limits') => Number(c?.resources?.[where]?.['nvidia.com/gpu'] ?? 0);

  // No secret in a manifest: no Secret object, secret-looking variables only from a Secret, no password in a URL or flag.
  for (const o of objs) {
    const id = `${o.kind}/${o.metadata?.name}`;
    if (o.kind === 'Secret') out.push(`${id}: a Secret in the manifests (create it with kubectl)`);
    for (const c of [...(podOf(o)?.containers ?? []), ...(podOf(o)?.initContainers ?? [])])
      for (const e of c.env ?? [])
        if (SECRETISH.test(e.name) && (e.value !== undefined || !e.valueFrom?.secretKeyRef))
          out.push(`${id} ${c.name}: ${e.name} is not taken from a Secret`);
    const text = JSON.stringify(o);
    if (/rediss?:\/\/[^/@"\s]*:[^/@"\s]+@/.test(text)) out.push(`${id}: a Redis URL with a password`);
    for (const m of text.matchAll(/--requirepass[", ]+([^",\s]+)/g))
      if (m[1] !== '$(REDIS_PASSWORD)') out.push(`${id}: --requirepass ${m[1]} is not $(REDIS_PASSWORD)`);
  }
  const fromSecret = (c: Obj | undefined, v: string) => c?.env?.some((e: Obj) => e.name === v && e.valueFrom?.secretKeyRef?.name);

  // Redis: AOF on a persistent volume, password from the Secret.
  const redisSet = need('StatefulSet', 'redis');
  const redisSvc = need('Service', 'redis');
  const redis = main(redisSet);
  const rargs = (redis?.args ?? []).join(' ');
  if (redis && !/--appendonly yes/.test(rargs)) out.push('redis: append-only file off');
  const dataDir = /--dir (\S+)/.exec(rargs)?.[1] ?? '/data';
  const dataMount = redis?.volumeMounts?.find((m: Obj) => m.mountPath === dataDir);
  if (redis && !redisSet!.spec.volumeClaimTemplates?.some((t: Obj) => t.metadata.name === dataMount?.name))
    out.push(`redis: ${dataDir} is not on a persistent volume claim`);
  if (redis && (!/--requirepass \$\(REDIS_PASSWORD\)/.test(rargs) || !fromSecret(redis, 'REDIS_PASSWORD')))
    out.push('redis: password not required from the Secret');

  // The ConfigMap's run config, mounted where the workers' --config points.
  const cm = need('ConfigMap', 'thinkfl-run');
  const vllmSet = need('StatefulSet', 'vllm');
  const vllm = main(vllmSet);
  const vflags = flags(vllm?.args ?? []);
  const maxRank = Number(vflags.get('--max-lora-rank'));
  const { config, out: cfgOut } = cm
    ? configViolations(cm.data['run.yaml'], `ConfigMap/thinkfl-run run.yaml`, maxRank)
    : { config: undefined, out: [] };
  out.push(...cfgOut);

  // vLLM: GPU, /health readiness, runtime LoRA, compose's flags, per-replica names the config lists.
  if (vllm) {
    if (gpus(vllm, 'requests') < 1 || gpus(vllm, 'limits') < 1) out.push('vllm: no nvidia.com/gpu request');
    const port = Number(vflags.get('--port') ?? 8000);
    const rp = vllm.readinessProbe?.httpGet;
    const portOk = rp && (rp.port === port || vllm.ports?.some((p: Obj) => p.name === rp.port && p.containerPort === port));
    if (rp?.path !== '/health' || !portOk) out.push('vllm: no readiness probe on /health of its port');
    if (!vflags.has('--enable-lora') || !Number.isInteger(maxRank)) out.push('vllm: LoRA off (--enable-lora, --max-lora-rank)');
    if (!vllm.env?.some((e: Obj) => e.name === 'VLLM_ALLOW_RUNTIME_LORA_UPDATING' && e.value === 'True'))
      out.push('vllm: VLLM_ALLOW_RUNTIME_LORA_UPDATING is not True');
    if (vllm.image !== composeVllm.image) out.push(`vllm: image ${vllm.image}, docker/compose.yaml has ${composeVllm.image}`);
    out.push(
      ...vllmDrift(
        vllm.args ?? [],
        (vllm.env ?? []).map((e: Obj) => e.name),
        'vllm',
      ),
    );
    const svc = find('Service', vllmSet!.spec.serviceName);
    if (svc?.spec?.clusterIP !== 'None') out.push('vllm: no headless Service for per-replica names');
    if (config?.generation.backend.kind === 'vllm') {
      const want = Array.from(
        { length: vllmSet!.spec.replicas ?? 1 },
        (_, i) => `http://vllm-${i}.${vllmSet!.spec.serviceName}:${port}/v1`,
      );
      if (JSON.stringify(config.generation.backend.replicas) !== JSON.stringify(want))
        out.push(
          `config: generation.backend.replicas ${JSON.stringify(config.generation.backend.replicas)}, the StatefulSet has ${JSON.stringify(want)}`,
        );
    }
    if (config && flags(vllm.args).get('--model') !== config.model.hub_id)
      out.push(`vllm: --model ${vflags.get('--model')} is not model.hub_id ${config.model.hub_id}`);
  }

  // The train engine: an Indexed Job of workers.train.nodes pods with workers.train.ranks GPUs each.
  const job = need('Job', 'thinkfl-train');
  const train = main(job);
  const trainCfg = config?.workers.train as (RunConfig['workers']['train'] & { nodes?: number; rendezvous?: string }) | undefined;
  if (job && trainCfg) {
    const nodes = trainCfg.nodes ?? 1;
    if (job.spec.completionMode !== 'Indexed') out.push('train: not an Indexed Job');
    if (job.spec.completions !== nodes || job.spec.parallelism !== nodes)
      out.push(`train: ${job.spec.completions} completions, ${job.spec.parallelism} parallel, workers.train.nodes ${nodes}`);
    if (gpus(train, 'requests') !== trainCfg.ranks || gpus(train, 'limits') !== trainCfg.ranks)
      out.push(`train: nvidia.com/gpu ${gpus(train, 'requests')} per pod, workers.train.ranks ${trainCfg.ranks}`);
    if (trainCfg.device !== 'cuda') out.push('config: workers.train.device is not cuda');
    const args = (train?.args ?? []).join(' ');
    if (!args.startsWith('worker train') || !args.includes('--node-rank $(JOB_COMPLETION_INDEX)'))
      out.push('train: not `worker train --node-rank $(JOB_COMPLETION_INDEX)`');
    if (!fromSecret(train, 'REDIS_PASSWORD')) out.push('train: REDIS_PASSWORD not from the Secret');
    if (nodes > 1) {
      const sub = podOf(job)!.subdomain;
      const svc = find('Service', sub);
      const port = Number(trainCfg.rendezvous?.split(':')[1]);
      if (trainCfg.rendezvous !== `${job.metadata.name}-0.${sub}:${port}`)
        out.push(`config: workers.train.rendezvous ${trainCfg.rendezvous} is not pod 0 of the Job (${job.metadata.name}-0.${sub})`);
      if (
        svc?.spec?.clusterIP !== 'None' ||
        !Object.entries(svc.spec.selector ?? {}).every(([k, v]) => job.spec.template.metadata.labels?.[k] === v)
      )
        out.push('train: no headless Service selecting the train pods (their stable names)');
      if (!train?.ports?.some((p: Obj) => p.containerPort === port)) out.push(`train: rendezvous port ${port} not declared`);
    }
  }

  const rollout = need('Deployment', 'thinkfl-rollout');
  if (rollout && !(main(rollout)?.args ?? []).join(' ').startsWith('worker rollout')) out.push('rollout: not `worker rollout`');
  const controller = need('Job', 'thinkfl-controller');
  if (controller && main(controller)?.args?.[0] !== 'train') out.push('controller: not `train`');

  // One ReadWriteMany volume for runs and adapters, at the same path in every pod but Redis's.
  const runsAt = new Set<string>();
  let claim: string | undefined;
  for (const [name, o] of [
    ['vllm', vllmSet],
    ['train', job],
    ['rollout', rollout],
    ['controller', controller],
  ] as const) {
    const pod = podOf(o);
    if (!pod) continue;
    const vol = pod.volumes?.find((v: Obj) => v.persistentVolumeClaim);
    const at = pod.containers[0].volumeMounts?.find((m: Obj) => m.name === vol?.name)?.mountPath;
    if (!vol || !at) {
      out.push(`${name}: the runs volume is not mounted`);
      continue;
    }
    runsAt.add(at);
    if (claim && claim !== vol.persistentVolumeClaim.claimName)
      out.push(`${name}: claim ${vol.persistentVolumeClaim.claimName}, others ${claim}`);
    claim = vol.persistentVolumeClaim.claimName;
    if (name !== 'vllm') {
      const cfgMount = pod.containers[0].volumeMounts?.find(
        (m: Obj) => pod.volumes.find((v: Obj) => v.name === m.name)?.configMap?.name === 'thinkfl-run',
      )?.mountPath;
      const argv = pod.containers[0].args as string[];
      const cfgPath = name === 'controller' ? argv[1] : argv[argv.indexOf('--config') + 1];
      if (!cfgMount || cfgPath !== `${cfgMount}/run.yaml`) out.push(`${name}: --config ${cfgPath} is not the ConfigMap's run.yaml`);
    }
  }
  if (runsAt.size > 1) out.push(`the runs volume is mounted at ${[...runsAt].join(', ')}: vLLM resolves lora_path at the trainer's path`);
  const pvc = claim ? find('PersistentVolumeClaim', claim) : undefined;
  if (claim && !pvc) out.push(`PersistentVolumeClaim/${claim} missing`);
  if (pvc && JSON.stringify(pvc.spec.accessModes) !== '["ReadWriteMany"]')
    out.push(`PersistentVolumeClaim/${claim}: ${pvc.spec.accessModes}, not ReadWriteMany`);
  const at = [...runsAt][0];
  if (config && at)
    for (const [key, path] of [
      ['run.output_dir', config.run.output_dir],
      ['model.cache_dir', config.model.cache_dir],
      ['dataset.path', config.dataset.path],
    ] as const)
      if (typeof path !== 'string' || !(path === at || path.startsWith(`${at}/`)))
        out.push(`config: ${key} ${path} is not on the runs volume (${at})`);
  if (config && redisSvc) {
    const u = new URL(config.queue.redis_url ?? 'redis://none');
    if (u.hostname !== redisSvc.metadata.name || Number(u.port || 6379) !== redisSvc.spec.ports[0].port)
      out.push(`config: queue.redis_url ${u.host} is not the Service redis`);
  }
  for (const [name, o] of [
    ['rollout', rollout],
    ['controller', controller],
  ] as const)
    if (o && !fromSecret(main(o), 'REDIS_PASSWORD')) out.push(`${name}: REDIS_PASSWORD not from the Secret`);
  return out;
}

// ---- the tests ------------------------------------------------------------------------------

describe('deploy/k8s', () => {
  const rendered = () =>
    Object.fromEntries(OVERLAYS.map((o) => [o, [...render(`overlays/${o}`), ...render('storage')]])) as Record<string, Obj[]>;
  let all: Record<string, Obj[]>;
  beforeAll(() => {
    all = rendered();
  });

  it("renders every overlay and the storage into objects valid under Kubernetes v1.34.4's OpenAPI definitions", () => {
    expect(vendored.source).toMatch(/^Go module k8s\.io\/kubernetes@v1\.34\.4, api\/openapi-spec\/swagger\.json, sha256 [0-9a-f]{64}$/);
    for (const [overlay, objs] of Object.entries(all)) {
      expect(objs.map((o) => `${o.kind}/${o.metadata.name}`).sort(), overlay).toEqual([
        'ConfigMap/thinkfl-run',
        'Deployment/thinkfl-rollout',
        'Job/thinkfl-controller',
        'Job/thinkfl-train',
        'PersistentVolumeClaim/thinkfl-runs',
        'Service/redis',
        'Service/thinkfl-train',
        'Service/vllm',
        'StatefulSet/redis',
        'StatefulSet/vllm',
      ]);
      expect(objs.flatMap(schemaErrors), overlay).toEqual([]);
    }
  });

  it("renders the tools pod valid, with the runs volume at the workloads' path and its secrets from Secrets", () => {
    const [shell, ...rest] = render('tools');
    expect(rest).toEqual([]);
    expect(schemaErrors(shell)).toEqual([]);
    const c = shell.spec.containers[0];
    expect(c.env.filter((e: Obj) => SECRETISH.test(e.name) && !e.valueFrom?.secretKeyRef)).toEqual([]);
    expect(shell.spec.volumes[0].persistentVolumeClaim.claimName).toBe('thinkfl-runs');
    expect(c.volumeMounts[0].mountPath).toBe('/runs');
    expect(shell.metadata.namespace).toBe('thinkfl');
  });

  it('the schema check rejects an unknown field, a wrong type, a missing required field and an unknown kind', () => {
    const objs = structuredClone(all['multi-node']);
    const job = objs.find((o) => o.kind === 'Job' && o.metadata.name === 'thinkfl-train')!;
    job.spec.completion = 2;
    job.spec.parallelism = 'two';
    const dep = objs.find((o) => o.kind === 'Deployment')!;
    delete dep.spec.template.spec.containers[0].name;
    dep.spec.template.spec.containers[0].resources.requests.cpu = { cores: 1 };
    const errors = [
      ...objs.flatMap(schemaErrors),
      ...schemaErrors({ apiVersion: 'kubeflow.org/v1', kind: 'PyTorchJob', metadata: { name: 'x' } }),
    ];
    expect(errors).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^Job\/thinkfl-train \/spec: must NOT have additional properties \(completion\)$/),
        expect.stringMatching(/^Job\/thinkfl-train \/spec\/parallelism: must be integer$/),
        expect.stringMatching(/^Deployment\/thinkfl-rollout \/spec\/template\/spec\/containers\/0: must have required property 'name'$/),
        expect.stringMatching(/^Deployment\/thinkfl-rollout \/spec\/template\/spec\/containers\/0\/resources\/requests\/cpu: /),
        expect.stringMatching(/^PyTorchJob\/x: no definition of kubeflow\.org\/v1\/PyTorchJob vendored/),
      ]),
    );
  });

  it.each(OVERLAYS)('%s keeps the deployment contract', (overlay) => {
    expect(violations(all[overlay])).toEqual([]);
  });

  it('the single-node overlay is one train pod of one rank; the multi-node one two pods of two ranks and two vLLM replicas', () => {
    const train = (o: string) => all[o].find((x) => x.kind === 'Job' && x.metadata.name === 'thinkfl-train')!;
    const vllm = (o: string) => all[o].find((x) => x.kind === 'StatefulSet' && x.metadata.name === 'vllm')!;
    expect([
      train('single-node').spec.completions,
      train('single-node').spec.template.spec.containers[0].resources.limits['nvidia.com/gpu'],
      vllm('single-node').spec.replicas,
    ]).toEqual([1, 1, 1]);
    expect([
      train('multi-node').spec.completions,
      train('multi-node').spec.template.spec.containers[0].resources.limits['nvidia.com/gpu'],
      vllm('multi-node').spec.replicas,
    ]).toEqual([2, 2, 2]);
    for (const o of OVERLAYS) expect(new Set(all[o].map((x) => x.metadata.namespace)), o).toEqual(new Set(['thinkfl']));
  });

  /** A copy of the multi-node rendering broken by `breakIt`; its violations. */
  const broken = (breakIt: (get: (kind: string, name: string) => Obj) => void): string[] => {
    const objs = structuredClone(all['multi-node']);
    breakIt((kind, name) => objs.find((o) => o.kind === kind && o.metadata.name === name)!);
    return violations(objs);
  };
  const c0 = (o: Obj) => o.spec.template.spec.containers[0];
  const setConfig = (cm: Obj, from: string | RegExp, to: string) => {
    const before = cm.data['run.yaml'];
    cm.data['run.yaml'] = before.replace(from, to);
    expect(cm.data['run.yaml']).not.toBe(before);
  };

  it.each([
    [
      'a literal Redis password',
      (g: any) => (c0(g('Job', 'thinkfl-train')).env[0] = { name: 'REDIS_PASSWORD', value: 'hunter2' }),
      /^Job\/thinkfl-train train: REDIS_PASSWORD is not taken from a Secret$/,
    ],
    [
      'a password in the Redis URL of the config',
      (g: any) => setConfig(g('ConfigMap', 'thinkfl-run'), 'redis://redis:6379', 'redis://:hunter2@redis:6379'),
      /^ConfigMap\/thinkfl-run: a Redis URL with a password$/,
    ],
    [
      'a literal --requirepass',
      (g: any) => (c0(g('StatefulSet', 'redis')).args = ['redis-server', '--appendonly', 'yes', '--requirepass', 'hunter2']),
      /^StatefulSet\/redis: --requirepass hunter2 is not \$\(REDIS_PASSWORD\)$/,
    ],
    [
      'a Secret among the manifests',
      (g: any) => Object.assign(g('ConfigMap', 'thinkfl-run'), { kind: 'Secret' }),
      /^Secret\/thinkfl-run: a Secret in the manifests/,
    ],
    [
      'vLLM without a GPU request',
      (g: any) => (c0(g('StatefulSet', 'vllm')).resources = { requests: { cpu: '4' } }),
      /^vllm: no nvidia.com\/gpu request$/,
    ],
    [
      'the train pods without GPUs',
      (g: any) => delete c0(g('Job', 'thinkfl-train')).resources.limits,
      /^train: nvidia.com\/gpu 2 per pod, workers.train.ranks 2$/,
    ],
    [
      'vLLM ready on /v1/models',
      (g: any) => (c0(g('StatefulSet', 'vllm')).readinessProbe.httpGet.path = '/v1/models'),
      /^vllm: no readiness probe on \/health/,
    ],
    [
      'runtime LoRA updating off',
      (g: any) =>
        (c0(g('StatefulSet', 'vllm')).env = c0(g('StatefulSet', 'vllm')).env.filter(
          (e: Obj) => e.name !== 'VLLM_ALLOW_RUNTIME_LORA_UPDATING',
        )),
      /^vllm: VLLM_ALLOW_RUNTIME_LORA_UPDATING is not True$/,
    ],
    [
      '--enable-lora dropped',
      (g: any) => (c0(g('StatefulSet', 'vllm')).args = c0(g('StatefulSet', 'vllm')).args.filter((a: string) => a !== '--enable-lora')),
      /^vllm: LoRA off/,
    ],
    [
      'a LoRA rank above --max-lora-rank',
      (g: any) => setConfig(g('ConfigMap', 'thinkfl-run'), 'r: 32,', 'r: 128,'),
      /^ConfigMap\/thinkfl-run run.yaml: model.lora.r 128 above vLLM's --max-lora-rank 64$/,
    ],
    [
      "a vLLM flag other than compose's",
      (g: any) => c0(g('StatefulSet', 'vllm')).args.push('--max-cpu-loras=8'),
      /^vllm: vLLM flag --max-cpu-loras not in docker\/compose.yaml$/,
    ],
    [
      'Redis without its append-only file',
      (g: any) => (c0(g('StatefulSet', 'redis')).args = ['redis-server', '--requirepass', '$(REDIS_PASSWORD)']),
      /^redis: append-only file off$/,
    ],
    [
      'Redis data on an emptyDir',
      (g: any) => delete g('StatefulSet', 'redis').spec.volumeClaimTemplates,
      /^redis: \/data is not on a persistent volume claim$/,
    ],
    [
      'the runs volume ReadWriteOnce',
      (g: any) => (g('PersistentVolumeClaim', 'thinkfl-runs').spec.accessModes = ['ReadWriteOnce']),
      /^PersistentVolumeClaim\/thinkfl-runs: ReadWriteOnce, not ReadWriteMany$/,
    ],
    [
      'vLLM mounting runs elsewhere',
      (g: any) => (c0(g('StatefulSet', 'vllm')).volumeMounts[0].mountPath = '/data'),
      /^the runs volume is mounted at \/data, \/runs/,
    ],
    [
      'fewer train pods than nodes',
      (g: any) => (g('Job', 'thinkfl-train').spec.completions = 1),
      /^train: 1 completions, 2 parallel, workers.train.nodes 2$/,
    ],
    [
      'a rendezvous that is not pod 0',
      (g: any) => setConfig(g('ConfigMap', 'thinkfl-run'), 'thinkfl-train-0.thinkfl-train:29400', 'thinkfl-train:29400'),
      /^config: workers.train.rendezvous thinkfl-train:29400 is not pod 0 of the Job/,
    ],
    [
      'a vLLM replica the config does not list',
      (g: any) => (g('StatefulSet', 'vllm').spec.replicas = 3),
      /^config: generation.backend.replicas .* the StatefulSet has .*vllm-2.vllm/,
    ],
  ])('the contract check catches %s', (_what, breakIt, message) => {
    expect(broken(breakIt as any)).toEqual(expect.arrayContaining([expect.stringMatching(message)]));
  });
});

describe('deploy/slurm', () => {
  const SLURM = join(REPO_ROOT, 'deploy', 'slurm');

  it("is bash, and its vLLM flags are docker/compose.yaml's", () => {
    for (const f of ['thinkfl.sbatch', 'node.sh']) execFileSync('bash', ['-n', join(SLURM, f)]);
    const node = readFileSync(join(SLURM, 'node.sh'), 'utf8');
    const args = /^VLLM_ARGS=\(\n([\s\S]*?)\n\)$/m
      .exec(node)![1]
      .split('\n')
      .map((l) => l.trim());
    // Variables node.sh sets on vllm's command line, and HF_TOKEN, which thinkfl.sbatch exports.
    const prefix = /^(.*) \\\n\s*vllm serve /m.exec(node)![1];
    const env = [...prefix.matchAll(/\b([A-Z_]+)=/g)].map((m) => m[1]);
    const sbatch = readFileSync(join(SLURM, 'thinkfl.sbatch'), 'utf8');
    expect(sbatch).toMatch(/^export REDIS_PASSWORD HF_TOKEN=/m);
    expect(vllmDrift(args, [...env, 'HF_TOKEN'], 'node.sh')).toEqual([]);
    expect(node).toMatch(/VLLM_ALLOW_RUNTIME_LORA_UPDATING=True/);
    expect(node).toMatch(/appendonly yes/);
    expect(node).toMatch(/worker train --config "\$THINKFL_CONFIG" --node-rank "\$rank"/);
    // The password reaches redis-server on stdin, never its command line.
    expect(node).not.toMatch(/redis-server[^\n|]*requirepass/);
  });

  it("writes a run config that is the multi-node overlay's with the allocation's host names", () => {
    const template = readFileSync(join(SLURM, 'run.yaml'), 'utf8');
    const text = template
      .replaceAll('__RUNS__', '/shared/runs')
      .replaceAll('__REPO__', '/shared/thinkfl')
      .replaceAll('__NODE0__', 'gpu-a01')
      .replaceAll('__NODE1__', 'gpu-a02');
    const maxRank = Number(/--max-lora-rank=(\d+)/.exec(readFileSync(join(SLURM, 'node.sh'), 'utf8'))![1]);
    const { config, out } = configViolations(text, 'deploy/slurm/run.yaml', maxRank);
    expect(out).toEqual([]);
    const train = config!.workers.train as Obj;
    expect([train.nodes, train.ranks, train.rendezvous]).toEqual([2, 2, 'gpu-a01:29400']);
    expect(config!.generation.backend.kind === 'vllm' && config!.generation.backend.replicas).toEqual([
      'http://gpu-a01:8000/v1',
      'http://gpu-a02:8000/v1',
    ]);
    expect([config!.run.output_dir, config!.queue.redis_url]).toEqual(['/shared/runs', 'redis://gpu-a01:6379']);
    // Only the names (and the paths below run.base_dir) differ from the Kubernetes multi-node config.
    const k8s = loadRunConfig(join(K8S, 'overlays', 'multi-node', 'run.yaml'), { checkPaths: false }).config as Obj;
    const strip = (c: Obj) => ({
      ...c,
      run: { ...c.run, output_dir: 0, base_dir: 0 },
      model: { ...c.model, cache_dir: 0, dir: 0 },
      dataset: { ...c.dataset, path: 0 },
      generation: { ...c.generation, backend: { ...c.generation.backend, replicas: 0 } },
      queue: { ...c.queue, redis_url: 0 },
      workers: { ...c.workers, train: { ...c.workers.train, rendezvous: 0, deepspeed_config: 0, autocast_cache: 0, onnx_graph_cache: 0 } },
    });
    expect(strip(config as Obj)).toEqual(strip(k8s));
  });
});
