import { beforeAll, describe, expect, it } from 'vitest';
import type { SessionScope } from '../../functions/core/model/model.js';
import { headState } from '../../functions/core/sessions/head-state.js';
import { SessionService } from '../../functions/core/sessions/session-service.js';
import { createStores } from '../../functions/store/index.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * An append by the process that made the session's last change writes the index that change
 * owes (its nodes, which leave the tip) beside its tip read instead of after it
 * (functions/store/log/log-writer.ts, `writeAhead`), and reads the tip and its new ids by key
 * (session-log.ts, `tipByKey`). The claim of the new change must still wait until that index
 * has landed: once the log moves past a change, its nodes are found only in the index. Here the
 * index written ahead is held, then lost (as a write is when its process is killed before
 * DynamoDB took it), and another process, with nothing in memory, reads every node by id.
 * Real DynamoDB Local.
 */

let tableName: string;
const plain = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });

beforeAll(async () => {
  tableName = await createTestTable('index-ahead');
});

/** A process whose next BatchWriteItem, once `hold()` is called, waits for `lose()` and never lands. */
function processLosingItsNextBatch() {
  const sent: string[] = [];
  let holding = false;
  let reached!: () => void;
  const held = new Promise<void>((resolve) => {
    reached = resolve;
  });
  let lose!: () => void;
  const lost = new Promise<void>((resolve) => {
    lose = resolve;
  });
  const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
  client.middlewareStack.add(
    (next, context) => async (args) => {
      sent.push(String(context.commandName).replace(/Command$/, ''));
      if (holding && context.commandName === 'BatchWriteItemCommand') {
        holding = false;
        reached();
        await lost;
        throw new Error('the process was killed before DynamoDB took this write');
      }
      return next(args);
    },
    { step: 'initialize', name: 'loseTheNextBatch' },
  );
  return {
    service: new SessionService(createStores(client, tableName).sessions, { headState }),
    sent,
    hold: () => {
      holding = true;
    },
    held,
    lose,
  };
}

/** Another process: nothing of the first one's memory, every read from the table. */
const anotherProcess = () => new SessionService(createStores(plain, tableName).sessions, { headState });

const moment = () => new Promise((resolve) => setTimeout(resolve, 300));

describe('the index a change owes, written beside the next append’s tip read', () => {
  it('is waited for before the claim: lost, the append writes it again, and no node goes missing', async () => {
    // Prepare: two checkpoints appended with their states by one process, as LangGraph's puts.
    const scope: SessionScope = { tenant: 't', sessionId: 'lost-ahead' };
    const writer = processLosingItsNextBatch();
    const state = (step: number) => ({ replace: true as const, value: { step } });
    await writer.service.appendMessages(scope, { messages: [{ id: 'c1', role: 'checkpoint' }], state: state(1) });
    await writer.service.appendMessages(scope, { parentId: 'c1', messages: [{ id: 'c2', role: 'checkpoint' }], state: state(2) });

    // Act: the third put; its index of c2, written ahead, is held, then lost.
    writer.hold();
    writer.sent.length = 0;
    const putting = writer.service.appendMessages(scope, {
      parentId: 'c2',
      messages: [{ id: 'c3', role: 'checkpoint' }],
      state: state(3),
    });
    await writer.held;
    await moment();
    const beforeLoss = [...writer.sent];
    writer.lose();
    await putting;

    // Assess: nothing claimed while the index was in the air; then c2's index again, then the claim.
    expect(beforeLoss).toEqual(['BatchWriteItem', 'BatchGetItem']);
    expect(writer.sent).toEqual(['BatchWriteItem', 'BatchGetItem', 'BatchWriteItem', 'PutItem']);
    // Another process finds every checkpoint by id, c2 (which left the tip) included.
    const reader = anotherProcess();
    for (const [id, step] of [
      ['c1', 1],
      ['c2', 2],
      ['c3', 3],
    ] as const) {
      expect(await reader.getNode(scope, id)).toMatchObject({ id });
      expect((await reader.readState(scope, { node: id })).state).toEqual({ step });
    }
    expect((await reader.getTree(scope)).nodes.map((node) => node.id).sort()).toEqual(['c1', 'c2', 'c3', 'root']);
  });

  it('writes only what the log holds when another process moved the log on: the append reads the tip again', async () => {
    // Prepare: this process appends c1 and c2; another appends c3 under c2 (and indexes c2).
    const scope: SessionScope = { tenant: 't', sessionId: 'moved-on' };
    const writer = processLosingItsNextBatch();
    await writer.service.appendMessages(scope, { messages: [{ id: 'c1', role: 'checkpoint' }] });
    await writer.service.appendMessages(scope, { parentId: 'c1', messages: [{ id: 'c2', role: 'checkpoint' }] });
    await anotherProcess().appendMessages(scope, { parentId: 'c2', messages: [{ id: 'c3', role: 'checkpoint' }] });

    // Act: this process appends under c3, knowing only its own c2.
    writer.sent.length = 0;
    await writer.service.appendMessages(scope, { parentId: 'c3', messages: [{ id: 'c4', role: 'checkpoint' }] });

    // Assess: c2's index ahead (the truth: c2 is in the log), the keys after c2 (taken: the log
    // moved on), so the tip and the new id read as any process reads them, c3's index, the claim.
    expect(writer.sent).toEqual(['BatchWriteItem', 'BatchGetItem', 'Query', 'Query', 'BatchWriteItem', 'PutItem']);
    const tree = await anotherProcess().getTree(scope);
    expect(tree.nodes.map((node) => [node.id, node.parentId]).sort()).toEqual([
      ['c1', 'root'],
      ['c2', 'c1'],
      ['c3', 'c2'],
      ['c4', 'c3'],
      ['root', null],
    ]);
    expect(tree.head).toBe('c4');
  });

  it('does not append a message twice when a resend comes to the process that made it', async () => {
    // Prepare: a message with an id, appended by this process; then one after it.
    const scope: SessionScope = { tenant: 't', sessionId: 'resent' };
    const writer = processLosingItsNextBatch();
    await writer.service.appendMessages(scope, { messages: [{ id: 'm1', role: 'user' }] });
    await writer.service.appendMessages(scope, { messages: [{ id: 'm2', role: 'assistant' }] });
    await writer.service.appendMessages(scope, { messages: [{ id: 'm3', role: 'user' }] });

    // Act: m2 and m1 sent again under their parents (found by key in the index, and in the tip).
    await writer.service.appendMessages(scope, { parentId: 'm1', messages: [{ id: 'm2', role: 'assistant' }] });
    await writer.service.appendMessages(scope, { parentId: 'm2', messages: [{ id: 'm3', role: 'user' }] });

    // Assess: three messages in a line, the head where the last resend left it.
    const tree = await anotherProcess().getTree(scope);
    expect(tree.nodes.map((node) => [node.id, node.parentId]).sort()).toEqual([
      ['m1', 'root'],
      ['m2', 'm1'],
      ['m3', 'm2'],
      ['root', null],
    ]);
    expect(tree.head).toBe('m3');
  });
});
