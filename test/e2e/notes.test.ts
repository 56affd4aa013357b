/**
 * Notes beside a node (API.md section 3, "Notes"; docs/api.md): blind writes outside the
 * session's log, read with the node's state or the tree, gone with the session. Real HTTP on
 * DynamoDB Local, through the IAM gate (the tree function's role) and the OpenAPI document.
 */
import { type DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultTableName } from '../../functions/store/table/table.js';
import { dynamoDbEndpointOf, issueKey, rawTableClient } from '../helpers/admin.js';
import { type ApiClient, apiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

let api: RunningApi;
let http: ApiClient;
let other: ApiClient;
let planner: ApiClient;
let raw: DynamoDBDocumentClient;

beforeAll(async () => {
  api = await startApi();
  const endpoint = dynamoDbEndpointOf(api);
  raw = rawTableClient(endpoint);
  const apiKey = await issueKey(endpoint, { agents: ['planner'] });
  http = apiClient(api.url);
  other = apiClient(api.url, 'other-key');
  planner = apiClient(api.url, apiKey);
  for (const agentId of ['planner', 'billing']) expect((await http.put(`/v1/agents/${agentId}`, { config: {} })).status).toBe(201);
});

afterAll(async () => {
  raw?.destroy();
  await api?.stop();
});

/** The sort keys of the notes stored in a session's partition, read raw from DynamoDB Local. */
async function storedNotes(sid: string): Promise<string[]> {
  const { Items = [] } = await raw.send(
    new QueryCommand({
      TableName: defaultTableName,
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :notes)',
      ExpressionAttributeValues: { ':pk': `S#local#${sid}`, ':notes': 'W#' },
      ConsistentRead: true,
    }),
  );
  return Items.map((item) => String(item.sk));
}

/** A session with the chain root → a1 → a2 (head a2) and a state at a1 (version 1). */
async function sessionWithNodes(prefix: string, body: Record<string, unknown> = {}): Promise<string> {
  const sid = uniqueId(prefix);
  expect((await http.post('/v1/sessions', { sessionId: sid, ...body })).status).toBe(201);
  expect(
    (await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'a1', role: 'checkpoint' }], replaceState: { n: 1 } })).status,
  ).toBe(201);
  expect((await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'a2', role: 'checkpoint' }] })).status).toBe(201);
  return sid;
}

describe('notes beside a node', () => {
  it('puts, replaces and reads notes with the node, the head and the tree; no version, the state untouched', async () => {
    // Prepare
    const sid = await sessionWithNodes('notes');

    // Act
    const put = await http.put(`/v1/sessions/${sid}/nodes/a1/notes/t1`, { channel: 'x', value: 1 });
    await http.put(`/v1/sessions/${sid}/nodes/a1/notes/t2`, [1, 'two']);
    await http.put(`/v1/sessions/${sid}/nodes/a1/notes/t1`, { channel: 'x', value: 2 });
    await http.put(`/v1/sessions/${sid}/nodes/a2/notes/__proto__`, { polluted: true });
    await http.put(`/v1/sessions/${sid}/nodes/root/notes/r`, null);
    const atNode = await http.get(`/v1/sessions/${sid}/state?node=a1&notes=1`);
    const atHead = await http.get(`/v1/sessions/${sid}/state?notes=true`);
    const plain = await http.get(`/v1/sessions/${sid}/state?node=a1`);
    const tree = await http.get(`/v1/sessions/${sid}/tree?notes=1`);
    const session = await http.get(`/v1/sessions/${sid}`);

    // Assert
    expect(put.status).toBe(200);
    expect(put.body).toEqual({ sessionId: sid, node: 'a1', key: 't1' });
    expect(atNode.body).toMatchObject({
      node: 'a1',
      version: 1,
      state: { n: 1 },
      notes: { t1: { channel: 'x', value: 2 }, t2: [1, 'two'] },
    });
    expect(atHead.body).toMatchObject({ node: 'a2', state: { n: 1 } });
    expect(JSON.parse(atHead.text).notes).toEqual(JSON.parse('{"__proto__":{"polluted":true}}'));
    expect(plain.body).not.toHaveProperty('notes');
    expect(JSON.parse(tree.text).notes).toEqual(
      JSON.parse('{"root":{"r":null},"a1":{"t1":{"channel":"x","value":2},"t2":[1,"two"]},"a2":{"__proto__":{"polluted":true}}}'),
    );
    // Notes are no change of the session's log: still the one version the append made.
    expect(session.body.version).toBe(1);
    expect((await http.get(`/v1/sessions/${sid}/versions`)).body.versions).toHaveLength(1);
  });

  it('refuses an unknown node, an unknown session, a bad key and a note over 256 KiB (413, nothing written); takes one at the limit', async () => {
    // Prepare
    const sid = await sessionWithNodes('notes-refused');
    const limit = 256 * 1024;
    const atLimit = 'x'.repeat(limit - 2);
    const over = 'x'.repeat(limit - 1);

    // Act
    const unknownNode = await http.put(`/v1/sessions/${sid}/nodes/nope/notes/k`, 1);
    const unknownSession = await http.put(`/v1/sessions/${uniqueId('none')}/nodes/a1/notes/k`, 1);
    const badKey = await http.put(`/v1/sessions/${sid}/nodes/a1/notes/a%20b`, 1);
    const tooLarge = await http.put(`/v1/sessions/${sid}/nodes/a1/notes/big`, over);
    const fits = await http.put(`/v1/sessions/${sid}/nodes/a1/notes/fits`, atLimit);
    const read = await http.get(`/v1/sessions/${sid}/state?node=a1&notes=1`);
    const withVersion = await http.get(`/v1/sessions/${sid}/state?version=1&notes=1`);

    // Assert
    expect(unknownNode.status).toBe(404);
    expect(unknownNode.body.code).toBe('node_not_found');
    expect(unknownSession.status).toBe(404);
    expect(unknownSession.body.code).toBe('session_not_found');
    expect(badKey.status).toBe(400);
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.body).toMatchObject({ code: 'payload_too_large', limitBytes: limit, sizeBytes: limit + 1 });
    expect(fits.status).toBe(200);
    expect(Object.keys(read.body.notes)).toEqual(['fits']);
    expect(read.body.notes.fits).toHaveLength(limit - 2);
    expect(withVersion.status).toBe(400);
  });

  it("another tenant's key neither writes nor reads a session's notes", async () => {
    // Prepare
    const sid = await sessionWithNodes('notes-tenant');
    await http.put(`/v1/sessions/${sid}/nodes/a1/notes/mine`, 'secret');

    // Act
    const written = await other.put(`/v1/sessions/${sid}/nodes/a1/notes/theirs`, 'x');
    const read = await other.get(`/v1/sessions/${sid}/state?node=a1&notes=1`);
    const tree = await other.get(`/v1/sessions/${sid}/tree?notes=1`);
    const own = await http.get(`/v1/sessions/${sid}/state?node=a1&notes=1`);

    // Assert
    expect(written.status).toBe(404);
    // An unknown session reads as never written (API.md section 4), its notes none.
    expect(read.body).toMatchObject({ state: null, version: 0, notes: {} });
    expect(read.text).not.toContain('secret');
    expect(tree.status).toBe(404);
    expect(own.body.notes).toEqual({ mine: 'secret' });
  });

  it("answers LangGraph's first read of a new thread (the head's state with notes) as before: a session never made reads as never written, a note at the root of one made is read", async () => {
    // Prepare: a session made and never written, with a note at its root.
    const made = uniqueId('notes-made');
    expect((await http.post('/v1/sessions', { sessionId: made })).status).toBe(201);
    expect((await http.put(`/v1/sessions/${made}/nodes/root/notes/k`, 'kept')).status).toBe(200);
    const never = uniqueId('notes-never');

    // Act
    const unknown = await http.get(`/v1/sessions/${never}/state?notes=1`);
    const noted = await http.get(`/v1/sessions/${made}/state?notes=1`);

    // Assert: what these answered before the tip read told a session that does not exist (its
    // answer then needs no read of notes); the one made still reads its root's notes.
    expect(unknown.status).toBe(200);
    expect(unknown.body).toEqual({ sessionId: never, node: 'root', version: 0, state: null, agent: null, updatedAt: null, notes: {} });
    expect(unknown.headers.get('etag')).toBe(noted.headers.get('etag'));
    expect(noted.status).toBe(200);
    expect(noted.body).toEqual({
      sessionId: made,
      node: 'root',
      version: 0,
      state: null,
      agent: null,
      updatedAt: null,
      notes: { k: 'kept' },
    });
  });

  it("a key limited to planner writes notes in planner's sessions, not in billing's (403, nothing written)", async () => {
    // Prepare
    const mine = await sessionWithNodes('notes-planner', { agentId: 'planner' });
    const theirs = await sessionWithNodes('notes-billing', { agentId: 'billing' });

    // Act
    const allowed = await planner.put(`/v1/sessions/${mine}/nodes/a1/notes/k`, 1, { headers: { 'x-agent-id': 'planner' } });
    const refused = await planner.put(`/v1/sessions/${theirs}/nodes/a1/notes/k`, 1, { headers: { 'x-agent-id': 'planner' } });

    // Assert
    expect(allowed.status).toBe(200);
    expect(refused.status).toBe(403);
    expect((await http.get(`/v1/sessions/${theirs}/tree?notes=1`)).body.notes).toEqual({});
  });

  it('100 notes at one node at once, beside 20 appends: every one answered 200 and read back, the appends all landed', async () => {
    // Prepare
    const sid = await sessionWithNodes('notes-crowd');

    // Act
    const [notes, appends] = await Promise.all([
      Promise.all(Array.from({ length: 100 }, (_, index) => http.put(`/v1/sessions/${sid}/nodes/a2/notes/task-${index}`, { index }))),
      Promise.all(
        Array.from({ length: 20 }, (_, index) =>
          http.post(`/v1/sessions/${sid}/messages`, { parentId: 'a2', messages: [{ id: `c${index}`, role: 'checkpoint' }] }),
        ),
      ),
    ]);
    const read = await http.get(`/v1/sessions/${sid}/state?node=a2&notes=1`);

    // Assert
    expect(notes.map((response) => response.status)).toEqual(Array(100).fill(200));
    expect(appends.map((response) => response.status)).toEqual(Array(20).fill(201));
    expect(Object.keys(read.body.notes)).toHaveLength(100);
    expect(read.body.notes['task-42']).toEqual({ index: 42 });
  });

  it("a copy holds each copied node's notes: every node's with the tree, the path's with a node; then independent", async () => {
    // Prepare: root → a1 → a2, and a branch a1 → b2, each with a note.
    const sid = await sessionWithNodes('notes-copy');
    await http.post(`/v1/sessions/${sid}/messages`, { parentId: 'a1', messages: [{ id: 'b2', role: 'checkpoint' }] });
    for (const node of ['root', 'a1', 'a2', 'b2']) await http.put(`/v1/sessions/${sid}/nodes/${node}/notes/k`, node);

    // Act
    const whole = await http.post(`/v1/sessions/${sid}/copy`, { sessionId: uniqueId('notes-copy-tree'), tree: true });
    const path = await http.post(`/v1/sessions/${sid}/copy`, { sessionId: uniqueId('notes-copy-path'), node: 'a2' });
    await http.put(`/v1/sessions/${whole.body.sessionId}/nodes/a1/notes/k`, 'changed in the copy');

    // Assert
    expect((await http.get(`/v1/sessions/${whole.body.sessionId}/tree?notes=1`)).body.notes).toEqual({
      root: { k: 'root' },
      a1: { k: 'changed in the copy' },
      a2: { k: 'a2' },
      b2: { k: 'b2' },
    });
    expect((await http.get(`/v1/sessions/${path.body.sessionId}/tree?notes=1`)).body.notes).toEqual({
      root: { k: 'root' },
      a1: { k: 'a1' },
      a2: { k: 'a2' },
    });
    expect((await http.get(`/v1/sessions/${sid}/state?node=a1&notes=1`)).body.notes).toEqual({ k: 'a1' });
  });

  it('go with the session: a delete erases them, and a session started again under the same id has none', async () => {
    // Prepare
    const sid = await sessionWithNodes('notes-delete');
    await http.put(`/v1/sessions/${sid}/nodes/a1/notes/k`, 'before');

    expect(await storedNotes(sid)).toHaveLength(1);

    // Act
    expect((await http.delete(`/v1/sessions/${sid}`)).status).toBe(204);
    const storedAfterDelete = await storedNotes(sid);
    const afterDelete = await http.put(`/v1/sessions/${sid}/nodes/a1/notes/k`, 'late');
    await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'a1', role: 'checkpoint' }] });
    const again = await http.get(`/v1/sessions/${sid}/state?node=a1&notes=1`);
    const tree = await http.get(`/v1/sessions/${sid}/tree?notes=1`);

    // Assert
    expect(storedAfterDelete).toEqual([]);
    expect(afterDelete.status).toBe(404);
    expect(again.body.notes).toEqual({});
    expect(tree.body.notes).toEqual({});
  });

  it("go with the user's sessions when the user is erased: none stored once the erasure is done", async () => {
    // Prepare
    const user = uniqueId('notes-user');
    const sid = await sessionWithNodes('notes-erased', { userId: user });
    await http.put(`/v1/sessions/${sid}/nodes/a1/notes/k`, 'personal');

    // Act
    const erase = await http.delete(`/v1/users/${user}`);
    let status = '';
    for (let attempt = 0; attempt < 200 && status !== 'done'; attempt++) {
      status = (await http.get(`/v1/erasures/${erase.body.erasureId}`)).body.status;
      if (status !== 'done') await new Promise((resolve) => setTimeout(resolve, 100));
    }

    // Assert
    expect(erase.status).toBe(202);
    expect(status).toBe('done');
    expect(await storedNotes(sid)).toEqual([]);
    expect((await http.get(`/v1/sessions/${sid}/state?node=a1&notes=1`)).body).toMatchObject({ state: null, notes: {} });
  });

  it('go with the session when it expires: refused from the expiry on, and none when it starts again', async () => {
    // Prepare
    const sid = await sessionWithNodes('notes-expiry');
    await http.put(`/v1/sessions/${sid}/nodes/a1/notes/k`, 'before');
    const patched = await http.patch(`/v1/sessions/${sid}`, { ttlSeconds: 1 });
    expect(patched.status).toBe(200);

    // Act
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const afterExpiry = await http.put(`/v1/sessions/${sid}/nodes/a1/notes/k`, 'late');
    const read = await http.get(`/v1/sessions/${sid}/state?node=a1&notes=1`);
    await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'a1', role: 'checkpoint' }] });
    const again = await http.get(`/v1/sessions/${sid}/state?node=a1&notes=1`);

    // Assert
    expect(afterExpiry.status).toBe(404);
    expect(read.body).toMatchObject({ state: null, version: 0, notes: {} });
    expect(again.body.notes).toEqual({});
  });
});

// From versions-notes.test.ts, a file of its own before, which started a server, issued a key
// limited to 'planner' and registered the agents planner and billing as this file does: its
// tests on this file's server and clients, each on a session of its own.
/**
 * A page of history with the notes of named nodes (`GET …/versions?notesOf=`, docs/api.md):
 * what LangGraph's `list` reads of the checkpoints it shows, in the request that reads their
 * states, instead of every node's notes with the tree. Real HTTP on DynamoDB Local, through the
 * IAM gate (the state function's role) and the OpenAPI document.
 */
const asPlanner = { headers: { 'x-agent-id': 'planner' } };

/** A session with the chain root → n1 → … → n`count`, each node with a state and a note `k`. */
async function sessionWithNotes(prefix: string, count: number, body: Record<string, unknown> = {}): Promise<string> {
  const sid = uniqueId(prefix);
  expect((await http.post('/v1/sessions', { sessionId: sid, ...body })).status).toBe(201);
  for (let n = 1; n <= count; n++) {
    const appended = await http.post(`/v1/sessions/${sid}/messages`, {
      messages: [{ id: `n${n}`, role: 'checkpoint' }],
      replaceState: { n },
    });
    expect(appended.status, appended.text).toBe(201);
    expect((await http.put(`/v1/sessions/${sid}/nodes/n${n}/notes/k`, { of: `n${n}` })).status).toBe(200);
  }
  return sid;
}

describe('GET …/versions?notesOf=', () => {
  it('carries the notes of the named nodes only, beside any page, and leaves out nodes without notes', async () => {
    // Prepare
    const sid = await sessionWithNotes('notes-of', 6);
    await http.put(`/v1/sessions/${sid}/nodes/n2/notes/extra`, [1, 2]);

    // Act
    const first = await http.get(`/v1/sessions/${sid}/versions?limit=2&notesOf=n6,n2,root,nope`);
    const later = await http.get(`/v1/sessions/${sid}/versions?limit=2&cursor=${first.body.next}&notesOf=n1`);
    const plain = await http.get(`/v1/sessions/${sid}/versions?limit=2`);

    // Assert
    expect(first.status, first.text).toBe(200);
    expect(first.body.versions.map((version: { version: number }) => version.version)).toEqual([6, 5]);
    expect(first.body.notes).toEqual({ n6: { k: { of: 'n6' } }, n2: { k: { of: 'n2' }, extra: [1, 2] } });
    expect(later.body.versions.map((version: { version: number }) => version.version)).toEqual([4, 3]);
    expect(later.body.notes).toEqual({ n1: { k: { of: 'n1' } } });
    expect(plain.body).not.toHaveProperty('notes');
  });

  it('reads the named nodes past a range that holds over 1 MB of notes of other nodes', async () => {
    // Prepare: n2, between n1 and n3 in the key order, holds 1.25 MB of notes.
    const sid = await sessionWithNotes('notes-of-range', 3);
    const large = 'x'.repeat(250_000);
    for (let index = 0; index < 5; index++) {
      expect((await http.put(`/v1/sessions/${sid}/nodes/n2/notes/big${index}`, large)).status).toBe(200);
    }

    // Act
    const page = await http.get(`/v1/sessions/${sid}/versions?limit=1&notesOf=n3,n1`);

    // Assert
    expect(page.status, page.text).toBe(200);
    expect(page.body.notes).toEqual({ n1: { k: { of: 'n1' } }, n3: { k: { of: 'n3' } } });
    expect(page.text.length).toBeLessThan(2_000);
  });

  it("keeps the session's current life: notes of the same nodes before a delete are not carried", async () => {
    // Prepare
    const sid = await sessionWithNotes('notes-of-life', 2);
    expect((await http.delete(`/v1/sessions/${sid}`)).status).toBe(204);
    expect((await http.post('/v1/sessions', { sessionId: sid })).status).toBe(201);
    const again = await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'n1', role: 'checkpoint' }], replaceState: { n: 1 } });
    expect(again.status, again.text).toBe(201);
    await http.put(`/v1/sessions/${sid}/nodes/n1/notes/fresh`, true);

    // Act
    const page = await http.get(`/v1/sessions/${sid}/versions?notesOf=n1,n2`);

    // Assert
    expect(page.body.notes).toEqual({ n1: { fresh: true } });
  });

  it('refuses more than 200 nodes, a bad id, and notesOf with node (400)', async () => {
    // Prepare
    const sid = await sessionWithNotes('notes-of-refused', 1);
    const ids = Array.from({ length: 201 }, (_, index) => `x${index}`).join(',');

    // Act
    const tooMany = await http.get(`/v1/sessions/${sid}/versions?notesOf=${ids}`);
    const atLimit = await http.get(`/v1/sessions/${sid}/versions?notesOf=${ids.split(',').slice(0, 200).join(',')}`);
    const badId = await http.get(`/v1/sessions/${sid}/versions?notesOf=n1,a%20b`);
    const empty = await http.get(`/v1/sessions/${sid}/versions?notesOf=`);
    const withNode = await http.get(`/v1/sessions/${sid}/versions?node=n1&notesOf=n1`);

    // Assert
    expect(tooMany.status).toBe(400);
    expect(tooMany.body).toMatchObject({ code: 'invalid_request', field: 'notesOf' });
    expect(atLimit.status, atLimit.text).toBe(200);
    expect(atLimit.body.notes).toEqual({});
    expect(badId.status).toBe(400);
    expect(badId.body).toMatchObject({ code: 'invalid_id', field: 'notesOf' });
    expect(empty.status).toBe(400);
    expect(withNode.status).toBe(400);
    expect(withNode.body).toMatchObject({ code: 'invalid_request', field: 'notesOf' });
  });

  it("shows another tenant's key nothing (404), and the nodes of another session none of theirs", async () => {
    // Prepare
    const sid = await sessionWithNotes('notes-of-tenant', 1);
    const sibling = await sessionWithNotes('notes-of-sibling', 0);
    await http.put(`/v1/sessions/${sid}/nodes/root/notes/secret`, 'mine');

    // Act
    const otherTenant = await other.get(`/v1/sessions/${sid}/versions?notesOf=n1,root`);
    const otherSession = await http.get(`/v1/sessions/${sibling}/versions?notesOf=n1,root`);

    // Assert
    expect(otherTenant.status).toBe(404);
    expect(otherTenant.text).not.toContain('n1');
    expect(otherTenant.text).not.toContain('mine');
    expect(otherSession.status, otherSession.text).toBe(200);
    expect(otherSession.body.notes).toEqual({});
  });

  it('gives a key limited to planner no more than the tree gives it', async () => {
    // Prepare
    const sid = await sessionWithNotes('notes-of-billing', 2, { agentId: 'billing' });

    // Act
    const page = await planner.get(`/v1/sessions/${sid}/versions?notesOf=n1,n2`, asPlanner);
    const tree = await planner.get(`/v1/sessions/${sid}/tree?notes=1`, asPlanner);

    // Assert
    expect(page.status, page.text).toBe(tree.status);
    expect(page.body.notes).toEqual(tree.body.notes);
  });
});
