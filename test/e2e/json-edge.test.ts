import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * JSON at the edge (API.md section 1), against `npm start` over real HTTP: numbers read back
 * digit for digit on every route that stores JSON, and bodies that cannot be taken as sent —
 * bytes that are not UTF-8, another charset, a key given twice — are refused with nothing
 * written. Path segments are decoded exactly once; `If-Match` follows RFC 9110.
 */

let api: RunningApi;

beforeAll(async () => {
  api = await startApi();
});
afterAll(async () => {
  await api?.stop();
});

/** The numbers of the issue, and others a double would change, inside one JSON text. */
const VERBATIM =
  '{"n":9007199254740993,"big":123456789012345678901234567890,"tiny":1e-400,"f":0.1000000000000000055,"one":1.0,"z":-0,"e":1E3}';
const MEMBERS = VERBATIM.slice(1, -1);

/** Sends raw bytes, as a client that does not go through a JSON library would. */
async function send(method: string, path: string, body: string | Uint8Array, headers: Record<string, string> = {}) {
  const response = await fetch(`${api.url}${path}`, {
    method,
    headers: { authorization: 'Bearer dev-key', ...(body === '' ? {} : { 'content-type': 'application/json' }), ...headers },
    ...(body === '' ? {} : { body }),
  });
  const text = await response.text();
  return {
    status: response.status,
    text,
    body: text ? (JSON.parse(text) as Record<string, unknown>) : undefined,
    headers: response.headers,
  };
}

const statePath = (sid: string) => `/v1/sessions/${sid}/state`;

describe('numbers are stored verbatim', () => {
  it('reads back the issue numbers digit for digit after a PUT, in the answer, the read and the version', async () => {
    // Prepare
    const sid = uniqueId('verbatim');

    // Act
    const write = await send('PUT', statePath(sid), VERBATIM);
    const read = await send('GET', statePath(sid), '');
    const version = await send('GET', `/v1/sessions/${sid}/versions/1`, '');

    // Assess
    expect(write.status).toBe(200);
    expect(write.text).toContain(`"state":${VERBATIM}`);
    expect(read.text).toContain(`"state":${VERBATIM}`);
    expect(version.text).toContain(`"state":${VERBATIM}`);
  });

  it('keeps verbatim numbers through a merge patch, and a PATCH of the same text changes nothing', async () => {
    // Prepare
    const sid = uniqueId('verbatim-patch');
    await send('PUT', statePath(sid), VERBATIM);

    // Act
    const patched = await send('PATCH', statePath(sid), '{"added":2.50}', { 'content-type': 'application/merge-patch+json' });
    const again = await send('PATCH', statePath(sid), '{"added":2.50}', { 'content-type': 'application/merge-patch+json' });
    const other = await send('PATCH', statePath(sid), '{"added":2.5}', { 'content-type': 'application/merge-patch+json' });

    // Assess
    expect(patched.text).toContain(`"state":{${MEMBERS},"added":2.50}`);
    expect(again.body).toMatchObject({ changed: false, version: 2 });
    // 2.5 reads back differently from 2.50, so it is a change (numbers compare as written).
    expect(other.body).toMatchObject({ changed: true, version: 3 });
    expect(other.text).toContain(`"state":{${MEMBERS},"added":2.5}`);
  });

  it('keeps verbatim numbers in messages, commits, session metadata and agent config', async () => {
    // Prepare
    const sid = uniqueId('verbatim-routes');
    const agentId = uniqueId('agent');

    // Act
    const session = await send('POST', '/v1/sessions', `{"sessionId":"${sid}","metadata":${VERBATIM}}`);
    const messages = await send('POST', `/v1/sessions/${sid}/messages`, `{"messages":[{"role":"user","content":${VERBATIM}}]}`);
    const commit = await send(
      'POST',
      `/v1/sessions/${sid}/commits`,
      `{"runId":"r1","commands":[{"key":"k","scope":"thread","merge":"disjoint","set":${VERBATIM}},{"key":"k","scope":"run","merge":"disjoint","set":${VERBATIM}}]}`,
    );
    const agent = await send('PUT', `/v1/agents/${agentId}`, `{"config":${VERBATIM}}`);
    const [readSession, path, run, readAgent] = await Promise.all([
      send('GET', `/v1/sessions/${sid}`, ''),
      send('GET', `/v1/sessions/${sid}/messages`, ''),
      send('GET', `/v1/sessions/${sid}/runs/r1/state`, ''),
      send('GET', `/v1/agents/${agentId}`, ''),
    ]);

    // Assess
    expect([session.status, messages.status, commit.status, agent.status]).toEqual([201, 201, 200, 201]);
    expect(readSession.text).toContain(`"metadata":${VERBATIM}`);
    expect(path.text).toContain(`"content":${VERBATIM}`);
    expect(commit.text).toContain(`"state":{"k":${VERBATIM}}`);
    // A document keeps each member of an object under a key apart (so that commits can write
    // members without reading one another's: docs/architecture.md, "Commits"), and gives them
    // back sorted by name: JSON objects are unordered; every number still reads digit for digit.
    const sortedMembers = MEMBERS.split(',').sort();
    expect(run.text).toContain(`"state":{"k":{${sortedMembers.join(',')}}}`);
    expect(readAgent.text).toContain(`"config":${VERBATIM}`);
  });

  it('refuses a non-integer where the API reads a number itself, naming the field', async () => {
    const response = await send('POST', `/v1/sessions/${uniqueId('expected')}/commits`, `{"expectedVersion":1.0,"commands":[]}`);

    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({ code: 'invalid_request' });
    expect(response.text).toContain('expectedVersion');
  });

  it.each([
    [
      'a commit',
      'POST',
      '/v1/sessions/s/commits',
      '{"expectedVersion":1.0,"commands":[{"key":"a","scope":"thread","merge":"disjoint","set":1}]}',
      'expectedVersion',
    ],
    ['a memory put', 'PUT', '/v1/memory/ns/k', '{"value":{},"ttlSeconds":1e3}', 'ttlSeconds'],
    ['a memory search', 'POST', '/v1/memory/search', '{"namespacePrefix":["ns"],"limit":50.0}', 'limit'],
    ['an agent', 'PUT', '/v1/agents/a', '{"worker":{"url":"module:examples/worker.ts","timeoutMs":9007199254740993}}', 'worker.timeoutMs'],
  ])('says how to write such a number, in words the caller sent (%s)', async (_name, method, path, body, field) => {
    // Before: "Invalid input: expected number, received JsonNumber", a type the caller never saw.
    const response = await send(method, path, body);

    expect(response.status).toBe(400);
    expect(response.body?.detail).toBe(
      `${field}: must be a number written plainly: an integer in its shortest form (7, not 7.0 or 7e0), within ±2^53`,
    );
    expect(response.text).not.toContain('JsonNumber');
  });
});

describe('bodies that cannot be taken as sent write nothing', () => {
  it.each([
    ['bytes that are not UTF-8', Uint8Array.from([...Buffer.from('{"a":"'), 0xff, 0xfe, ...Buffer.from('"}')]), {}, 400, 'invalid_json'],
    ['a truncated UTF-8 sequence', Uint8Array.from([...Buffer.from('{"a":"'), 0xe2, 0x82, ...Buffer.from('"}')]), {}, 400, 'invalid_json'],
    [
      'a merge patch that is not UTF-8',
      Uint8Array.from([...Buffer.from('{"a":"'), 0xc3, ...Buffer.from('"}')]),
      { 'content-type': 'application/merge-patch+json' },
      400,
      'invalid_json',
    ],
    ['charset=iso-8859-1', '{"a":"caf\u00e9"}', { 'content-type': 'application/json; charset=iso-8859-1' }, 415, 'unsupported_media_type'],
    ['charset="utf-16"', '{"a":1}', { 'content-type': 'application/json; charset="utf-16"' }, 415, 'unsupported_media_type'],
    ['text/plain', '{"a":1}', { 'content-type': 'text/plain' }, 415, 'unsupported_media_type'],
    ['a key twice', '{"a":1,"a":2}', {}, 400, 'invalid_json'],
    ['a key twice with the same value', '{"a":{"b":1,"b":1}}', {}, 400, 'invalid_json'],
  ] as const)('refuses %s', async (_label, body, headers, status, code) => {
    // Prepare
    const sid = uniqueId('refused');

    // Act
    const response = await send('PUT', statePath(sid), body, headers);
    const read = await send('GET', statePath(sid), '');

    // Assess
    expect(response.status).toBe(status);
    expect(response.body).toMatchObject({ code });
    expect(response.headers.get('content-type')).toBe('application/problem+json');
    expect(read.body).toMatchObject({ version: 0, state: null });
  });

  it.each([
    ['application/json; charset=utf-8', 'application/json; charset=utf-8'],
    ['application/json; charset="UTF-8"', 'application/json; charset="UTF-8"'],
    ['application/merge-patch+json', 'application/merge-patch+json'],
  ])('takes %s', async (_label, contentType) => {
    const response = await send('PUT', statePath(uniqueId('taken')), '{"café":"☕"}', { 'content-type': contentType });

    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ state: { café: '☕' } });
  });
});

describe('path segments are decoded exactly once', () => {
  it('reads x%2541 as the id x%41, which is invalid, and writes neither x%41 nor xA', async () => {
    // Act
    const response = await send('PUT', '/v1/sessions/x%2541/state', '{"a":1}');
    const decodedTwice = await send('GET', '/v1/sessions/xA', '');

    // Assess
    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({ code: 'invalid_id' });
    expect(decodedTwice.status).toBe(404);
  });

  it('reads an encoded valid id (%41 is A) as that id', async () => {
    const sid = uniqueId('enc');

    const write = await send('PUT', `/v1/sessions/${sid}%41/state`, '{"a":1}');
    const read = await send('GET', `/v1/sessions/${sid}A/state`, '');

    expect(write.status).toBe(200);
    expect(read.body).toMatchObject({ sessionId: `${sid}A`, version: 1 });
  });
});

describe('If-Match as RFC 9110 writes it', () => {
  it.each([
    ['"1"', 200],
    ['W/"1"', 200],
    ['*', 200],
    ['"7", "1"', 200],
    ['"2"', 412],
    ['"7", "8"', 412],
  ])('If-Match: %s on a node at version 1 → %i', async (header, status) => {
    // Prepare
    const sid = uniqueId('if-match');
    await send('PUT', statePath(sid), '{"v":1}');

    // Act
    const response = await send('PUT', statePath(sid), '{"v":2}', { 'if-match': header });

    // Assess
    expect(response.status).toBe(status);
    if (status === 412) expect(response.body).toMatchObject({ code: 'version_mismatch', currentVersion: 1 });
  });

  it('If-Match: * on a node with no recorded version → 412, nothing written', async () => {
    const sid = uniqueId('if-match-star');

    const response = await send('PUT', statePath(sid), '{"v":1}', { 'if-match': '*' });
    const read = await send('GET', statePath(sid), '');

    expect(response.status).toBe(412);
    expect(response.body).toMatchObject({ code: 'version_mismatch', currentVersion: 0 });
    expect(read.body).toMatchObject({ version: 0 });
  });

  it.each(['"9', '9', '7', 'W/7', 'w/"1"', '"01"', '"abc"', '*, "1"', ',', '""'])('If-Match: %s → 400, nothing written', async (header) => {
    // Prepare
    const sid = uniqueId('if-match-bad');
    await send('PUT', statePath(sid), '{"v":1}');

    // Act
    const response = await send('PUT', statePath(sid), '{"v":2}', { 'if-match': header });
    const read = await send('GET', statePath(sid), '');

    // Assess
    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({ code: 'invalid_request', field: 'If-Match' });
    expect(read.body).toMatchObject({ version: 1, state: { v: 1 } });
  });
});
