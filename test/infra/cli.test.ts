import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../bin/agentstate.js';
import { ApiKeyStore } from '../../functions/store/access/api-keys.js';
import { createTestTable, dynamoEndpoint, testDynamoDbClient } from '../helpers/dynamodb.js';

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
