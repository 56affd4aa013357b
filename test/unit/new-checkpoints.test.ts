import { describe, expect, it } from 'vitest';
import { NewCheckpoints, parentOf } from '../../packages/langgraph/src/new-checkpoints.js';

/**
 * What the saver knows of the checkpoints LangGraph made in its process, which spares a
 * subgraph's first read (packages/langgraph/src/new-checkpoints.ts). The module is new: before
 * it, every subgraph read was a request (test/langgraph/parity.test.ts counts them).
 */
describe('NewCheckpoints', () => {
  it('finds the checkpoint a subgraph namespace’s task belongs to: the longest entry of the map it continues, not its own', () => {
    // Prepare: LangGraph's checkpoint maps, namespace → checkpoint id.
    const map = { '': 'c0', 'outer:t1': 'c1', 'outer:t1|inner:t2': 'c2' };

    // Act
    const found = {
      top: parentOf('graph:t9', { '': 'c0' }),
      // A second subgraph invoked in one task carries a counter after its task.
      second: parentOf('graph:t9|1', { '': 'c0' }),
      nested: parentOf('outer:t1|inner:t2', map),
      // A namespace that merely starts like another is not its child.
      lookalike: parentOf('outer:t10|inner:t3', { '': 'c0', 'outer:t1': 'c1' }),
      thread: parentOf('', map),
      none: parentOf('graph:t9', undefined),
    };

    // Assess
    expect(found).toEqual({
      top: { checkpointNs: '', checkpointId: 'c0' },
      second: { checkpointNs: '', checkpointId: 'c0' },
      nested: { checkpointNs: 'outer:t1', checkpointId: 'c1' },
      lookalike: { checkpointNs: '', checkpointId: 'c0' },
      thread: undefined,
      none: undefined,
    });
  });

  it('knows a namespace empty only under a checkpoint made here, until a read, a put in it or the thread’s delete says otherwise', () => {
    // Prepare
    const known = new NewCheckpoints();
    const map = (id: string) => ({ '': id });
    const nothingUnderWay = () => [];
    known.putBegins('t', '', 'made');
    known.putBegins('t', '', 'made-then-read');
    known.read('t', '', 'made-then-read');
    known.read('t', '', 'read-then-put');
    known.putBegins('t', '', 'read-then-put');
    known.putBegins('t', '', 'child-put');
    known.childPutBegins('t', 'graph:1', map('child-put'));
    known.childPutBegins('t', 'graph:2', map('child-first'));
    known.putBegins('t', '', 'child-first');
    known.putBegins('u', '', 'deleted');
    known.forgetThread('u');
    const empty = (thread: string, namespace: string, parents: Record<string, string> | undefined) =>
      known.holdsNothing(thread, namespace, parents, nothingUnderWay);

    // Act
    const found = {
      made: empty('t', 'graph:1', map('made')),
      otherThread: empty('v', 'graph:1', map('made')),
      madeThenRead: empty('t', 'graph:1', map('made-then-read')),
      readThenPut: empty('t', 'graph:1', map('read-then-put')),
      childPut: empty('t', 'graph:1', map('child-put')),
      siblingOfChildPut: empty('t', 'graph:1|1', map('child-put')),
      childBeforeItsParent: empty('t', 'graph:3', map('child-first')),
      deleted: empty('u', 'graph:1', map('deleted')),
      unknown: empty('t', 'graph:1', map('never-seen')),
      noMap: empty('t', 'graph:1', undefined),
    };

    // Assess
    expect(found).toEqual({
      made: true,
      otherThread: false,
      madeThenRead: false,
      readThenPut: false,
      childPut: false,
      siblingOfChildPut: true,
      childBeforeItsParent: false,
      deleted: false,
      unknown: false,
      noMap: false,
    });
  });

  it('takes a checkpoint not heard of as made here while a put of one made here is under way in its namespace, and remembers it so', () => {
    // Prepare: LangGraph starts a step's tasks before their checkpoint's put, which its chain
    // sends once the put before it (of a checkpoint the run made) has answered.
    const known = new NewCheckpoints();
    known.putBegins('t', '', 'step-1');
    known.read('t', '', 'read');
    known.putBegins('t', 'outer:1', 'inner-made');

    // Act
    const found = {
      whileMadeUnderWay: known.holdsNothing('t', 'graph:1', { '': 'step-0' }, (ns) => (ns === '' ? ['step-1'] : [])),
      // Its second subgraph, once the first put in its own namespace and nothing is under way.
      secondSubgraph: (() => {
        known.childPutBegins('t', 'graph:1', { '': 'step-0' });
        return known.holdsNothing('t', 'graph:2', { '': 'step-0' }, () => []);
      })(),
      whileNothingUnderWay: known.holdsNothing('t', 'graph:1', { '': 'other' }, () => []),
      whileReadOneUnderWay: known.holdsNothing('t', 'graph:1', { '': 'other' }, () => ['read']),
      otherNamespaceUnderWay: known.holdsNothing('t', 'graph:1', { '': 'other' }, (ns) => (ns === 'outer:1' ? ['inner-made'] : [])),
      nested: known.holdsNothing('t', 'outer:1|graph:2', { '': 'step-0', 'outer:1': 'next' }, (ns) =>
        ns === 'outer:1' ? ['inner-made'] : [],
      ),
      // `checkpointer: true`: one namespace for every task, its node's name alone.
      stateful: known.holdsNothing('t', 'graph', { '': 'step-0' }, () => []),
      statefulNested: known.holdsNothing('t', 'outer:1|graph', { '': 'step-0', 'outer:1': 'next' }, () => []),
    };

    // Assess
    expect(found).toEqual({
      whileMadeUnderWay: true,
      secondSubgraph: true,
      whileNothingUnderWay: false,
      whileReadOneUnderWay: false,
      otherNamespaceUnderWay: false,
      nested: true,
      stateful: false,
      statefulNested: false,
    });
  });
});
