import { beforeAll, describe, expect, it } from 'vitest';
import type { SessionScope } from '../../functions/core/model/model.js';
import { SessionService } from '../../functions/core/sessions/session-service.js';
import { createStores } from '../../functions/store/index.js';
import type { DynamoDbSessionStore } from '../../functions/store/sessions/session-store.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import * as keys from '../../functions/store/table/keys.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * A request that names a node off the head reads the session's tip and that node's index
 * (functions/store/log/node-index.ts). The writer of each change moves the pointers its
 * predecessor left before it claims its place, so a change that lands between the two reads
 * can carry a pointer the node read did not see. Before, the two were read side by side: a
 * patch of a branch took the node's older state as its base and wrote over what was there, and
 * a node indexed in that moment read as absent. Found by test/langgraph/saver.test.ts failing
 * once in a full run: a checkpoint's pending writes, sent beside the next checkpoint's put,
 * erased the checkpoint. Real DynamoDB Local; the race is made exact by holding one tip read.
 */

const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
let tableName: string;
let store: DynamoDbSessionStore;

beforeAll(async () => {
  tableName = await createTestTable('node-read-race');
  store = createStores(client, tableName).sessions;
});

/**
 * A store whose first read of a session's tip is held until `release()`; `held` resolves when
 * it is.
 */
function heldTipRead(): { store: DynamoDbSessionStore; held: Promise<void>; release: () => void } {
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  let reached!: () => void;
  const held = new Promise<void>((resolve) => {
    reached = resolve;
  });
  let holding = true;
  const slowClient = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
  slowClient.middlewareStack.add(
    (next, context) => async (args) => {
      // The document client's input, before it is marshalled: the tip read is the Query of the log's
      // prefix, or, for an append, of the range from the session item to the log's end (which also
      // tells whether the session item is there when the log is empty).
      const input = args.input as { ExpressionAttributeValues?: Record<string, unknown> };
      const values = input.ExpressionAttributeValues;
      const tipRead = values?.[':prefix'] === keys.logPrefix || values?.[':high'] === keys.logRangeEnd;
      if (holding && context.commandName === 'QueryCommand' && tipRead) {
        holding = false;
        reached();
        await released;
      }
      return next(args);
    },
    { step: 'initialize', name: 'holdTheTipRead' },
  );
  return { store: createStores(slowClient, tableName).sessions, held, release };
}

/** Lets whatever the held request sent beside its tip read (nothing, once fixed) finish first. */
const moment = () => new Promise((resolve) => setTimeout(resolve, 300));

describe('a request naming a node off the head, while a change lands', () => {
  it('patches the state that is there, not an older one', async () => {
    // Prepare: node `first` with a state of its own, then a patch of it whose tip read waits
    // until an append has moved the head past `first` (and so moved first's pointer).
    const scope: SessionScope = { tenant: 't', sessionId: 'branch-patch' };
    const service = new SessionService(store);
    await service.appendMessages(scope, { messages: [{ id: 'first', role: 'user' }] });
    await service.patchState(scope, { checkpoint: 1 });
    const slow = heldTipRead();
    const writer = new SessionService(slow.store);

    // Act
    const writing = writer.patchState(scope, { writes: 1 }, { node: 'first' });
    await slow.held;
    await moment();
    await service.appendMessages(scope, { parentId: 'first', messages: [{ id: 'second', role: 'assistant' }] });
    slow.release();
    const written = await writing;

    // Assess: the patch is applied to version 1's state; before, it was applied to nothing.
    expect(written).toMatchObject({ node: 'first', prevVersion: 1, state: { checkpoint: 1, writes: 1 } });
    expect((await service.readState(scope, { node: 'first' })).state).toEqual({ checkpoint: 1, writes: 1 });
    expect((await service.readState(scope, {})).state).toEqual({ checkpoint: 1 });
  });

  it('appends under a parent that was just indexed, starting from its state', async () => {
    // Prepare: `first` is indexed by the change after the one that made it; the append's tip
    // read waits until that change (a state write at `first`) and one more have landed.
    const scope: SessionScope = { tenant: 't', sessionId: 'branch-append' };
    const service = new SessionService(store);
    await service.appendMessages(scope, { messages: [{ id: 'first', role: 'user' }] });
    const slow = heldTipRead();
    const appender = new SessionService(slow.store);

    // Act
    const appending = appender.appendMessages(scope, { parentId: 'first', messages: [{ id: 'retry', role: 'assistant' }] });
    await slow.held;
    await moment();
    await service.patchState(scope, { at: 'first' });
    await service.appendMessages(scope, { parentId: 'first', messages: [{ id: 'second', role: 'assistant' }] });
    slow.release();
    const appended = await appending;

    // Assess: the new node is under `first` and starts from first's state; before, `first`
    // read as absent (404 node_not_found).
    expect(appended.head).toBe('retry');
    expect((await service.readState(scope, { node: 'retry' })).state).toEqual({ at: 'first' });
  });

  it('appends under the head after a resent message that moved meanwhile, starting from its state', async () => {
    // Prepare: `m1`, a child of the head `h`, off the head. An append under the head resends it
    // and adds `m2`: its ids are read beside the tip, and `m1`'s pointer moves meanwhile.
    const scope: SessionScope = { tenant: 't', sessionId: 'resend-append' };
    const service = new SessionService(store);
    await service.appendMessages(scope, { messages: [{ id: 'h', role: 'user' }] });
    await service.patchState(scope, { at: 'h' });
    await service.appendMessages(scope, { messages: [{ id: 'm1', role: 'assistant' }] });
    await service.switchHead(scope, 'h');
    const slow = heldTipRead();
    const appender = new SessionService(slow.store);

    // Act: while the append waits, a write at `m1`, then one at the head moves m1's pointer.
    const appending = appender.appendMessages(scope, {
      messages: [
        { id: 'm1', role: 'assistant' },
        { id: 'm2', role: 'user' },
      ],
    });
    await slow.held;
    await moment();
    await service.patchState(scope, { at: 'm1' }, { node: 'm1' });
    await service.patchState(scope, { also: 'h' });
    slow.release();
    const appended = await appending;

    // Assess: `m2` starts from m1's state now, not the one its index said before (h's).
    expect(appended.head).toBe('m2');
    expect((await service.readState(scope, { node: 'm2' })).state).toEqual({ at: 'm1' });
  });

  it('shows the whole tree, with every node where it points', async () => {
    // Prepare: as above, with the tree read's tip read held while `first` is indexed and left.
    const scope: SessionScope = { tenant: 't', sessionId: 'tree-read' };
    const service = new SessionService(store);
    await service.appendMessages(scope, { messages: [{ id: 'first', role: 'user' }] });
    const slow = heldTipRead();
    const reader = new SessionService(slow.store);

    // Act
    const reading = reader.getTree(scope);
    await slow.held;
    await moment();
    await service.patchState(scope, { at: 'first' });
    await service.appendMessages(scope, { parentId: 'first', messages: [{ id: 'second', role: 'assistant' }] });
    slow.release();
    const tree = await reading;

    // Assess: before, `second` came without its parent `first`, which was indexed meanwhile.
    expect(tree.head).toBe('second');
    expect(tree.nodes.map((node) => node.id).sort()).toEqual(['first', 'root', 'second']);
  });
});
