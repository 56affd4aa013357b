import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tableKeys } from '../../functions/store/table/table.js';
import { dynamoDbEndpointOf, rawTableClient, scanTable } from '../helpers/admin.js';
import { type ApiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * `DELETE /v1/sessions/{sid}` of a session larger than the request may erase (API.md section 2:
 * erases every item; docs/architecture.md "Deleting a session"), through `npm start` with the
 * change hook and the IAM gate. The erase a `DELETE` makes in its own time is cut to nothing
 * (`AGENTSTATE_DELETE_ERASE_MS=0`), so that a session of a few hundred items stands for one of
 * tens of thousands in AWS (where the erase would run past the function's 20 s: a 500): the
 * `DELETE` answers 204 at once, the session reads as unknown and is in no list from then on,
 * and the change hook erases the rest under its own role; a write of the id waits for that and
 * starts the next life; 50 `DELETE`s and writes at once answer 204 (or 404 once the erase is
 * done and nothing wrote the id since), never 500, and leave nothing.
 */

let api: RunningApi;
let http: ApiClient;
let raw: DynamoDBDocumentClient;

beforeAll(async () => {
  api = await startApi({ AGENTSTATE_DELETE_ERASE_MS: '0' }, { everyCallThroughGate: true });
  http = api.client;
  raw = rawTableClient(dynamoDbEndpointOf(api));
});
afterAll(async () => {
  raw?.destroy();
  await api?.stop();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A session of about 360 items (`appends` of 50 messages: their node index, state versions, its item and list entries). */
async function largeSession(prefix: string, appends = 8): Promise<{ sid: string; user: string; firstNode: string }> {
  const sid = uniqueId(prefix);
  const user = uniqueId('u');
  expect((await http.post('/v1/sessions', { sessionId: sid, userId: user, metadata: { plan: sid } })).status).toBe(201);
  let firstNode = '';
  for (let append = 0; append < appends; append++) {
    const messages = Array.from({ length: 50 }, (_, index) => ({ role: 'user', content: `secret ${append}-${index}` }));
    const answer = await http.post(`/v1/sessions/${sid}/messages`, { messages, state: { append } });
    expect(answer.status).toBe(201);
    firstNode ||= answer.body.nodes[0].id;
  }
  return { sid, user, firstNode };
}

/** The session's partition, read raw. */
function partition(sid: string) {
  return scanTable(raw, `S#local#${sid}`);
}

/**
 * What a deleted session may keep: tombstones (kind x, removed by TTL a day later) and the
 * closed fences that say which life comes next; anything else is left of it.
 */
function leftOf(items: Array<Record<string, unknown>>): string[] {
  return items
    .filter(
      (item) => !(item.kind === 'x' && (item.fence === 'closed' || (item.fence === undefined && item[tableKeys.timeToLive] !== undefined))),
    )
    .map((item) => `${item.sk} ${item.kind ?? ''} ${item.fence ?? ''}`);
}

/** Waits until the change hook has erased what the session left (at most 30 s). */
async function erased(sid: string): Promise<string[]> {
  let left = leftOf(await partition(sid));
  for (let attempt = 0; left.length > 0 && attempt < 300; attempt++) {
    await sleep(100);
    left = leftOf(await partition(sid));
  }
  return left;
}

describe('DELETE of a session larger than the request may erase', () => {
  it('answers 204 at once, unreadable and in no list from then, and the change hook erases every item', async () => {
    // Prepare: the session, and the change hook's claims of the fence held back a moment, so
    // that the partition can be read between the 204 and the hook's erase.
    const { sid, user } = await largeSession('large');
    const before = await partition(sid);
    const held = api.slow((call) => call.fn === 'change-hook' && call.operation === 'UpdateItem' && call.body.includes(sid), 2_000);

    // Act
    const deleted = await http.delete(`/v1/sessions/${sid}`);
    const read = await http.get(`/v1/sessions/${sid}`);
    const state = await http.get(`/v1/sessions/${sid}/state`);
    const lists = await Promise.all([
      http.get(`/v1/sessions?prefix=${sid}`),
      http.get(`/v1/sessions?userId=${user}`),
      http.get(`/v1/sessions?metadata.plan=${sid}`),
    ]);
    const rightAfter = await partition(sid);
    held();
    const left = await erased(sid);

    // Assess: 204 with the erase still to do (the changes not tombstoned yet), everything
    // unknown and unlisted from then on, and nothing of it left once the hook ran.
    expect(before.length).toBeGreaterThan(300);
    expect(before.filter((item) => item.sk === 'S' || item.sk === 'SM')).toHaveLength(2);
    expect(deleted.status).toBe(204);
    expect(read.status).toBe(404);
    expect(state.body).toMatchObject({ state: null, version: 0 });
    for (const list of lists) expect(list.body.sessions).toEqual([]);
    expect(leftOf(rightAfter).length).toBeGreaterThan(300);
    expect(left).toEqual([]);
    // Due for the retention sweep while held (in case its eraser died), and no longer once closed.
    expect(rightAfter.filter((item) => item.dsk !== undefined).map((item) => item.fence)).toEqual(['closing']);
    expect((await partition(sid)).filter((item) => item.dsk !== undefined)).toEqual([]);
    expect((await http.get(`/v1/sessions/${sid}`)).status).toBe(404);
    expect((await http.delete(`/v1/sessions/${sid}`)).status).toBe(404);
  }, 60_000);

  it('lets a write of the id meanwhile wait for the erase and start version 1 of the next life, with nothing old readable', async () => {
    // Prepare
    const { sid, firstNode } = await largeSession('rewritten');

    // Act: the DELETE, and at once a write of the same id.
    const deleted = await http.delete(`/v1/sessions/${sid}`);
    const written = await http.patch(`/v1/sessions/${sid}/state`, { fresh: true });
    const versions = await http.get(`/v1/sessions/${sid}/versions`);
    const tree = await http.get(`/v1/sessions/${sid}/tree`);
    const oldNode = await http.get(`/v1/sessions/${sid}/nodes/${firstNode}`);
    const items = await partition(sid);

    // Assess: the write is version 1 of a fresh session; of the old one nothing is readable,
    // nor stored but tombstones and its closed fence.
    expect(deleted.status).toBe(204);
    expect(written).toMatchObject({ status: 200, body: { version: 1, prevVersion: 0, state: { fresh: true } } });
    expect(versions.body.versions.map((version: { version: number }) => version.version)).toEqual([1]);
    expect(tree.body.nodes.map((node: { id: string }) => node.id)).toEqual(['root']);
    expect(oldNode.status).toBe(404);
    const oldLife = items.filter((item) => String(item.sk).startsWith('V#000000#') || /^N#.*#000000/.test(String(item.sk)));
    expect(leftOf(oldLife)).toEqual([]);
    expect(JSON.stringify(items)).not.toContain('secret');
  }, 60_000);

  it('answers 50 DELETEs and writes at once with 204 (404 once erased and not written since), never 500, and leaves nothing', async () => {
    // Prepare
    const { sid } = await largeSession('crowd', 3);

    // Act: 50 DELETEs and 5 writes at once; then, once all answered, one more DELETE (a write may have started a life).
    const answers = await Promise.all([
      ...Array.from({ length: 50 }, () => http.delete(`/v1/sessions/${sid}`)),
      ...Array.from({ length: 5 }, (_, index) => http.patch(`/v1/sessions/${sid}/state`, { [`w${index}`]: true })),
    ]);
    const deletes = answers.slice(0, 50).map((answer) => answer.status);
    const writes = answers.slice(50).map((answer) => answer.status);
    const last = await http.delete(`/v1/sessions/${sid}`);
    const left = await erased(sid);

    // Assess
    expect(deletes.every((status) => status === 204 || status === 404)).toBe(true);
    expect(deletes).toContain(204);
    expect(writes.every((status) => status === 200)).toBe(true);
    expect([204, 404]).toContain(last.status);
    expect(left).toEqual([]);
    expect((await partition(sid)).filter((item) => item.dsk !== undefined)).toEqual([]);
    expect((await http.get(`/v1/sessions/${sid}`)).status).toBe(404);
  }, 90_000);
});
