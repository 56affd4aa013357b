import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { type AttributeValue, type DynamoDBClient, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../bin/agentstate.js';
import { MemoryService } from '../../functions/core/memory/memory-service.js';
import { SessionService } from '../../functions/core/sessions/session-service.js';
import { ApiKeyStore } from '../../functions/store/access/api-keys.js';
import { createStores } from '../../functions/store/index.js';
import { DynamoDbMemoryStore } from '../../functions/store/memory/memory-store.js';
import { createTestTable, dynamoEndpoint, partitionItems, testDynamoDbClient } from '../helpers/dynamodb.js';

const run = promisify(execFile);
const projectRoot = fileURLToPath(new URL('../..', import.meta.url));

let client: DynamoDBClient;
let tableName: string;

beforeAll(async () => {
  client = testDynamoDbClient();
  tableName = await createTestTable('cli');
});
afterAll(() => client.destroy());

/** Runs the CLI in-process against the test table; returns exit code and output. */
async function cli(...args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main([...args, '--endpoint', dynamoEndpoint(), '--table', tableName], {
    out: (line) => out.push(line),
    err: (line) => err.push(line),
    env: {},
  });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

describe('agentstate keys', () => {
  it('creates a key that the authorizer accepts, lists it, and revokes it', async () => {
    // Act: create
    const created = await cli('keys', 'create', '--tenant', 'cli-tenant', '--agents', 'planner, writer', '--json');
    const { apiKey, keyId } = JSON.parse(created.out) as { apiKey: string; keyId: string };

    // Assess
    expect(created.code).toBe(0);
    const store = new ApiKeyStore(client, tableName);
    expect(await store.resolve(apiKey)).toEqual({ tenant: 'cli-tenant', agents: ['planner', 'writer'] });

    // Act: list
    const listed = await cli('keys', 'list', '--tenant', 'cli-tenant');
    expect(listed.out).toContain(keyId);
    expect(listed.out).toContain('planner,writer');
    expect(listed.out).not.toContain(apiKey);

    // Act: revoke
    const revoked = await cli('keys', 'revoke', keyId);
    expect(revoked).toMatchObject({ code: 0, out: expect.stringContaining(`revoked ${keyId}`) });
    expect(await store.resolve(apiKey)).toBeNull();
  });

  it('prints the key once, in text, with a warning that it is not stored', async () => {
    const created = await cli('keys', 'create', '--tenant', 'cli-text');

    expect(created.code).toBe(0);
    expect(created.out).toMatch(/^ {2}as_[A-Za-z0-9_-]{43}$/m);
    expect(created.out).toContain('only its SHA-256 is stored');
  });

  it.each([
    [['keys', 'create'], /needs --tenant/],
    [['keys', 'revoke'], /needs a key id/],
    [['keys', 'rotate'], /unknown command/],
    [['keys', 'create', '--tenant', 'bad#tenant'], /not a valid tenant id/],
    // AGENTSTATE_API_KEYS splits tenant:key at the first colon: such a tenant has no local key.
    [['keys', 'create', '--tenant', 'acme:eu'], /not a valid tenant id/],
  ])('refuses %j with a clear message', async (args, message) => {
    const result = await cli(...args);

    expect(result.code).toBeGreaterThan(0);
    expect(result.err).toMatch(message);
  });

  it.each([[''], [','], [' , ']])('refuses --agents %j instead of issuing a key that may act as any agent', async (agents) => {
    // Prepare: a script's `--agents "$AGENTS"` with the variable unset or empty.
    const before = await new ApiKeyStore(client, tableName).list({ tenant: 'cli-no-agents' });

    // Act
    const result = await cli('keys', 'create', '--tenant', 'cli-no-agents', '--agents', agents, '--json');

    // Assess: refused, and no key written (before, an unlimited key was issued)
    expect(result.code).toBeGreaterThan(0);
    expect(result.err).toMatch(/--agents names no agent/);
    expect(result.out).not.toMatch(/as_/);
    expect(await new ApiKeyStore(client, tableName).list({ tenant: 'cli-no-agents' })).toEqual(before);
  });

  it('says so when the key id is unknown', async () => {
    const result = await cli('keys', 'revoke', 'ffffffffffff');

    expect(result).toMatchObject({ code: 1, err: expect.stringContaining('no key with id ffffffffffff') });
  });

  it('runs as `npx agentstate` through the bin shim', async () => {
    const { stdout } = await run(
      'npx',
      [
        '--no-install',
        'agentstate',
        'keys',
        'create',
        '--tenant',
        'via-npx',
        '--json',
        '--endpoint',
        dynamoEndpoint(),
        '--table',
        tableName,
      ],
      { cwd: projectRoot, timeout: 30_000 },
    );

    expect(JSON.parse(stdout)).toMatchObject({ tenant: 'via-npx', apiKey: expect.stringMatching(/^as_/) });
  });
});

describe('agentstate tenants erase', () => {
  const stored = (pk: string) => partitionItems(client, tableName, pk);

  /** A tenant's data of every kind: sessions (one of a user, one of none), a profile, memory, an agent, a webhook and a dead letter. */
  async function tenantData(tenant: string): Promise<void> {
    const stores = createStores(client, tableName);
    const sessions = new SessionService(stores.sessions);
    const now = new Date().toISOString();
    for (const [sessionId, userId] of [
      ['s1', 'u1'],
      ['s2', null],
    ] as const) {
      await stores.sessions.createSession(
        { tenant, sessionId },
        { sessionId, agentId: null, userId, metadata: null, createdAt: now, updatedAt: now },
      );
      await sessions.patchState({ tenant, sessionId }, { secret: tenant });
    }
    const memory = new MemoryService(new DynamoDbMemoryStore(stores.table));
    for (const namespace of [
      ['users', 'u1'],
      ['agents', 'planner'],
    ]) {
      await memory.put(tenant, null, { namespace, key: 'k' }, { value: { secret: tenant } }, { condition: { kind: 'none' }, author: null });
    }
    for (const [pk, sk] of [
      [`P#${tenant}#u1`, 'P'],
      [`P#${tenant}#no-session-left`, 'P'],
      [`A#${tenant}`, 'A#planner'],
      [`H#${tenant}`, 'H#w1'],
      [`X#${tenant}#w1`, 'D#s1#000000000001'],
    ] as const) {
      // A profile holds a version (an item of a profile's fence alone is none, and not counted).
      const item: Record<string, AttributeValue> = { pk: { S: pk }, sk: { S: sk }, secret: { S: tenant } };
      if (pk.startsWith('P#')) item.version = { N: '1' };
      await client.send(new PutItemCommand({ TableName: tableName, Item: item }));
    }
  }

  it('refuses without a confirmation, then erases everything of the tenant and nothing of another', async () => {
    // Prepare: the tenant, another, and one whose name begins with the first's; a key of each.
    for (const tenant of ['gone', 'kept', 'gone2']) await tenantData(tenant);
    const keyOf = async (tenant: string) => JSON.parse((await cli('keys', 'create', '--tenant', tenant, '--json')).out).apiKey as string;
    const [goneKey, keptKey, gone2Key] = [await keyOf('gone'), await keyOf('kept'), await keyOf('gone2')];
    const keyStore = new ApiKeyStore(client, tableName);

    // Act: without a confirmation, with the wrong one, then with one.
    const refused = await cli('tenants', 'erase', 'gone');
    const wrong = await cli('tenants', 'erase', 'gone', '--confirm', 'kept');
    expect(await stored('P#gone#u1')).toHaveLength(1);
    const erased = await cli('tenants', 'erase', 'gone', '--confirm', 'gone', '--json');

    // Assess
    expect(refused.code).toBe(2);
    expect(refused.err).toContain('--yes');
    expect(wrong.code).toBe(2);
    expect(erased.code).toBe(0);
    // Both profiles: the one of a session's user and the one of a user with no session left.
    expect(JSON.parse(erased.out)).toMatchObject({
      tenant: 'gone',
      status: 'done',
      sessions: 2,
      memoryItems: 2,
      documents: 2,
      keysRevoked: 1,
    });
    // Its key revoked first, so that nothing it sends writes the tenant's data again; the others' work.
    expect(await keyStore.resolve(goneKey)).toBeNull();
    expect(await keyStore.resolve(keptKey)).toEqual({ tenant: 'kept', agents: null });
    expect(await keyStore.resolve(gone2Key)).toEqual({ tenant: 'gone2', agents: null });
    for (const tenant of ['gone', 'kept', 'gone2']) {
      const partitions = [
        `P#${tenant}#u1`,
        `P#${tenant}#no-session-left`,
        `A#${tenant}`,
        `H#${tenant}`,
        `X#${tenant}#w1`,
        `M#${tenant}#users/u1`,
        `M#${tenant}#agents/planner`,
        `MN#${tenant}`,
      ];
      const left = (await Promise.all(partitions.map(stored))).flat();
      const sessions = (await Promise.all(['s1', 's2'].map((sessionId) => stored(`S#${tenant}#${sessionId}`)))).flat();
      if (tenant === 'gone') {
        expect(left).toEqual([]);
        expect(sessions.every((item) => item.kind?.S === 'x')).toBe(true);
        expect(JSON.stringify(sessions)).not.toContain('secret');
      } else {
        expect(left.length).toBeGreaterThanOrEqual(partitions.length);
        expect(sessions.some((item) => item.kind?.S === 'v')).toBe(true);
      }
    }
  });

  it('leaves the tenant’s keys working with --keep-keys', async () => {
    await tenantData('reset');
    const key = JSON.parse((await cli('keys', 'create', '--tenant', 'reset', '--json')).out).apiKey as string;

    const erased = await cli('tenants', 'erase', 'reset', '--yes', '--keep-keys', '--json');

    expect(erased.code).toBe(0);
    expect(JSON.parse(erased.out)).toMatchObject({ tenant: 'reset', status: 'done', sessions: 2, keysRevoked: 0 });
    expect(await new ApiKeyStore(client, tableName).resolve(key)).toEqual({ tenant: 'reset', agents: null });
    expect(await partitionItems(client, tableName, 'P#reset#u1')).toEqual([]);
  });
});
