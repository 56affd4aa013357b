import { describe, expect, it } from 'vitest';
import type { JsonObject } from '../../functions/core/json/json.js';
import { applyJsonPatch, parseJsonPatch } from '../../functions/core/json/json-patch.js';
import { messagePreview } from '../../functions/core/sessions/preview.js';
import { diffJson, formatPath, jsonEqual, jsonPatchOf, pointerOf } from '../../inspector/src/json-diff.js';
import { memoryHref, parseRoute, sessionHref } from '../../inspector/src/route.js';
import { layoutTree, type TreeNode, visibleRange } from '../../inspector/src/tree-layout.js';

const node = (id: string, parentId: string | null): TreeNode => ({ id, parentId, role: parentId ? 'user' : null, stateVersion: 0 });

describe('layoutTree', () => {
  it('keeps a chain in one column and opens a column per fork, marking the head and its path', () => {
    // Prepare: root ─ u1 ─ a1 ┬ u2 ─ a2
    //                        └ u2b ─ a2b (head)
    const nodes = [
      node('root', null),
      node('u1', 'root'),
      node('a1', 'u1'),
      node('u2', 'a1'),
      node('u2b', 'a1'),
      node('a2', 'u2'),
      node('a2b', 'u2b'),
    ];

    // Act
    const rows = layoutTree(nodes, 'a2b');

    // Assess
    expect(rows.map((row) => [row.node.id, row.level, row.guides.join(',')])).toEqual([
      ['root', 0, ''],
      ['u1', 0, ''],
      ['a1', 0, ''],
      ['u2', 1, 'tee'],
      ['a2', 1, 'pipe'],
      ['u2b', 1, 'elbow'],
      ['a2b', 1, 'blank'],
    ]);
    const byId = Object.fromEntries(rows.map((row) => [row.node.id, row]));
    expect(byId.a1).toMatchObject({ branches: 2, hasChildren: true, onHeadPath: true, isHead: false });
    expect(byId.u2).toMatchObject({ branchIndex: 1, joinsAbove: false, onHeadPath: false });
    expect(byId.a2).toMatchObject({ joinsAbove: true, hasChildren: false });
    expect(byId.a2b).toMatchObject({ isHead: true, onHeadPath: true });
  });

  it('nests forks inside forks, and lays out a deep chain without recursion', () => {
    const nodes = [node('root', null), node('a', 'root'), node('b', 'root'), node('a1', 'a'), node('a2', 'a')];
    expect(layoutTree(nodes, 'a2').map((row) => `${row.node.id}:${row.guides.join('')}`)).toEqual([
      'root:',
      'a:tee',
      'a1:pipetee',
      'a2:pipeelbow',
      'b:elbow',
    ]);

    const deep = [
      node('root', null),
      ...Array.from({ length: 20_000 }, (_, index) => node(`n${index}`, index === 0 ? 'root' : `n${index - 1}`)),
    ];
    const rows = layoutTree(deep, 'n19999');
    expect(rows).toHaveLength(20_001);
    expect(rows.every((row) => row.level === 0 && row.onHeadPath)).toBe(true);
  });

  it('shows a node whose parent is missing as a root rather than losing it', () => {
    expect(layoutTree([node('root', null), node('orphan', 'gone')], 'root').map((row) => row.node.id)).toEqual(['root', 'orphan']);
  });
});

describe('visibleRange', () => {
  it.each([
    [0, 340, 1000, { start: 0, end: 19 }],
    [3400, 340, 1000, { start: 92, end: 119 }],
    [34_000, 340, 1000, { start: 992, end: 1000 }],
  ])('at scrollTop %d with a %d px viewport over %d rows renders %o', (scrollTop, height, count, expected) => {
    expect(visibleRange(scrollTop, height, 34, count)).toEqual(expected);
  });
});

describe('diffJson', () => {
  it('lists added, removed and changed paths, objects by key and arrays by position', () => {
    // Act
    const changes = diffJson(
      { destination: 'Lisbon', days: 3, plan: ['Alfama'], prefs: { pace: 'relaxed', veggie: true } },
      { destination: 'Porto', days: 3, plan: ['Ribeira', 'Douro'], prefs: { pace: 'relaxed' }, budget: null },
    );

    // Assess
    expect(changes).toEqual([
      { kind: 'changed', path: ['destination'], before: 'Lisbon', after: 'Porto' },
      { kind: 'changed', path: ['plan', 0], before: 'Alfama', after: 'Ribeira' },
      { kind: 'added', path: ['plan', 1], after: 'Douro' },
      { kind: 'removed', path: ['prefs', 'veggie'], before: true },
      { kind: 'added', path: ['budget'], after: null },
    ]);
  });

  it('treats key order as irrelevant and a change of type as a change of the whole value', () => {
    expect(diffJson({ a: 1, b: { c: [1, 2] } }, { b: { c: [1, 2] }, a: 1 })).toEqual([]);
    expect(diffJson({ a: [1] }, { a: { 0: 1 } })).toEqual([{ kind: 'changed', path: ['a'], before: [1], after: { 0: 1 } }]);
    expect(diffJson(null, { a: 1 })).toEqual([{ kind: 'changed', path: [], before: null, after: { a: 1 } }]);
    expect(jsonEqual({ a: null }, {})).toBe(false);
  });

  it('formats paths the way they would be written in code', () => {
    expect(formatPath([])).toBe('(root)');
    expect(formatPath(['state', 'plan', 2, 'odd key'])).toBe('state.plan[2]["odd key"]');
  });
});

describe('jsonPatchOf', () => {
  it('writes a diff as RFC 6902 operations that turn the one value into the other, pointers escaped', () => {
    const before = { log: [1, 2, 3, 4], 'a/b': { '~k': 1 }, gone: true };
    const after = { log: [1, 9], 'a/b': { '~k': 2 }, added: [null] };

    const operations = jsonPatchOf(diffJson(before, after));

    expect(pointerOf(['a/b', '~k'])).toBe('/a~1b/~0k');
    expect(operations).toContainEqual({ op: 'replace', path: '/a~1b/~0k', value: 2 });
    // Array items removed from the last: each removal leaves the next one's index as it was.
    expect(operations.filter((operation) => operation.op === 'remove').map((operation) => operation.path)).toEqual([
      '/gone',
      '/log/3',
      '/log/2',
    ]);
    expect(applyJsonPatch(before, parseJsonPatch(operations))).toEqual(after);
  });
});

describe('messagePreview', () => {
  it.each([
    ['string content', { role: 'user', content: 'Plan  a\ntrip' }, 'Plan a trip'],
    [
      'content parts',
      { role: 'assistant', content: [{ type: 'text', text: 'Day 1' }, { type: 'image' }, { type: 'text', text: 'Day 2' }] },
      'Day 1 Day 2',
    ],
    ['a text member', { role: 'user', text: 'hello' }, 'hello'],
    [
      'other members as JSON',
      { id: 'x', parentId: 'root', role: 'tool', name: 'search', args: { q: 'porto' } },
      '{"name":"search","args":{"q":"porto"}}',
    ],
    ['nothing but a role', { id: 'x', role: 'user' }, null],
  ])('previews %s', (_name, message, expected) => {
    expect(messagePreview(message as JsonObject)).toBe(expected);
  });

  it('cuts long text with an ellipsis, never inside a surrogate pair', () => {
    const preview = messagePreview({ role: 'user', content: `${'a'.repeat(118)}😀😀😀` }) as string;
    expect(preview.length).toBeLessThanOrEqual(120);
    expect(preview.endsWith('…')).toBe(true);
    expect(preview).not.toMatch(/[\uD800-\uDBFF]…$/);
    expect(messagePreview(null)).toBeNull();
  });
});

describe('the page address', () => {
  it('reads back every address it makes: sessions, nodes, namespaces and items, ids with any of their characters', () => {
    const ids = ['a.b', 'x:y~z@w', 'plain'];

    const item = parseRoute(memoryHref(ids, 'k@1'));
    const namespace = parseRoute(memoryHref(['users', 'u1']));
    const top = parseRoute(memoryHref([]));
    const node = parseRoute(sessionHref('s:1', 'n~2'));

    expect(item).toEqual({ view: 'memory', namespace: ids, key: 'k@1' });
    expect(namespace).toEqual({ view: 'memory', namespace: ['users', 'u1'], key: null });
    expect(top).toEqual({ view: 'memory', namespace: [], key: null });
    expect(node).toEqual({ view: 'session', sessionId: 's:1', nodeId: 'n~2' });
    expect(parseRoute('#/s/')).toEqual({ view: 'sessions' });
    expect(parseRoute('')).toEqual({ view: 'sessions' });
  });
});
