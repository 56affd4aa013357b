import { describe, expect, it } from 'vitest';
import { WriteTurns } from '../../packages/langgraph/src/write-turns.js';

/** The saver's writes to one session take turns (packages/langgraph/src/write-turns.ts). */
describe('WriteTurns', () => {
  it('runs one session’s writes one at a time in the order made, other sessions beside them, and a failure does not stop the next', async () => {
    // Prepare
    const turns = new WriteTurns();
    const log: string[] = [];
    const write =
      (name: string, ms: number, fail = false) =>
      async () => {
        log.push(`start ${name}`);
        await new Promise((resolve) => setTimeout(resolve, ms));
        log.push(`end ${name}`);
        if (fail) throw new Error(name);
        return name;
      };

    // Act
    const answers = await Promise.allSettled([
      turns.inTurn('a', write('a1', 30)),
      turns.inTurn('a', write('a2', 5, true)),
      turns.inTurn('b', write('b1', 10)),
      turns.inTurn('a', write('a3', 1)),
    ]);

    // Assess
    expect(answers.map((answer) => (answer.status === 'fulfilled' ? answer.value : String(answer.reason)))).toEqual([
      'a1',
      'Error: a2',
      'b1',
      'a3',
    ]);
    const ofA = log.filter((line) => line.endsWith('a1') || line.endsWith('a2') || line.endsWith('a3'));
    expect(ofA).toEqual(['start a1', 'end a1', 'start a2', 'end a2', 'start a3', 'end a3']);
    expect(log.indexOf('start b1')).toBeLessThan(log.indexOf('end a1'));
  });

  it('remembers the checkpoints it put, the latest 1,000', () => {
    const turns = new WriteTurns();
    for (let index = 0; index < 1_001; index++) turns.notePut('s', `n${index}`);
    expect(turns.wasPut('s', 'n0')).toBe(false);
    expect(turns.wasPut('s', 'n1')).toBe(true);
    expect(turns.wasPut('s', 'n1000')).toBe(true);
    expect(turns.wasPut('other', 'n1')).toBe(false);
  });
});
