import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, apiClient, uniqueId } from '../helpers/api-client.js';
import { type GatedServer, startGatedServer } from '../helpers/e2e.js';

/**
 * The e2e tests' IAM gate itself (test/helpers/iam-gate.ts): since session 20 the server judges
 * its own DynamoDB calls by the roles of the synthesized template (iam-gate-preload.ts) and sends
 * only a call it does not find allowed to the gate. A judgement that let everything through would
 * leave every e2e file passing and prove nothing, so this file takes one action away from one
 * role and checks that the server's calls needing it are refused as AWS would refuse them, that
 * the other functions go on, and that `stop()` names the refused calls.
 */

let server: GatedServer;
let client: ApiClient;

beforeAll(async () => {
  server = await startGatedServer({ withhold: { fn: 'state', action: 'dynamodb:PutItem' } });
  client = apiClient(server.url);
});

afterAll(async () => {
  // stop() has run in the last test; a second call only stops what is left.
  await server?.stop().catch(() => undefined);
});

describe('the IAM gate, with PutItem taken from the state routes', () => {
  it("refuses the state routes' writes, lets the other functions write, and fails the file at stop(), naming the calls", async () => {
    // Prepare: a session made by the sessions routes, whose role is whole.
    const sid = uniqueId('gate');
    expect((await client.post('/v1/sessions', { sessionId: sid })).status).toBe(201);

    // Act: a state write (a conditional PutItem of the state routes), and a read they may still make.
    const patched = await client.patch(`/v1/sessions/${sid}/state`, { n: 1 });
    const read = await client.get(`/v1/sessions/${sid}/state`);
    const stopped = server.stop().then(
      () => null,
      (error: unknown) => error,
    );

    // Assess: the write failed as a refused call fails in AWS, nothing was written, and the gate counted it.
    expect(patched.status).toBe(500);
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ state: null });
    const error = await stopped;
    expect(error).toBeInstanceOf(Error);
    expect(String((error as Error).message)).toMatch(/state.*dynamodb:PutItem/s);
  });
});
