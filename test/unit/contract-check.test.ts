import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { stateChangedExample } from '../../functions/http/contract/examples.js';
import { apiClient } from '../helpers/api-client.js';
import { contractViolations, type Exchange, eventViolations } from '../helpers/contract.js';

/**
 * The check the e2e tests run on every exchange with the real server (test/helpers/contract.ts),
 * tried on exchanges made up to break the document each way: if it stopped catching one, the
 * whole e2e suite would pass over an undocumented route or a drifted answer.
 */
const session = {
  sessionId: 's1',
  agentId: null,
  userId: null,
  metadata: null,
  createdAt: '2025-06-01T10:00:00.000Z',
  updatedAt: '2025-06-01T10:00:00.000Z',
  head: 'root',
  version: 0,
  ttlSeconds: null,
  expiresAt: null,
  retention: null,
};
const problem = (status: number, code: string) => JSON.stringify({ type: 'about:blank', title: code, status, code, detail: code });

const exchange = (overrides: Partial<Exchange>): Exchange => ({
  method: 'GET',
  url: '/v1/sessions/s1',
  requestContentType: undefined,
  requestBody: '',
  status: 200,
  responseContentType: 'application/json',
  responseBody: JSON.stringify(session),
  ...overrides,
});

describe('the contract check', () => {
  it('passes an answer that fits', () => {
    expect(contractViolations(exchange({}))).toEqual([]);
    expect(
      contractViolations(
        exchange({ status: 404, responseContentType: 'application/problem+json', responseBody: problem(404, 'session_not_found') }),
      ),
    ).toEqual([]);
  });

  it('lets an unknown route say not_found, and fails one that answers', () => {
    const unknown = { method: 'GET', url: '/v1/nothing/here' };
    expect(
      contractViolations(
        exchange({ ...unknown, status: 404, responseContentType: 'application/problem+json', responseBody: problem(404, 'not_found') }),
      ),
    ).toEqual([]);
    expect(contractViolations(exchange({ ...unknown, responseBody: '{"items":[]}' }))).toEqual([
      expect.stringMatching(
        /GET \/v1\/nothing\/here → 200: the route is not in docs\/openapi.json — describe it in functions\/http\/contract\/operations.ts/,
      ),
    ]);
  });

  it.each([
    ['a status the route does not list', { status: 418 }, /status 418 is not documented/],
    [
      'a member the schema does not have',
      { responseBody: JSON.stringify({ ...session, extra: 1 }) },
      /must NOT have additional properties/,
    ],
    ['a member of the wrong type', { responseBody: JSON.stringify({ ...session, version: '0' }) }, /\/version must be integer/],
    ['a member missing', { responseBody: JSON.stringify({ ...session, head: undefined }) }, /must have required property 'head'/],
    [
      'a problem code the route does not name',
      { status: 404, responseContentType: 'application/problem+json', responseBody: problem(404, 'node_not_found') },
      /\/code must be equal to one of the allowed values/,
    ],
    ['a content type the route does not answer', { responseContentType: 'text/plain' }, /answered text\/plain/],
    ['a body that is not JSON', { responseBody: 'ok' }, /the answer is not JSON/],
  ])('fails %s', (_name, overrides, message) => {
    expect(contractViolations(exchange(overrides))).toEqual([expect.stringMatching(message)]);
  });

  it('fails a request body the server accepted although the document calls it invalid', () => {
    // Prepare: an append with a message that has no role, answered 201 as if it were fine.
    const accepted = exchange({
      method: 'POST',
      url: '/v1/sessions/s1/messages',
      requestContentType: 'application/json',
      requestBody: JSON.stringify({ messages: [{ content: 'no role' }] }),
      status: 201,
      responseBody: JSON.stringify({ nodes: [], head: 'root' }),
    });

    // Assess
    expect(contractViolations(accepted)).toEqual([expect.stringMatching(/accepted a request body the document calls invalid/)]);
    expect(
      contractViolations({
        ...accepted,
        status: 400,
        responseContentType: 'application/problem+json',
        responseBody: problem(400, 'invalid_request'),
      }),
    ).toEqual([]);
  });
});

describe('the event check', () => {
  // What a webhook or a WebSocket delivers; the event fixtures (test/helpers/events.ts) hold each to the document.
  // The document's own example (a whole event), as a large state's event would come: truncated, with its jsonPatch.
  const { next: _next, prev: _prev, ...lean } = stateChangedExample;
  const stateChanged = { ...lean, truncated: true, jsonPatch: [{ op: 'replace', path: '/turns', value: 1 }] };

  it('passes the events the document describes', () => {
    expect(eventViolations(stateChangedExample, 'webhook')).toEqual([]);
    expect(eventViolations(stateChanged, 'webhook')).toEqual([]);
    const shared = {
      ...stateChanged,
      id: 'shared:3',
      type: 'shared.changed',
      scope: 'shared',
      cause: 'commit',
      version: 3,
      prevVersion: 2,
    };
    const { node: _node, decisionId: _decision, jsonPatch: _jsonPatch, ...document } = shared;
    expect(eventViolations(document, 'WebSocket')).toEqual([]);
  });

  it.each([
    [
      'a member the schema does not have',
      { ...stateChanged, extra: 1 },
      /webhook event "s1:2" \(state.changed\): does not fit StateChangedEvent: .*additional properties/,
    ],
    ['a malformed JSON Patch operation', { ...stateChanged, jsonPatch: [{ op: 'nudge', path: '/turns' }] }, /\/jsonPatch\/0/],
    ['a member missing', { ...stateChanged, version: undefined }, /must have required property 'version'/],
    [
      'an event type the document has no schema for',
      { ...stateChanged, type: 'session.changed' },
      /the document has no schema for this event type/,
    ],
  ])('fails %s', (_name, event, message) => {
    expect(eventViolations(event, 'webhook')).toEqual([expect.stringMatching(message)]);
  });
});

describe("the e2e tests' client, checking its own exchanges", () => {
  // Since session 20 the e2e files' client talks to the server directly and runs this check on
  // each exchange itself (e2e.ts `startApi`), where the proxy did before: a server answering
  // off the document must make it throw, as the proxy's header did.
  it('throws on an answer that breaks the document, and passes one that fits', async () => {
    // Prepare: a server that answers GET /v1/sessions/s1 with a session, or with one missing a member.
    const server = createServer((req, res) => {
      const { head: _, ...broken } = session;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(req.url?.endsWith('/s1') ? session : { ...broken, sessionId: 's2' }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const client = apiClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, 'dev-key', contractViolations);

      // Act and assess
      expect((await client.get('/v1/sessions/s1')).status).toBe(200);
      await expect(client.get('/v1/sessions/s2')).rejects.toThrow(/broke its OpenAPI document[\s\S]*head/);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
