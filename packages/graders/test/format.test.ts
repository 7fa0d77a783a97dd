import { describe, expect, it } from 'vitest';
import type { RootCause, ToolCallRecord, TurnRecord } from '@thinkfl/env';
import { format } from '../src/index';
import { call, ctxFor, episode, POD, turn } from './fixtures/episodes';

const ANSWERED_AT_3: ToolCallRecord[] = [call(0, 'search_traces', []), call(3, 'print_results', [])];

describe('format grader', () => {
  const table: {
    name: string;
    turns: TurnRecord[];
    answer: RootCause[] | null;
    calls?: ToolCallRecord[];
    score: number;
    validTurns: number;
    answerInvalid: number;
  }[] = [
    // 4/4
    {
      name: 'every turn well-formed',
      turns: [turn(0), turn(1), turn(2), turn(3)],
      answer: [{ pod: POD.contacts }],
      score: 1,
      validTurns: 4,
      answerInvalid: 0,
    },
    // 3/4
    {
      name: 'one turn does not parse',
      turns: [turn(0), turn(1, { parsed: false }), turn(2), turn(3)],
      answer: [{ pod: POD.contacts }],
      score: 0.75,
      validTurns: 3,
      answerInvalid: 0,
    },
    // 2/4
    {
      name: 'unoffered tool and bad arguments',
      turns: [turn(0, { offered_tool: false }), turn(1), turn(2, { args_valid: false }), turn(3)],
      answer: [{ pod: POD.contacts }],
      score: 0.5,
      validTurns: 2,
      answerInvalid: 0,
    },
    // The answer turn (3) has an item naming nothing: 3/4
    {
      name: 'answer item without node/service/pod',
      turns: [turn(0), turn(1), turn(2), turn(3)],
      answer: [{ pod: POD.contacts }, { reason: 'cpu' }],
      score: 0.75,
      validTurns: 3,
      answerInvalid: 1,
    },
    // Blank names count as none: 3/4
    {
      name: 'answer item with blank names',
      turns: [turn(0), turn(1), turn(2), turn(3)],
      answer: [{ pod: '  ', service: '' }],
      score: 0.75,
      validTurns: 3,
      answerInvalid: 1,
    },
    // An empty answer list is no answer to format: 3/4
    { name: 'empty answer', turns: [turn(0), turn(1), turn(2), turn(3)], answer: [], score: 0.75, validTurns: 3, answerInvalid: 1 },
    // The answer came on turn 3 of 5 (later turns recorded): turn 3 is the invalid one, 4/5
    {
      name: 'answer turn found from the answer call',
      turns: [turn(0), turn(1), turn(2), turn(3), turn(4)],
      answer: [{ reason: 'x' }],
      score: 0.8,
      validTurns: 4,
      answerInvalid: 1,
    },
    // No answer: only the turns decide; the forced final turn did not parse: 2/3
    {
      name: 'no answer',
      turns: [turn(0), turn(1), turn(2, { parsed: false, offered_tool: false, args_valid: false })],
      answer: null,
      calls: [],
      score: 2 / 3,
      validTurns: 2,
      answerInvalid: 0,
    },
    { name: 'no turns at all', turns: [], answer: null, calls: [], score: 0, validTurns: 0, answerInvalid: 0 },
  ];
  it.each(table)('$name', async ({ turns, answer, calls, score, validTurns, answerInvalid }) => {
    const r = await format.grade(episode({ turns, answer, tool_calls: calls ?? ANSWERED_AT_3 }), ctxFor());
    expect(r.score).toBeCloseTo(score, 12);
    expect(r.parts).toEqual({ turns: turns.length, validTurns, answerInvalid });
  });

  it('without an answer call, the last turn is the answer turn', async () => {
    // Turn 2 (last) holds the bad answer: 2/3
    const r = await format.grade(episode({ turns: [turn(0), turn(1), turn(2)], answer: [{}], tool_calls: [] }), ctxFor());
    expect(r.score).toBeCloseTo(2 / 3, 12);
  });
});
