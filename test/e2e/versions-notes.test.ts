/**
 * A page of history with the notes of named nodes (`GET …/versions?notesOf=`, docs/api.md):
 * what LangGraph's `list` reads of the checkpoints it shows, in the request that reads their
 * states, instead of every node's notes with the tree. Real HTTP on DynamoDB Local, through the
 * IAM gate (the state function's role) and the OpenAPI document.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dynamoDbEndpointOf, issueKey } from '../helpers/admin.js';
import { type ApiClient, apiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

let api: RunningApi;
let http: ApiClient;
let other: ApiClient;
let planner: ApiClient;
const asPlanner = { headers: { 'x-agent-id': 'planner' } };

beforeAll(async () => {
  api = await startApi();
  const apiKey = await issueKey(dynamoDbEndpointOf(api), { agents: ['planner'] });
  http = apiClient(api.url);
  other = apiClient(api.url, 'other-key');
  planner = apiClient(api.url, apiKey);
  for (const agentId of ['planner', 'billing']) expect((await http.put(`/v1/agents/${agentId}`, { config: {} })).status).toBe(201);
});

afterAll(async () => {
  await api?.stop();
});

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
