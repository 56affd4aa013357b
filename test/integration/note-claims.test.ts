import { QueryCommand } from '@aws-sdk/client-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import { AgentStateError } from '../../functions/core/kernel/errors.js';
import type { SessionScope } from '../../functions/core/model/model.js';
import { headState } from '../../functions/core/sessions/head-state.js';
import { SessionService } from '../../functions/core/sessions/session-service.js';
import { createStores } from '../../functions/store/index.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import { LOG_ITEM_KIND } from '../../functions/store/table/item-kinds.js';
import * as keys from '../../functions/store/table/keys.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * A note beside an append of its session under way in the same process takes the append's
 * claim for its tip read (functions/store/log/own-claims.ts): LangGraph's saver sends a step's
 * writes beside the next checkpoint's `put`. A claim stands for the read only when it is sent
 * after the note arrived and lands; a delete that lands first makes the claim fail, and the
 * note reads the tip and answers as after any delete. Real DynamoDB Local; the race is made
 * exact by holding the append's claim.
 */

let tableName: string;
const plain = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });

beforeAll(async () => {
  tableName = await createTestTable('note-claims');
});

/**
 * A process that logs each DynamoDB request it sends, and whose next BatchWriteItem, once
 * `hold()` is called, waits for `release()`: an append's index written ahead, which its claim
 * waits for (log-writer.ts, `putOwed`), so the append is held after its tip read and before its claim.
 */
function processHoldingItsNextClaim() {
  const sent: string[] = [];
  let holding = false;
  let reached!: () => void;
  const held = new Promise<void>((resolve) => {
    reached = resolve;
  });
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const input = (args as { input: { Item?: { sk?: { S?: string } } } }).input;
      const sk = input.Item?.sk?.S ?? '';
      sent.push(`${String(context.commandName).replace(/Command$/, '')}${sk ? ` ${sk.split('#')[0]}` : ''}`);
      if (holding && context.commandName === 'BatchWriteItemCommand') {
        holding = false;
        reached();
        await released;
      }
      return next(args);
    },
    { step: 'build', name: 'holdTheNextBatch' },
  );
  let holdingAnswer = false;
  let answered!: () => void;
  const answerHeld = new Promise<void>((resolve) => {
    answered = resolve;
  });
  client.middlewareStack.add(
    (next) => async (args) => {
      const output = await next(args);
      const input = (args as { input: { Item?: { sk?: { S?: string } } } }).input;
      if (holdingAnswer && input.Item?.sk?.S?.startsWith(keys.logPrefix)) {
        holdingAnswer = false;
        answered();
        await released;
      }
      return output;
    },
    { step: 'build', name: 'holdTheNextClaimsAnswer' },
  );
  return {
    service: new SessionService(createStores(client, tableName).sessions, { headState }),
    sent,
    /** The next claim lands, and its answer waits for `release()`. */
    holdAnswer: () => {
      holdingAnswer = true;
    },
    answerHeld,
    hold: () => {
      holding = true;
    },
    held,
    release,
  };
}

/** Every sort key of the session's items but tombstones, straight from the table. */
async function sortKeys(scope: SessionScope): Promise<string[]> {
  const { Items } = await plain.send(
    new QueryCommand({
      TableName: tableName,
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': { S: keys.session(scope) } },
      ConsistentRead: true,
    }),
  );
  return (Items ?? []).filter((item) => item.kind?.S !== LOG_ITEM_KIND.tombstone).map((item) => item.sk?.S ?? '');
}

const state = (step: number) => ({ replace: true as const, value: { step } });

describe('a note beside an append under way in its process', () => {
  it('takes the append’s claim for its tip read: one PutItem, and the note reads back', async () => {
    // Prepare: two checkpoints appended by one process, as LangGraph's puts.
    const scope: SessionScope = { tenant: 't', sessionId: 'note-beside-append' };
    const writer = processHoldingItsNextClaim();
    await writer.service.appendMessages(scope, { messages: [{ id: 'c1', role: 'checkpoint' }], state: state(1) });
    await writer.service.appendMessages(scope, { parentId: 'c1', messages: [{ id: 'c2', role: 'checkpoint' }], state: state(2) });

    // Act: the next checkpoint's append, held before its claim, and the writes of c2 sent beside it.
    writer.hold();
    writer.sent.length = 0;
    const appended = writer.service.appendMessages(scope, {
      parentId: 'c2',
      messages: [{ id: 'c3', role: 'checkpoint' }],
      state: state(3),
    });
    await writer.held;
    const noted = writer.service.putNote(scope, 'c2', 'task-1', { channel: 'answer', value: 42 });
    await new Promise((resolve) => setTimeout(resolve, 50));
    writer.release();
    await Promise.all([appended, noted]);

    // Assert: the note was one PutItem of its own (no Query of the tip), after the append's claim.
    const noteRequests = writer.sent.filter((request) => request === 'PutItem W');
    expect(noteRequests).toHaveLength(1);
    expect(writer.sent.filter((request) => request.startsWith('Query'))).toEqual([]);
    expect(writer.sent.indexOf('PutItem W')).toBeGreaterThan(writer.sent.indexOf('PutItem V'));
    const read = await new SessionService(createStores(plain, tableName).sessions).readState(scope, { node: 'c2', notes: true });
    expect(read.notes).toEqual({ 'task-1': { channel: 'answer', value: 42 } });
  });

  it('reads the tip itself when a delete lands before the append’s claim: 404, and nothing of it is left', async () => {
    // Prepare: a session with two checkpoints, written by one process.
    const scope: SessionScope = { tenant: 't', sessionId: 'note-before-delete' };
    const writer = processHoldingItsNextClaim();
    await writer.service.appendMessages(scope, { messages: [{ id: 'c1', role: 'checkpoint' }], state: state(1) });
    await writer.service.appendMessages(scope, { parentId: 'c1', messages: [{ id: 'c2', role: 'checkpoint' }], state: state(2) });

    // Act: the next append is held before its claim; a note of c2 arrives and waits for that claim;
    // another process deletes the session, whole; then the claim goes and fails on the fence.
    writer.hold();
    const appended = writer.service.appendMessages(scope, {
      parentId: 'c2',
      messages: [{ id: 'c3', role: 'checkpoint' }],
      state: state(3),
    });
    await writer.held;
    writer.sent.length = 0;
    const noted = writer.service.putNote(scope, 'c2', 'task-1', { channel: 'answer', value: 42 });
    // Its rejection, asserted below, may come during the wait: handled from now on, not unhandled.
    noted.catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 20));
    await new SessionService(createStores(plain, tableName).sessions).deleteSession(scope);
    writer.release();
    const [append, note] = await Promise.allSettled([appended, noted]);

    // Assert: the note read the tip after the claim failed, found the session gone, and wrote nothing.
    expect(note.status).toBe('rejected');
    const error = (note as PromiseRejectedResult).reason as AgentStateError;
    expect(error).toBeInstanceOf(AgentStateError);
    expect(['session_not_found', 'node_not_found']).toContain(error.code);
    expect(writer.sent).not.toContain('PutItem W');
    expect(append.status).toBe('rejected');
    expect((await sortKeys(scope)).filter((sk) => sk.startsWith(keys.notePrefix))).toEqual([]);
  });

  it('does not take a claim sent before it arrived: a delete between them answers 404', async () => {
    // Prepare: a session with two checkpoints, written by one process.
    const scope: SessionScope = { tenant: 't', sessionId: 'claim-before-note' };
    const writer = processHoldingItsNextClaim();
    await writer.service.appendMessages(scope, { messages: [{ id: 'c1', role: 'checkpoint' }], state: state(1) });
    await writer.service.appendMessages(scope, { parentId: 'c1', messages: [{ id: 'c2', role: 'checkpoint' }], state: state(2) });

    // Act: the next append's claim lands, and its answer is held; another process deletes the
    // session, whole; then a note of c2 arrives while the append has not heard back.
    writer.holdAnswer();
    const appended = writer.service.appendMessages(scope, {
      parentId: 'c2',
      messages: [{ id: 'c3', role: 'checkpoint' }],
      state: state(3),
    });
    await writer.answerHeld;
    await new SessionService(createStores(plain, tableName).sessions).deleteSession(scope);
    writer.sent.length = 0;
    const noted = writer.service.putNote(scope, 'c2', 'task-1', { channel: 'answer', value: 42 });
    // Its rejection, asserted below, may come during the wait: handled from now on, not unhandled.
    noted.catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 20));
    writer.release();
    const [, note] = await Promise.allSettled([appended, noted]);

    // Assert: the note read the tip itself, after the delete, and wrote nothing.
    expect(note.status).toBe('rejected');
    expect(writer.sent).toContain('Query');
    expect(writer.sent).not.toContain('PutItem W');
    expect((await sortKeys(scope)).filter((sk) => sk.startsWith(keys.notePrefix))).toEqual([]);
  });
});
