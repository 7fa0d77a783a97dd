/**
 * `oracl`: ORACL's RCA task (../shared/seeds/002, Alg. 1): single turn and tool-free. The prompt is
 * the environment's sketch of the request (sketch.ts); the policy answers once with tagged
 * reasoning, and the `<root>` tag is the ranked answer. An answer without a readable `<root>` is
 * a parse error and ends with no answer (the graders score it; nothing throws).
 */
import { casePrompt } from './prompts';
import { registerProtocol } from './registry';
import { parseRootTag } from './root-tag';
import { buildSketch, renderSketch } from './sketch';

const SYSTEM =
  'You are a site reliability engineer finding the root cause of an anomalous request in a microservice system. ' +
  'You get a sketch of the request: its call graph between pods, and per pod its delay against the usual, its call pattern ' +
  'changes, its metric deviations binned Low/Medium/High, and its error and warning log templates against their usual rate.';

export const ORACL_FORMAT =
  'Answer in one message with these tags, in order: <think>your analysis of the sketch</think> ' +
  '<Fault>the faults you identify</Fault> <Counterfactual>what would be observed if each candidate were not the cause, revising false candidates</Counterfactual> ' +
  '<root>the root causes, one per line as "pod | fault type", most likely first</root>';

registerProtocol({
  name: 'oracl',
  async play(session, settings) {
    const { toolbox } = session;
    const { dataset } = toolbox.ctx;
    const sketch = buildSketch(dataset, session.kase, toolbox.settings, settings.oracl);
    session.environment = sketch;
    session.say('system', SYSTEM);
    session.say('user', `${casePrompt(dataset, session.kase, toolbox)}\n\n${renderSketch(sketch)}\n\n${ORACL_FORMAT}`);
    const out = await session.text(true);
    if (out.kind === 'policy_error') return session.finish('oracl', 'policy_error', null);
    // The sketch shows pods by their aliases when tool_settings.pod_aliases is on: an answer may name them so.
    const parsed = parseRootTag(out.content, dataset.topology, (name) => toolbox.ctx.pods.resolve(name));
    session.recordText(parsed.ok ? undefined : parsed.error);
    return parsed.ok ? session.finish('oracl', 'answered', parsed.answer) : session.finish('oracl', 'no_answer', null);
  },
});
