import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, apiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * `GET /v1/sessions/{sid}/nodes`: the message nodes by id, from the last, a page at a time, each
 * page reading about what it carries (docs/api.md). Real HTTP on DynamoDB Local; the IAM gate
 * counts the items DynamoDB reads for the server.
 */
let api: RunningApi;
let http: ApiClient;

beforeAll(async () => {
  api = await startApi({}, { everyCallThroughGate: true });
  http = api.client;
});
afterAll(async () => {
  await api?.stop();
});

interface Node {
  id: string;
  parentId: string | null;
  depth: number;
  role: string | null;
  stateVersion: number;
  createdAt?: string;
}

const byIdFromLast = (a: Node, b: Node) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);

/** Every page of `GET …/nodes` from `query` on, in order. */
async function everyPage(sid: string, query: string): Promise<Array<{ head: string; version: number; nodes: Node[]; next?: string }>> {
  const pages = [];
  let read = await http.get(`/v1/sessions/${sid}/nodes?${query}`);
  for (;;) {
    expect(read.status).toBe(200);
    pages.push(read.body);
    if (!read.body.next) return pages;
    const limit = new URLSearchParams(query).get('limit');
    read = await http.get(`/v1/sessions/${sid}/nodes?${limit ? `limit=${limit}&` : ''}cursor=${read.body.next}`);
  }
}

/** The tree's nodes as a page would show them (by id, from the last, without `root`). */
async function treeNodes(sid: string): Promise<Node[]> {
  const tree = await http.get(`/v1/sessions/${sid}/tree`);
  expect(tree.status).toBe(200);
  return (tree.body.nodes as Node[]).filter((node) => node.id !== 'root').sort(byIdFromLast);
}

describe('GET /v1/sessions/{sid}/nodes', () => {
  it("pages through every node by id, from the last, each with the tree's parent, depth, role and state version", async () => {
    // Prepare: 130 nodes in three branches, ids not in the order they were made; states written at
    // the head, under a node off the head (its pointer moved) and by the last append (not indexed yet).
    const sid = uniqueId('node-pages');
    const ids = Array.from({ length: 130 }, (_, index) => `n${String((index * 37) % 130).padStart(3, '0')}`);
    await http.post(`/v1/sessions/${sid}/messages`, { messages: ids.slice(0, 50).map((id) => ({ id, role: 'user' })) });
    await http.put(`/v1/sessions/${sid}/state`, { step: 1 });
    await http.post(`/v1/sessions/${sid}/messages`, {
      parentId: ids[10],
      messages: ids.slice(50, 100).map((id) => ({ id, role: 'assistant' })),
    });
    await http.put(`/v1/sessions/${sid}/state?node=${ids[20]}`, { step: 2 });
    await http.post(`/v1/sessions/${sid}/messages`, {
      parentId: ids[60],
      messages: ids.slice(100).map((id) => ({ id, role: 'tool' })),
      replaceState: { step: 3 },
    });

    // Act
    const pages = await everyPage(sid, 'limit=40');
    const whole = await everyPage(sid, 'limit=500');

    // Assert
    const expected = await treeNodes(sid);
    expect(pages.map((page) => page.nodes.length)).toEqual([40, 40, 40, 10]);
    const listed = pages.flatMap((page) => page.nodes);
    expect(listed.map(({ createdAt, ...node }) => node)).toEqual(expected);
    for (const node of listed) expect(node.createdAt).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(whole).toHaveLength(1);
    expect(whole[0]?.nodes).toEqual(listed);
    expect(pages[0]).toMatchObject({ head: ids[129], version: 3 });
    expect(listed.find((node) => node.id === ids[20])?.stateVersion).toBe(2);
    expect(listed.find((node) => node.id === ids[129])?.stateVersion).toBe(3);
  });

  it('starts below an id (there or not) with before, and stops at the limit', async () => {
    // Prepare
    const sid = uniqueId('node-before');
    await http.post(`/v1/sessions/${sid}/messages`, {
      messages: ['a', 'b', 'c', 'd', 'e', 'f'].map((id) => ({ id, role: 'user' })),
    });

    // Act
    const belowD = await http.get(`/v1/sessions/${sid}/nodes?before=d`);
    const belowCc = await http.get(`/v1/sessions/${sid}/nodes?before=cc&limit=2`);
    const belowA = await http.get(`/v1/sessions/${sid}/nodes?before=a`);
    const rest = await http.get(`/v1/sessions/${sid}/nodes?limit=2&cursor=${belowCc.body.next}`);

    // Assert
    expect(belowD.body.nodes.map((node: Node) => node.id)).toEqual(['c', 'b', 'a']);
    expect(belowD.body.next).toBeUndefined();
    expect(belowCc.body.nodes.map((node: Node) => node.id)).toEqual(['c', 'b']);
    expect(rest.body.nodes.map((node: Node) => node.id)).toEqual(['a']);
    expect(rest.body.next).toBeUndefined();
    expect(belowA.body).toEqual({ head: 'f', version: 0, nodes: [] });
  });

  it('reads what a page carries: 10 nodes of a session of 1,000 read about 10 nodes’ items, not 1,000', async () => {
    // Prepare: 1,000 nodes, 50 to an append. A read that grew with the session would read some
    // 1,000 items, 16 times the bound below (5,000 nodes took 13 s to append for the same finding).
    const sid = uniqueId('node-long');
    for (let chain = 0; chain < 20; chain++) {
      const messages = Array.from({ length: 50 }, (_, index) => ({ id: `m${String(chain * 50 + index).padStart(5, '0')}`, role: 'user' }));
      expect((await http.post(`/v1/sessions/${sid}/messages`, { messages })).status).toBe(201);
    }
    const tree = api.itemsRead();
    await http.get(`/v1/sessions/${sid}/tree`);
    const treeItems = api.itemsRead() - tree;

    // Act
    const before = api.itemsRead();
    const page = await http.get(`/v1/sessions/${sid}/nodes?limit=10`);
    const pageItems = api.itemsRead() - before;
    const fartherBack = api.itemsRead();
    const far = await http.get(`/v1/sessions/${sid}/nodes?limit=10&before=m00100`);
    const farItems = api.itemsRead() - fartherBack;

    // Assert
    expect(page.body.nodes.map((node: Node) => node.id)).toEqual(Array.from({ length: 10 }, (_, index) => `m00${999 - index}`));
    expect(far.body.nodes.map((node: Node) => node.id)).toEqual(
      Array.from({ length: 10 }, (_, index) => `m${String(99 - index).padStart(5, '0')}`),
    );
    // The tree reads every node's index (the last append's 50 are in the tip); a page the tip and its nodes' keys (and one more node's).
    expect(treeItems).toBeGreaterThan(900);
    expect(pageItems).toBeLessThan(60);
    expect(farItems).toBeLessThan(60);
  });

  it('refuses before with a cursor, a bad id, a tampered cursor and another session’s, and one read before a delete', async () => {
    // Prepare
    const sid = uniqueId('node-refusals');
    const other = uniqueId('node-refusals-other');
    for (const session of [sid, other]) {
      await http.post(`/v1/sessions/${session}/messages`, { messages: ['a', 'b', 'c'].map((id) => ({ id, role: 'user' })) });
    }
    const first = await http.get(`/v1/sessions/${sid}/nodes?limit=1`);
    const cursor = first.body.next as string;

    // Act
    const both = await http.get(`/v1/sessions/${sid}/nodes?before=b&cursor=${cursor}`);
    const badId = await http.get(`/v1/sessions/${sid}/nodes?before=${encodeURIComponent('a b')}`);
    const badLimit = await http.get(`/v1/sessions/${sid}/nodes?limit=501`);
    const tampered = await http.get(`/v1/sessions/${sid}/nodes?cursor=${cursor.slice(0, -2)}${cursor.endsWith('xx') ? 'yy' : 'xx'}`);
    const elsewhere = await http.get(`/v1/sessions/${other}/nodes?cursor=${cursor}`);
    await http.delete(`/v1/sessions/${sid}`);
    await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'a', role: 'user' }] });
    const afterDelete = await http.get(`/v1/sessions/${sid}/nodes?cursor=${cursor}`);

    // Assert
    expect([both.status, both.body.code]).toEqual([400, 'invalid_request']);
    expect([badId.status, badId.body.code]).toEqual([400, 'invalid_id']);
    expect([badLimit.status, badLimit.body.code]).toEqual([400, 'invalid_request']);
    expect([tampered.status, tampered.body.code]).toEqual([400, 'invalid_request']);
    expect([elsewhere.status, elsewhere.body.code]).toEqual([400, 'invalid_request']);
    expect([afterDelete.status, afterDelete.body.code]).toEqual([400, 'invalid_request']);
  });

  it("answers 404 for a session never written, a deleted one, and another tenant's", async () => {
    // Prepare
    const sid = uniqueId('node-tenant');
    const gone = uniqueId('node-gone');
    for (const session of [sid, gone]) await http.post(`/v1/sessions/${session}/messages`, { messages: [{ id: 'a', role: 'user' }] });
    await http.delete(`/v1/sessions/${gone}`);
    const otherTenant = apiClient(api.url, 'other-key');

    // Act
    const theirs = await otherTenant.get(`/v1/sessions/${sid}/nodes`);
    const never = await http.get(`/v1/sessions/${uniqueId('node-never')}/nodes`);
    const deleted = await http.get(`/v1/sessions/${gone}/nodes`);
    const created = uniqueId('node-created');
    await http.post('/v1/sessions', { sessionId: created });
    const empty = await http.get(`/v1/sessions/${created}/nodes`);

    // Assert
    for (const answer of [theirs, never, deleted]) expect([answer.status, answer.body.code]).toEqual([404, 'session_not_found']);
    expect(empty.body).toEqual({ head: 'root', version: 0, nodes: [] });
  });
});
