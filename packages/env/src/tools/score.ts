/**
 * Tools through which a policy hands scores to an environment-run search (KnowledgeMind's
 * verifier and simulation, RCAFlow's confidence): the protocol reads the validated arguments
 * from the call record; the tool itself only acknowledges them.
 */
import { z } from 'zod';
import { okObservation } from './bound';
import { registerTool } from './registry';

const services = z
  .record(z.string().min(1).max(200), z.number().int().min(1).max(10))
  .refine((r) => Object.keys(r).length > 0, { message: 'score at least one service' });

registerTool({
  name: 'score_services',
  description: 'Score each candidate service from 1 (no sign of a fault) to 10 (surely the fault), as {"scores": {"service": score}}.',
  args: z.object({ scores: services.describe('Score per candidate service, integers 1-10') }),
  terminal: false,
  argComponents: (_ctx, a) => Object.keys(a.scores),
  run(ctx, a) {
    const list = Object.entries(a.scores).map(([s, v]) => `${s}=${v}`);
    return okObservation(ctx.settings, `Scores recorded: ${list.join(', ')}.`, a, Object.keys(a.scores));
  },
});

registerTool({
  name: 'score_simulation',
  description: 'Score from 1 to 10 how likely the service under simulation is the root cause, as {"score": n}.',
  args: z.object({ score: z.number().int().min(1).max(10).describe('Integer 1-10') }),
  terminal: false,
  argComponents: () => [],
  run(ctx, a) {
    return okObservation(ctx.settings, `Score ${a.score} recorded.`, a, []);
  },
});

registerTool({
  name: 'report_confidence',
  description: 'Report your confidence from 0 to 1 that the steps so far found the root cause, as {"confidence": c}.',
  args: z.object({ confidence: z.number().min(0).max(1).describe('Confidence in [0, 1]') }),
  terminal: false,
  argComponents: () => [],
  run(ctx, a) {
    return okObservation(ctx.settings, `Confidence ${a.confidence} recorded.`, a, []);
  },
});
