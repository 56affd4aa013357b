import { describe, expect, it } from 'vitest';
import { isBelow, levelsBelow, MAX_HIERARCHY_DEPTH, rootOf } from '../../functions/core/agents/hierarchy.js';

const placed = (edges: Array<[string, string | null]>) => edges.map(([agentId, parentId]) => ({ agentId, parentId }));

describe('levelsBelow', () => {
  it('is 0 for an agent with none below it, and for one not listed', () => {
    const agents = placed([
      ['a', null],
      ['b', 'a'],
    ]);
    expect(levelsBelow(agents, 'b')).toBe(0);
    expect(levelsBelow(agents, 'unknown')).toBe(0);
  });

  it('counts the levels down to the deepest agent of any branch, and nothing above or beside', () => {
    // Prepare: top → a → (b → c → d, e); top → beside → f → g → h → i.
    const agents = placed([
      ['top', null],
      ['a', 'top'],
      ['b', 'a'],
      ['c', 'b'],
      ['d', 'c'],
      ['e', 'a'],
      ['beside', 'top'],
      ['f', 'beside'],
      ['g', 'f'],
      ['h', 'g'],
      ['i', 'h'],
    ]);

    // Act, Assess
    expect(levelsBelow(agents, 'a')).toBe(3);
    expect(levelsBelow(agents, 'b')).toBe(2);
    expect(levelsBelow(agents, 'top')).toBe(5);
  });

  it('ends on a listing that shows a cycle (read page by page while moves land), counting each agent once', () => {
    const agents = placed([
      ['a', 'c'],
      ['c', 'a'],
      ['d', 'a'],
    ]);
    expect(levelsBelow(agents, 'a')).toBe(1);
  });

  it('counts a line as long as the limit', () => {
    const agents = placed(Array.from({ length: MAX_HIERARCHY_DEPTH }, (_, n) => [`n${n}`, n === 0 ? null : `n${n - 1}`]));
    expect(levelsBelow(agents, 'n0')).toBe(MAX_HIERARCHY_DEPTH - 1);
    expect(rootOf(agents, `n${MAX_HIERARCHY_DEPTH - 1}`)).toBe('n0');
    expect(isBelow(agents, `n${MAX_HIERARCHY_DEPTH - 1}`, 'n0')).toBe(true);
  });
});
