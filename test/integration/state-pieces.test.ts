import { QueryCommand } from '@aws-sdk/client-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import { SessionService } from '../../functions/core/sessions/session-service.js';
import { DynamoDbSessionStore } from '../../functions/store/sessions/session-store.js';
import { collectPieces, PIECE_GRACE_MS } from '../../functions/store/state/state-pieces.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import * as keys from '../../functions/store/table/keys.js';
import { TableClient } from '../../functions/store/table/table-client.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * Large states on the table (DynamoDB Local): their pieces, shared by every version and
 * branch that has the same text, put before the version that names them; and what a write
 * that crashed in between leaves, which the collector removes.
 */
const MiB = 1024 * 1024;
let tableName: string;
let clock = Date.now();
/** When set, a PutItem of a version slot fails as if the function died right before it. */
let crashBeforeVersion = false;

const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
client.middlewareStack.add(
  (next, context) => async (args) => {
    const sk = (args.input as { Item?: { sk?: string | { S?: string } } }).Item?.sk;
    const sortKey = typeof sk === 'string' ? sk : sk?.S;
    if (crashBeforeVersion && context.commandName === 'PutItemCommand' && sortKey?.startsWith(keys.logPrefix)) {
      throw new Error('injected crash: the function died before writing its version');
    }
    return next(args);
  },
  { step: 'initialize', name: 'injectCrash' },
);

let table: TableClient;
let service: SessionService;

function largeState(bytes: number): { log: string[] } {
  const log: string[] = [];
  for (let n = 0; log.length * 1000 < bytes; n++) log.push(`entry ${n} ${'agents remember what matters '.repeat(33)}`.slice(0, 990));
  return { log };
}

async function pieceKeys(sessionId: string): Promise<string[]> {
  const { Items } = await client.send(
    new QueryCommand({
      TableName: tableName,
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
      ExpressionAttributeValues: { ':pk': { S: keys.session({ tenant: 'pieces', sessionId }) }, ':prefix': { S: 'B#' } },
      ConsistentRead: true,
    }),
  );
  return (Items ?? []).map((item) => String(item.sk?.S));
}

beforeAll(async () => {
  tableName = await createTestTable('pieces');
  table = new TableClient(client, tableName, () => clock);
  service = new SessionService(new DynamoDbSessionStore(table), { retry: { maxAttempts: 1 } });
});

describe('pieces of large states', () => {
  it('are shared by every version and branch that keeps the same text', async () => {
    // Prepare: a 4 MiB state at u1, then a branch on each of two replies.
    const scope = { tenant: 'pieces', sessionId: 'shared' };
    const state = largeState(4 * MiB - 32 * 1024);
    await service.appendMessages(scope, { messages: [{ id: 'u1', role: 'user' }] });
    await service.replaceState(scope, state);
    const base = (await pieceKeys(scope.sessionId)).length;

    // Act: a 1 KB change on one branch, another on the other.
    await service.appendMessages(scope, { messages: [{ id: 'a1', role: 'assistant' }] });
    await service.patchState(scope, { note: 'a'.repeat(1024) });
    await service.appendMessages(scope, { parentId: 'u1', messages: [{ id: 'a2', role: 'assistant' }] });
    await service.patchState(scope, { note: 'b'.repeat(1024) });

    // Assess: each change is a splice on the pieces of u1's version, which puts no piece; all three states read whole.
    const after = (await pieceKeys(scope.sessionId)).length;
    expect(base).toBeGreaterThan(20);
    expect(after).toBe(base);
    expect((await service.readState(scope, { node: 'u1' })).state).toEqual(state);
    expect((await service.readState(scope, { node: 'a1' })).state).toEqual({ ...state, note: 'a'.repeat(1024) });
    expect((await service.readState(scope, { node: 'a2' })).state).toEqual({ ...state, note: 'b'.repeat(1024) });
  });

  it('left by a write that crashed before its version change nothing, and are collected', async () => {
    // Prepare
    const scope = { tenant: 'pieces', sessionId: 'crash' };
    const state = largeState(2 * MiB);
    await service.replaceState(scope, state);
    const live = await pieceKeys(scope.sessionId);

    // Act: the write puts its pieces, then dies before its version.
    crashBeforeVersion = true;
    const crashed = await service.replaceState(scope, largeState(3 * MiB)).catch((error: Error) => error);
    crashBeforeVersion = false;
    const orphans = (await pieceKeys(scope.sessionId)).filter((sk) => !live.includes(sk));

    // Assess: nothing visible changed; the collector leaves young pieces, then removes the orphans only.
    expect(crashed).toBeInstanceOf(Error);
    expect(orphans.length).toBeGreaterThan(0);
    expect(await service.readState(scope, {})).toMatchObject({ version: 1, state });
    expect(await collectPieces(table, scope)).toBe(0);
    clock += PIECE_GRACE_MS + 1;
    expect(await collectPieces(table, scope)).toBe(orphans.length);
    expect((await pieceKeys(scope.sessionId)).sort()).toEqual([...live].sort());
    expect(await service.readState(scope, {})).toMatchObject({ version: 1, state });
  });

  it('are never collected while a version names them, however old', async () => {
    const scope = { tenant: 'pieces', sessionId: 'old' };
    const state = largeState(MiB);
    await service.replaceState(scope, state);
    await service.patchState(scope, { more: true });
    clock += 10 * PIECE_GRACE_MS;

    const removed = await collectPieces(table, scope);

    expect(removed).toBe(0);
    expect((await service.readState(scope, { version: 1 })).state).toEqual(state);
    expect((await service.readState(scope, {})).state).toEqual({ ...state, more: true });
  });
});
