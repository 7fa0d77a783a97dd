/**
 * `knowledgemind`: KnowledgeMind's search (../shared/seeds/003) as an episode. The environment
 * computes the alarms, builds the alarm graph and the fault mining tree, and runs the MCTS
 * (Alg. 2); the policy supplies the scores a model gives in the paper, through tool calls, so a
 * model in training plays it like any protocol:
 * - expansion: the verifier scores every child of the selected node (score_services, 1-10);
 * - simulation, one greedy step: a full match in the knowledge base (training-split faults,
 *   Jaccard over alarm sets, never the case's own fault) gives R and stops the search; otherwise
 *   the policy scores the node from its callers' anomaly counts (score_simulation), R = S/10;
 * - back propagation of R; after `simulations` rounds the most-visited path's end is shown and
 *   the policy answers with print_results (pod or service, top-3 fault types as items).
 * A missing or invalid score counts as the lowest score (1); the search goes on.
 */
import type { RootCause } from '../../types';
import { MAX_TOOL_TURNS } from '../settings';
import { registerProtocol } from '../registry';
import { casePrompt } from '../prompts';
import type { EpisodeSession } from '../session';
import { alarmCount, alarmGraph, dependencyGraph, serviceAlarms, type ServiceAlarm } from './alarms';
import { knowledgeBase, matchKnowledge, type KnowledgeCase } from './knowledge';
import { backpropagate, mostVisitedPath, select, type MctsNode } from './mcts';
import { faultMiningTree, VIRTUAL_ROOT } from './tree';

/** A service the search may visit: its alarms without the per-pod breakdown. */
export type KmCandidate = Omit<ServiceAlarm, 'pods'>;

export type KmRequest =
  | { kind: 'expand'; parent: string; candidates: KmCandidate[] }
  | { kind: 'simulate'; service: string; callers: { service: string; anomalies: number }[]; own: KmCandidate }
  | { kind: 'final'; path: string[]; end: KmCandidate & { pods: ServiceAlarm['pods'] }; knowledgeMatch?: string };

const SYSTEM =
  'You are the verifier of a fault-localization search over a microservice system (KnowledgeMind). The environment mines ' +
  'alarms (metric series beyond their band, new or risen error/warning log templates, abnormal spans) and searches a tree of ' +
  'services from callers to callees. When asked, score candidates with score_services or score_simulation; at the end, ' +
  'answer with print_results: the faulty pod or service, one item per likely fault type, most likely first.';

const candidate = (a: ServiceAlarm): KmCandidate => ({
  service: a.service,
  metrics: a.metrics,
  errorLogs: a.errorLogs,
  warnLogs: a.warnLogs,
  trace: a.trace,
  patternChanges: a.patternChanges,
});

const describe = (c: KmCandidate): string =>
  `${c.service}: ${c.metrics.length} metric alarm(s)${c.metrics.length ? ` (${c.metrics.slice(0, 4).join(', ')})` : ''}, ` +
  `${c.errorLogs} error and ${c.warnLogs} warning log template(s) new or risen, ${c.trace} abnormal span(s) in the request (${c.patternChanges} with changed calls)`;

/** One question to the policy: the request is the environment's state; the tool's data, undefined when it gave none, or 'error'. */
type Ask = (tool: string, request: KmRequest, text: string) => Promise<Record<string, unknown> | undefined | 'error'>;

const asker =
  (session: EpisodeSession): Ask =>
  async (tool, request, text) => {
    session.environment = request;
    session.say('user', text);
    const out = await session.turn([tool], false);
    if (out.kind === 'policy_error') return 'error';
    return out.kind === 'called' && out.call.observation.ok ? (out.call.observation.data as Record<string, unknown>) : undefined;
  };

/** Expansion: the policy scores the children of `v` (their priors); the best-scored child, or 'error'. */
async function expand(v: MctsNode, alarms: Map<string, ServiceAlarm>, ask: Ask): Promise<MctsNode | 'error'> {
  const cands = v.children.map((c) => candidate(alarms.get(c.service)!));
  const r = await ask(
    'score_services',
    { kind: 'expand', parent: v.service, candidates: cands },
    `Expansion below ${v.service === VIRTUAL_ROOT ? 'the root' : v.service}: score each candidate 1-10 (metric and log anomalies together outrank one kind; severe error logs outrank warnings):\n${cands.map((c) => `- ${describe(c)}`).join('\n')}`,
  );
  if (r === 'error') return 'error';
  const scores = (r?.scores ?? {}) as Record<string, number>;
  for (const c of v.children) c.prior = scores[c.service] ?? 1;
  v.expanded = true;
  return v.children.reduce((best, c) => (c.prior > best.prior ? c : best), v.children[0]);
}

/** Simulation without a knowledge-base match: the policy scores `service` from its callers' alarms, R = S/10; or 'error'. */
async function simulate(
  service: string,
  dep: Map<string, Set<string>>,
  alarms: Map<string, ServiceAlarm>,
  ask: Ask,
): Promise<number | 'error'> {
  const callers = [...dep]
    .filter(([, tos]) => tos.has(service))
    .map(([from]) => from)
    .sort()
    .map((s) => ({ service: s, anomalies: alarms.get(s) ? alarmCount(alarms.get(s)!) : 0 }));
  const own = candidate(alarms.get(service)!);
  const r = await ask(
    'score_simulation',
    { kind: 'simulate', service, callers, own },
    `Simulation from ${service}: when a service fails its callers turn abnormal. Its callers' alarms: ${
      callers.length ? callers.map((c) => `${c.service} ${c.anomalies}`).join(', ') : 'none'
    }. Its own: ${describe(own)}. Score 1-10 how likely ${service} is the root cause.`,
  );
  if (r === 'error') return 'error';
  return (typeof r?.score === 'number' ? r.score : 1) / 10;
}

/** The final request: the most-visited path, the service it ends at (the knowledge base's match first) with its pods. */
function finalRequest(path: string[], endService: string, alarms: Map<string, ServiceAlarm>, kbHit: KnowledgeCase | undefined) {
  const endAlarm = alarms.get(endService);
  return {
    kind: 'final',
    path,
    end: {
      ...(endAlarm ? candidate(endAlarm) : { service: endService, metrics: [], errorLogs: 0, warnLogs: 0, trace: 0, patternChanges: 0 }),
      pods: endAlarm?.pods ?? [],
    },
    ...(kbHit ? { knowledgeMatch: kbHit.service } : {}),
  } satisfies KmRequest;
}

registerProtocol({
  name: 'knowledgemind',
  async play(session, settings) {
    const { toolbox, kase } = session;
    const { dataset } = toolbox.ctx;
    const km = settings.knowledgemind;
    const alarms = serviceAlarms(dataset, kase, toolbox.settings, km);
    const alarmed = new Set([...alarms.values()].filter((a) => alarmCount(a) > 0).map((a) => a.service));
    const inTrace = new Set(dataset.traces.trace(kase.trace_id).map((s) => s.service));
    const dep = dependencyGraph(dataset);
    const graph = alarmGraph(dep, alarmed, inTrace);
    const root = faultMiningTree(graph.services, graph.edges);
    const kbHit = matchKnowledge(knowledgeBase(dataset, toolbox.settings, km, kase.fault_id), alarmed, km);

    session.say('system', SYSTEM);
    session.say(
      'user',
      `${casePrompt(dataset, kase, toolbox)}\n\n${alarmed.size} service(s) raised alarms; the fault mining tree has ${graph.services.size} service(s). The search begins.`,
    );
    const budget = MAX_TOOL_TURNS - 1;
    const ask = asker(session);
    let stopped = false;
    for (let i = 0; i < km.simulations && !stopped && session.turns.length < budget - 1; i++) {
      const v = select(root, km.exploration);
      const h = !v.expanded && v.children.length > 0 ? await expand(v, alarms, ask) : v;
      if (h === 'error') return session.finish('knowledgemind', 'policy_error', null);
      if (h.service === VIRTUAL_ROOT) break;
      // A full knowledge-base match decides the reward and stops the search.
      stopped = kbHit !== undefined;
      const reward = kbHit ? (kbHit.service === h.service ? 1 : 0) : await simulate(h.service, dep, alarms, ask);
      if (reward === 'error') return session.finish('knowledgemind', 'policy_error', null);
      backpropagate(h, reward);
    }

    const path = mostVisitedPath(root).map((n) => n.service);
    const endService = kbHit?.service ?? path.at(-1) ?? [...alarmed][0] ?? dataset.traces.span(kase.entry_span_id)?.service ?? '';
    const request = finalRequest(path, endService, alarms, kbHit);
    session.environment = request;
    const pods = request.end.pods.map((p) => `${p.pod} (${p.metrics} metric, ${p.logs} log, ${p.trace} span alarms)`).join('; ');
    session.say(
      'user',
      `${kbHit ? `The knowledge base fully matches a past fault of ${kbHit.service}. ` : ''}The most-visited path is ${path.join(' -> ') || '(empty)'}; it ends at ${endService}. ` +
        `Its pods: ${pods || 'none known'}. Answer with print_results: the pod when one pod carries the anomalies, else the service, one item per likely fault type (top 3), most likely first.`,
    );
    const out = await session.turn(['print_results'], true);
    if (out.kind === 'policy_error') return session.finish('knowledgemind', 'policy_error', null);
    if (out.kind === 'answered') return session.finish('knowledgemind', 'answered', out.answer);
    const forced: RootCause[] = endService ? [{ service: endService }] : [];
    return forced.length ? session.finish('knowledgemind', 'forced_answer', forced) : session.finish('knowledgemind', 'no_answer', null);
  },
});
