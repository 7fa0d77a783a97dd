/** ORACL true-positive bonus (Eq. 9): a fixed bonus per true cause predicted. */
import type { Grader } from '../types';
import { causeSets } from './sets';

export const oraclTpBonus: Grader = {
  name: 'oracl_tp_bonus',
  description: 'ORACL Eq. 9: tpBonus per true positive',
  grade(episode, ctx) {
    const { truePositives } = causeSets(episode, ctx);
    return { score: ctx.settings.oracl.tpBonus * truePositives, parts: { truePositives } };
  },
};
