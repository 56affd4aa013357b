import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../packages/client/src/index.js';
import { type ApiClient, type ApiResponse, apiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * Reads whose data is unbounded, answered within Lambda's 6 MB payload (docs/api.md, "answer
 * limit", "notes in parts"): pages of versions end by bytes, and notes past one answer's bytes
 * come in parts (`notesNext`, `GET …/notes`). Real HTTP on DynamoDB Local; the local server holds
 * answers to Lambda's bound (a read past it is `413`, as in AWS).
 */
let api: RunningApi;
let http: ApiClient;

const MiB = 1024 * 1024;
/** What an answer's body may be in base64 beside its 16 KiB of status and headers (edge/lambda-payload.ts). */
const ANSWER_BODY_BYTES = ((6 * MiB - 16 * 1024) / 4) * 3;

/**
 * The 11,000-node chain of "a tree of more nodes than one answer holds", built while the tests
 * before it run on sessions of their own: 220 appends one after another, each waiting on its
 * own round trips (about 24 s alone), which the server can serve beside the other tests' reads.
 */
let bigTree: Promise<string> | undefined;

beforeAll(async () => {
  api = await startApi();
  http = api.client;
  bigTree = buildBigTree();
  // Awaited by that describe's beforeAll, which fails with what failed here.
  bigTree.catch(() => {});
}, 60_000);
afterAll(async () => {
  // Not stopped under the build (when that describe did not run: vitest -t).
  await bigTree?.catch(() => {});
  await api?.stop();
}, 300_000);

/** A state of about `bytes` of JSON text whose strings hold JSON text (each `"` escapes again in Lambda's answer). */
function largeState(bytes: number, tag: string): { log: string[]; tag: string } {
  const line = JSON.stringify({ role: 'tool', content: `${tag} ${'the quick brown fox '.repeat(40)}` });
  return { log: Array.from({ length: Math.ceil(bytes / (line.length + 8)) }, (_, n) => `${n} ${line}`), tag };
}

/** A note of about `bytes` (60 KB unless told), different for each key. */
const noteOf = (key: string, bytes = 60_000) => ({ task: key, value: `${key} ${'x'.repeat(bytes)}` });

/** A session with the chain root → a1 (head), and `count` notes of ~`bytes` on a1, put all at once. */
async function sessionWithNotes(prefix: string, count: number, bytes?: number): Promise<{ sid: string; keys: string[] }> {
  const sid = uniqueId(prefix);
  expect((await http.post('/v1/sessions', { sessionId: sid })).status).toBe(201);
  expect(
    (await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ id: 'a1', role: 'checkpoint' }], replaceState: { n: 1 } })).status,
  ).toBe(201);
  const keys = Array.from({ length: count }, (_, n) => `task-${String(n).padStart(3, '0')}`);
  const puts = await Promise.all(keys.map((key) => http.put(`/v1/sessions/${sid}/nodes/a1/notes/${key}`, noteOf(key, bytes))));
  expect(puts.map((put) => put.status)).toEqual(keys.map(() => 200));
  return { sid, keys };
}

/**
 * The session of 100 notes of ~60 KB on a1 (about 6 MB) that "100 notes … all read back" reads
 * and "holds every note of the source" copies: neither writes it, so it is put once for both
 * (and by whichever runs alone).
 */
let hundredNotes: Promise<{ sid: string; keys: string[] }> | undefined;
const sessionWithHundredNotes = () => {
  hundredNotes ??= sessionWithNotes('notes-parts', 100);
  return hundredNotes;
};

/** Follows `GET …/notes` from `cursor` (with `query`, the same nodes) to the end; every part within the bound, at least one note. */
async function restOfNotes(sid: string, query: string, cursor: string, into: Record<string, Record<string, unknown>>): Promise<number> {
  let parts = 0;
  for (let next: string | undefined = cursor; next !== undefined; parts++) {
    const part: ApiResponse = await http.get(`/v1/sessions/${sid}/notes?${query}${query ? '&' : ''}cursor=${next}`);
    expect(part.status).toBe(200);
    expect(Buffer.byteLength(part.text)).toBeLessThanOrEqual(ANSWER_BODY_BYTES);
    const count = Object.values(part.body.notes as Record<string, object>).reduce((sum, notes) => sum + Object.keys(notes).length, 0);
    expect(count).toBeGreaterThan(0);
    for (const [node, notes] of Object.entries(part.body.notes as Record<string, Record<string, unknown>>)) {
      for (const [key, value] of Object.entries(notes)) {
        expect(into[node]?.[key]).toBeUndefined();
        into[node] = { ...into[node], [key]: value };
      }
    }
    next = part.body.next;
  }
  return parts;
}

describe('pages of versions end by bytes', () => {
  it('lists every version of 3 MiB states by following next, of the session and of a node’s lineage, each page within the bound, at least one version a page', async () => {
    const sid = uniqueId('big-versions');
    expect((await http.post('/v1/sessions', { sessionId: sid })).status).toBe(201);
    for (let n = 1; n <= 5; n++) expect((await http.put(`/v1/sessions/${sid}/state`, largeState(3 * MiB, `v${n}`))).status).toBe(200);
    expect((await http.patch(`/v1/sessions/${sid}/state`, { small: true }, { contentType: 'application/merge-patch+json' })).status).toBe(
      200,
    );

    const listed: number[] = [];
    const sizes: number[] = [];
    let cursor: string | undefined;
    do {
      const page = await http.get(`/v1/sessions/${sid}/versions?limit=500${cursor ? `&cursor=${cursor}` : ''}`);
      expect(page.status).toBe(200);
      expect(page.body.versions.length).toBeGreaterThan(0);
      sizes.push(Buffer.byteLength(page.text));
      for (const version of page.body.versions) {
        listed.push(version.version);
        expect(version.state.tag ?? 'v5').toBe(version.version === 6 ? 'v5' : `v${version.version}`);
      }
      cursor = page.body.next;
    } while (cursor);
    expect(listed).toEqual([6, 5, 4, 3, 2, 1]);
    // Version 6 (a small patch of v5's 3 MiB) shares a page with none: each page holds one large state.
    expect(sizes.length).toBeGreaterThanOrEqual(5);
    for (const size of sizes) expect(size).toBeLessThanOrEqual(ANSWER_BODY_BYTES);

    // A node's lineage (`?node=`) pages the same way.
    const lineage: number[] = [];
    let pages = 0;
    cursor = undefined;
    do {
      const page: ApiResponse = await http.get(`/v1/sessions/${sid}/versions?node=root&limit=500${cursor ? `&cursor=${cursor}` : ''}`);
      expect(page.status).toBe(200);
      expect(page.body.versions.length).toBeGreaterThan(0);
      expect(Buffer.byteLength(page.text)).toBeLessThanOrEqual(ANSWER_BODY_BYTES);
      lineage.push(...page.body.versions.map((version: { version: number }) => version.version));
      cursor = page.body.next;
      pages++;
    } while (cursor);
    expect(lineage).toEqual([6, 5, 4, 3, 2, 1]);
    expect(pages).toBeGreaterThanOrEqual(5);
  }, 240_000);

  it('a page of small versions is as before: up to limit', async () => {
    const sid = uniqueId('small-versions');
    expect((await http.post('/v1/sessions', { sessionId: sid })).status).toBe(201);
    for (let n = 1; n <= 12; n++) expect((await http.put(`/v1/sessions/${sid}/state`, { n })).status).toBe(200);
    const page = await http.get(`/v1/sessions/${sid}/versions?limit=10`);
    expect(page.body.versions.map((version: { version: number }) => version.version)).toEqual([12, 11, 10, 9, 8, 7, 6, 5, 4, 3]);
    expect(page.body.next).toBeDefined();
  });
});

describe('notes in parts', () => {
  // About 6 MB of notes: past one answer (about 4.5 MB of body), so each read comes in parts. (10 MB
  // of notes of ~100 KB each made this test two to three times as long, and showed nothing more.)
  it('100 notes of ~60 KB put at once on one node all read back: with the state, the tree and a page of history, then GET …/notes', async () => {
    const { sid, keys } = await sessionWithHundredNotes();
    const expected = Object.fromEntries(keys.map((key) => [key, noteOf(key)]));

    const state = await http.get(`/v1/sessions/${sid}/state?node=a1&notes=1`);
    expect(state.status).toBe(200);
    expect(state.body.state).toEqual({ n: 1 });
    expect(Buffer.byteLength(state.text)).toBeLessThanOrEqual(ANSWER_BODY_BYTES);
    expect(state.body.notesNext).toEqual(expect.any(String));
    const first = Object.keys(state.body.notes).length;
    expect(first).toBeGreaterThan(10);
    expect(first).toBeLessThan(100);
    const fromState: Record<string, Record<string, unknown>> = { a1: state.body.notes };
    expect(await restOfNotes(sid, 'nodes=a1', state.body.notesNext, fromState)).toBeGreaterThan(0);
    expect(fromState).toEqual({ a1: expected });

    const tree = await http.get(`/v1/sessions/${sid}/tree?notes=1`);
    expect(tree.status).toBe(200);
    const fromTree = tree.body.notes as Record<string, Record<string, unknown>>;
    await restOfNotes(sid, '', tree.body.notesNext, fromTree);
    expect(fromTree).toEqual({ a1: expected });

    const history = await http.get(`/v1/sessions/${sid}/versions?notesOf=a1,root`);
    expect(history.status).toBe(200);
    expect(history.body.versions).toHaveLength(1);
    const fromHistory = history.body.notes as Record<string, Record<string, unknown>>;
    await restOfNotes(sid, 'nodes=a1,root', history.body.notesNext, fromHistory);
    expect(fromHistory).toEqual({ a1: expected });

    // The head's notes go on with the head's node, named.
    const head = await http.get(`/v1/sessions/${sid}/state?notes=1`);
    const fromHead: Record<string, Record<string, unknown>> = { a1: head.body.notes };
    await restOfNotes(sid, 'nodes=a1', head.body.notesNext, fromHead);
    expect(fromHead).toEqual({ a1: expected });

    // The client reads the rest itself: what it returns holds every note.
    const client = createClient({ baseUrl: api.url, apiKey: 'dev-key' });
    const view = await client.state.get(sid, { node: 'a1', notes: true });
    expect(view.notes).toEqual(expected);
    expect(view.notesNext).toBeUndefined();
    expect((await client.tree.get(sid, { notes: true })).notes).toEqual({ a1: expected });
    expect((await client.versions.list(sid, { notesOf: ['a1'] })).notes).toEqual({ a1: expected });
  }, 240_000);

  it('GET …/notes reads a node, some nodes or all from the start; small notes need no second part', async () => {
    const { sid, keys } = await sessionWithNotes('notes-route', 3);
    const expected = Object.fromEntries(keys.map((key) => [key, noteOf(key)]));
    for (const query of ['', '?nodes=a1', '?nodes=root,a1,nope']) {
      const page = await http.get(`/v1/sessions/${sid}/notes${query}`);
      expect(page.status).toBe(200);
      expect(page.body).toEqual({ notes: { a1: expected } });
    }
    const state = await http.get(`/v1/sessions/${sid}/state?node=a1&notes=1`);
    expect(state.body.notes).toEqual(expected);
    expect(state.body.notesNext).toBeUndefined();
    expect((await http.get(`/v1/sessions/${uniqueId('none')}/notes`)).status).toBe(404);
  });

  it("a cursor goes on only with its own nodes and session, and not past the session's delete", async () => {
    const { sid } = await sessionWithNotes('notes-cursor', 60, 100_000);
    const tree = await http.get(`/v1/sessions/${sid}/tree?notes=1`);
    const cursor = tree.body.notesNext as string;
    expect(cursor).toEqual(expect.any(String));
    for (const bad of [
      `nodes=a1&cursor=${cursor}`,
      `cursor=${cursor.slice(0, -2)}${cursor.endsWith('xx') ? 'yy' : 'xx'}`,
      `cursor=${cursor}&nodes=${'n,'.repeat(200)}n`,
    ]) {
      const answer = await http.get(`/v1/sessions/${sid}/notes?${bad}`);
      expect(answer.status).toBe(400);
      expect(answer.body.code).toBe('invalid_request');
    }
    const { sid: other } = await sessionWithNotes('notes-cursor-other', 1);
    expect((await http.get(`/v1/sessions/${other}/notes?cursor=${cursor}`)).status).toBe(400);
    // Another tenant's key: the session is unknown there, and the cursor (sealed for this tenant) is no cursor of its.
    const stranger = apiClient(api.url, 'other-key');
    expect((await stranger.get(`/v1/sessions/${sid}/notes`)).status).toBe(404);
    expect((await stranger.get(`/v1/sessions/${sid}/notes?nodes=a1`)).body.code).toBe('session_not_found');
    expect((await stranger.get(`/v1/sessions/${sid}/notes?cursor=${cursor}`)).status).toBe(400);
    expect((await http.delete(`/v1/sessions/${sid}`)).status).toBe(204);
    expect((await http.post('/v1/sessions', { sessionId: sid })).status).toBe(201);
    const after = await http.get(`/v1/sessions/${sid}/notes?cursor=${cursor}`);
    expect(after.status).toBe(400);
    expect(after.body.code).toBe('invalid_request');
  }, 120_000);
});

describe('a copy of a session whose notes pass one answer', () => {
  it('holds every note of the source, read on from notesNext', async () => {
    // Prepare: 100 notes of ~60 KB on a1 (about 6 MB: one tree read carries a part of them).
    const { sid, keys } = await sessionWithHundredNotes();

    // Act
    const copied = await http.post(`/v1/sessions/${sid}/copy`, { tree: true });

    // Assess: the copy's notes, read whole with the client, are the source's.
    expect(copied.status, copied.text).toBe(201);
    const client = createClient({ baseUrl: api.url, apiKey: 'dev-key' });
    const notes = (await client.state.get(copied.body.sessionId, { node: 'a1', notes: true })).notes ?? {};
    expect(Object.keys(notes).sort()).toEqual(keys);
    for (const key of keys) expect(notes[key]).toEqual(noteOf(key));
  }, 120_000);
});

/**
 * What one copy may write (docs/api.md, "What one copy may write"): past its bytes of messages,
 * `413` once they are read, nothing written. Its counts of nodes and appends are told from the
 * tree alone and refused the same way (test/unit/copy-limits.test.ts: a tree of 12,001 nodes here
 * would also make the delete below, of this file's 11,000-node tree, longer).
 */
describe('a copy of more message bytes than one copy writes', () => {
  it('answers 413 with limitBytes after reading, and writes nothing', async () => {
    // Prepare: 9 appends of 4 messages of 250,000 bytes: about 9 MB of messages (the limit is 8 MiB).
    const sid = uniqueId('copy-bytes');
    for (let turn = 0; turn < 9; turn++) {
      const messages = Array.from({ length: 4 }, (_, n) => ({
        role: 'tool',
        content: `${turn}.${n} ${'the quick brown fox '.repeat(12_500)}`,
      }));
      const appended = await http.post(`/v1/sessions/${sid}/messages`, { messages });
      expect(appended.status, appended.text).toBe(201);
    }
    const target = uniqueId('copy-bytes-target');

    // Act
    const refused = await http.post(`/v1/sessions/${sid}/copy`, { sessionId: target });

    // Assess
    expect(refused.status, refused.text).toBe(413);
    expect(refused.body).toMatchObject({ code: 'payload_too_large', limitBytes: 8 * MiB });
    expect(refused.body.sizeBytes).toBeGreaterThan(8 * MiB);
    // Refused before anything was written: the id is unknown, in no list, and free.
    expect((await http.get(`/v1/sessions/${target}`)).status).toBe(404);
    const listed = await http.get('/v1/sessions?limit=500');
    expect(listed.body.sessions.map((session: { sessionId: string }) => session.sessionId)).not.toContain(target);
    expect((await http.post('/v1/sessions', { sessionId: target })).status).toBe(201);
  }, 60_000);
});

/** An id of 128 characters (the longest an id may be): a node's entry in the tree is about 450 bytes with its preview. */
const longId = (n: number) => `n${String(n).padStart(6, '0')}-${'x'.repeat(120)}`;
const NODES = 11_000;

/** A session whose tree is one chain of `NODES` nodes with long ids, in appends of 50; its id. */
async function buildBigTree(): Promise<string> {
  const sid = uniqueId('big-tree');
  for (let start = 0; start < NODES; start += 50) {
    const messages = Array.from({ length: 50 }, (_, index) => ({
      id: longId(start + index),
      role: 'user',
      content: `message ${start + index} ${'of a long conversation, '.repeat(6)}`,
    }));
    const appended = await http.post(`/v1/sessions/${sid}/messages`, { messages });
    expect(appended.status, appended.text).toBe(201);
  }
  return sid;
}

describe('a tree of more nodes than one answer holds', () => {
  let sid: string;

  beforeAll(async () => {
    sid = await (bigTree as Promise<string>);
  }, 300_000);

  it('comes in parts, each within the bound, every node once and in order, by following next', async () => {
    // Act
    const parts: ApiResponse[] = [];
    for (let cursor: string | undefined; ; ) {
      const part: ApiResponse = await http.get(`/v1/sessions/${sid}/tree?preview=1${cursor ? `&cursor=${cursor}` : ''}`);
      expect(part.status, part.text.slice(0, 200)).toBe(200);
      parts.push(part);
      cursor = part.body.next;
      if (cursor === undefined) break;
    }

    // Assess: more than one part, each within the bound; root then every node, by depth.
    expect(parts.length).toBeGreaterThan(1);
    for (const part of parts) expect(Buffer.byteLength(part.text)).toBeLessThanOrEqual(ANSWER_BODY_BYTES);
    const nodes = parts.flatMap((part) => part.body.nodes as Array<{ id: string; depth: number; preview: string }>);
    expect(nodes.map((node) => node.id)).toEqual(['root', ...Array.from({ length: NODES }, (_, n) => longId(n))]);
    expect(nodes.map((node) => node.depth)).toEqual(Array.from({ length: NODES + 1 }, (_, depth) => depth));
    expect(nodes[NODES]?.preview).toMatch(new RegExp(`^message ${NODES - 1} of a long conversation`));
    expect(parts.every((part) => part.body.head === longId(NODES - 1))).toBe(true);
  }, 120_000);

  it('is read whole by the client; a copy of it all is refused before writing, and one of its first 6,000 nodes is whole', async () => {
    const client = createClient({ baseUrl: api.url, apiKey: 'dev-key' });
    const tree = await client.tree.get(sid, { preview: true, notes: true });
    expect(tree.nodes).toHaveLength(NODES + 1);
    expect(tree).not.toHaveProperty('next');
    expect(tree.notes).toEqual({});

    // One copy writes at most 6,000 nodes (api.md, "What one copy may write"): the whole chain
    // took 20 s alone and ran past the local 29 s in a full test run, a 500.
    const target = uniqueId('big-tree-copy');
    const refused = await http.post(`/v1/sessions/${sid}/copy`, { sessionId: target, tree: true });
    expect(refused.status, refused.text).toBe(413);
    expect(refused.body).toMatchObject({ code: 'payload_too_large', limit: 'nodes', limitCount: 6000, count: NODES });
    expect((await http.get(`/v1/sessions/${target}`)).status).toBe(404);

    const copied = await http.post(`/v1/sessions/${sid}/copy`, { sessionId: target, node: longId(5999) });
    expect(copied.status, copied.text).toBe(201);
    const copy = await client.tree.get(target);
    expect(copy.nodes.map((node) => node.id)).toEqual(tree.nodes.slice(0, 6001).map((node) => node.id));
    expect(copy.head).toBe(longId(5999));
  }, 240_000);

  it("refuses notes with a cursor, and a cursor of another session's tree or of a life before a delete", async () => {
    const first = await http.get(`/v1/sessions/${sid}/tree?preview=1`);
    const cursor = first.body.next as string;
    expect(cursor).toEqual(expect.any(String));
    const withNotes = await http.get(`/v1/sessions/${sid}/tree?notes=1&cursor=${cursor}`);
    expect(withNotes.status).toBe(400);
    expect(withNotes.body).toMatchObject({ code: 'invalid_request', field: 'notes' });

    const other = uniqueId('other-tree');
    expect((await http.post(`/v1/sessions/${other}/messages`, { messages: [{ role: 'user', content: 'hi' }] })).status).toBe(201);
    const elsewhere = await http.get(`/v1/sessions/${other}/tree?cursor=${cursor}`);
    expect(elsewhere.status).toBe(400);
    expect(elsewhere.body).toMatchObject({ code: 'invalid_request', field: 'cursor' });
    expect((await http.get(`/v1/sessions/${sid}/tree?cursor=${cursor.slice(0, -2)}${cursor.endsWith('xx') ? 'yy' : 'xx'}`)).status).toBe(
      400,
    );

    // A delete, and the session written again under the same id: the old cursor is not its.
    expect((await http.delete(`/v1/sessions/${sid}`)).status).toBe(204);
    expect((await http.post(`/v1/sessions/${sid}/messages`, { messages: [{ role: 'user', content: 'again' }] })).status).toBe(201);
    const afterDelete = await http.get(`/v1/sessions/${sid}/tree?cursor=${cursor}`);
    expect(afterDelete.status).toBe(400);
    expect(afterDelete.body).toMatchObject({ code: 'invalid_request', field: 'cursor' });
  }, 60_000);
});
