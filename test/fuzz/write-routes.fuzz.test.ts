import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type InProcessRequest, type InProcessResponse, invoke } from '../../bench/invoke.js';
import { errorStatus } from '../../functions/core/kernel/errors.js';
import { routes } from '../../functions/http/contract/routes.js';
import { dependenciesFor, useDependencies } from '../../functions/http/dependencies.js';
import { keysFromEnv } from '../../functions/http/edge/auth.js';
import { handlers } from '../../functions/http/index.js';
import { localDynamoDbClient } from '../../functions/local/dynamodb-local.js';
import { createStores } from '../../functions/store/index.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * Numbers, encodings and content types on every write route (API.md section 1), against the
 * real handlers on a real table: each route gets a body it would take, with a number written
 * as JSON allows (and as it does not), its bytes sometimes broken (invalid UTF-8, a BOM, UTF-16)
 * and its media type varied. Whatever comes in, the answer is a documented status, never a
 * 5xx; a number is read back digit for digit or refused with `400 invalid_json`; bytes that are
 * not UTF-8 are `400 invalid_json`, a charset other than utf-8 is `415`.
 */

const TENANT = 'fuzz-write';
const auth = { authorization: 'Bearer write-key' };
const client = localDynamoDbClient(dynamoEndpoint());

beforeAll(async () => {
  const tableName = await createTestTable('fuzz-write');
  useDependencies(dependenciesFor(createStores(client, tableName), { resolveKey: keysFromEnv(`${TENANT}:write-key`) }));
  // Refused webhook URLs and the like are logged; expected here.
  vi.spyOn(console, 'warn').mockImplementation(() => {});
  vi.spyOn(console, 'error').mockImplementation(() => {});
});
afterAll(() => {
  useDependencies(undefined);
  vi.restoreAllMocks();
  client.destroy();
});

/**
 * For each write route: a path and a body it takes, `N` standing for the number. `readBack` is
 * where a stored number can be read again, for the routes that keep it as sent.
 */
const templates: Record<string, { path: string; body: string; readBack?: string }> = {
  'POST /v1/sessions': { path: '/v1/sessions', body: '{"metadata":{"n":N}}' },
  'POST /v1/sessions/{sid}/messages': { path: '/v1/sessions/fz/messages', body: '{"messages":[{"role":"user","n":N}]}' },
  'PATCH /v1/sessions/{sid}': { path: '/v1/sessions/fz', body: '{"metadata":{"n":N}}', readBack: '/v1/sessions/fz' },
  'PUT /v1/sessions/{sid}/head': { path: '/v1/sessions/fz/head', body: '{"nodeId":"root","n":N}' },
  'PUT /v1/sessions/{sid}/nodes/{nid}/notes/{key}': {
    path: '/v1/sessions/fz/nodes/root/notes/fz-note',
    body: '{"n":N}',
    readBack: '/v1/sessions/fz/state?node=root&notes=1',
  },
  // Each copy is a new session of a generated id, so nothing to read back at one place.
  'POST /v1/sessions/{sid}/copy': { path: '/v1/sessions/fz/copy', body: '{"metadata":{"n":N}}' },
  'PATCH /v1/sessions/{sid}/state': { path: '/v1/sessions/fz/state', body: '{"n":N}', readBack: '/v1/sessions/fz/state' },
  'PUT /v1/sessions/{sid}/state': { path: '/v1/sessions/fz/state', body: '{"n":N}', readBack: '/v1/sessions/fz/state' },
  'PUT /v1/agents/{agentId}': { path: '/v1/agents/fz-agent', body: '{"config":{"n":N}}', readBack: '/v1/agents/fz-agent' },
  'POST /v1/sessions/{sid}/decide': {
    path: '/v1/sessions/fz-decide/decide',
    body: '{"trigger":{"type":"tick","n":N},"proposed":{"state":{"n":N}}}',
    readBack: '/v1/sessions/fz-decide/state',
  },
  'POST /v1/sessions/{sid}/commits': {
    path: '/v1/sessions/fz-commit/commits',
    body: '{"commands":[{"key":"n","scope":"thread","merge":"disjoint","set":N}]}',
    readBack: '/v1/sessions/fz-commit/state',
  },
  'POST /v1/webhooks': { path: '/v1/webhooks', body: '{"url":"ftp://example.invalid/hook","sessionId":"fz","n":N}' },
  'POST /v1/webhooks/{webhookId}/dead-letters/replay': { path: '/v1/webhooks/fz-missing/dead-letters/replay', body: '{"limit":N}' },
  'POST /v1/memory/search': { path: '/v1/memory/search', body: '{"namespacePrefix":["fz"],"filter":{"n":N}}' },
  'PUT /v1/memory/{path+}': { path: '/v1/memory/fz/item', body: '{"value":{"n":N}}', readBack: '/v1/memory/fz/item' },
};

const writeRoutes = routes.filter((route) => ['POST', 'PUT', 'PATCH'].includes(route.method));

/** Numbers as JSON writes them, some that a double would change, and texts JSON does not allow. */
const validNumber = fc.oneof(
  fc.constantFrom(
    '0',
    '-0',
    '1.0',
    '1E+2',
    '-1e-7',
    '5e-324',
    '9007199254740993',
    '123456789012345678901234567890',
    '1e-400',
    '1e400',
    '0.1000000000000000055',
    '-9223372036854775809',
  ),
  fc.integer().map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map(String),
  fc.bigInt({ min: -(10n ** 40n), max: 10n ** 40n }).map(String),
);
const invalidNumber = fc.constantFrom('01', '1.', '.5', '+1', 'NaN', 'Infinity', '0x10', '1e', '--1');

const contentTypes = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('application/json', 'application/json; charset=utf-8', 'application/json;charset=UTF-8') },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      'application/json; charset="utf-8"',
      'application/merge-patch+json',
      'application/json; charset=iso-8859-1',
      'application/json; charset=utf-16',
      'text/plain',
      'application/x-www-form-urlencoded',
      'application/json-patch+json',
    ),
  },
);

type Encoding = 'utf8' | 'invalid-byte' | 'overlong' | 'bom' | 'utf16le' | 'non-ascii';
const encodings = fc.oneof(
  { weight: 6, arbitrary: fc.constant<Encoding>('utf8') },
  { weight: 1, arbitrary: fc.constantFrom<Encoding>('invalid-byte', 'overlong', 'bom', 'utf16le', 'non-ascii') },
);

/** The body's bytes: UTF-8, or broken in one of the ways a client breaks them. */
function encode(text: string, encoding: Encoding): Buffer {
  const utf8 = Buffer.from(text, 'utf8');
  const at = text.indexOf('{') + 1;
  switch (encoding) {
    case 'utf8':
      return utf8;
    case 'non-ascii':
      // A key of é, 😀 and a right-to-left mark: valid UTF-8 that must pass.
      return Buffer.from(`${text.slice(0, at)}"é😀\u202e":1,${text.slice(at)}`, 'utf8');
    case 'invalid-byte':
      return Buffer.concat([Buffer.from(`${text.slice(0, at)}"x`), Buffer.from([0xff]), Buffer.from(`":1,${text.slice(at)}`)]);
    case 'overlong':
      // "/" written in two bytes: not UTF-8.
      return Buffer.concat([Buffer.from(`${text.slice(0, at)}"x`), Buffer.from([0xc0, 0xaf]), Buffer.from(`":1,${text.slice(at)}`)]);
    case 'bom':
      return Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), utf8]);
    case 'utf16le':
      return Buffer.from(text, 'utf16le');
  }
}

function assertDocumented(where: string, response: InProcessResponse): void {
  expect(response.status, where).toBeLessThan(500);
  if (response.status >= 400) {
    expect(response.headers['content-type'], where).toBe('application/problem+json');
    const code = String(response.json?.code);
    expect(errorStatus[code as keyof typeof errorStatus], `${where}: code ${code}`).toBe(response.status);
  }
}

describe('every write route', () => {
  it('has a template here, so a new write route is fuzzed too', () => {
    expect(writeRoutes.map((route) => `${route.method} ${route.path}`).sort()).toEqual(Object.keys(templates).sort());
  });

  it('keeps numbers verbatim or refuses them, refuses broken bytes and other charsets, and never answers 5xx', async () => {
    const seen = new Map<string, number>();
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...writeRoutes),
        fc.oneof(
          { weight: 5, arbitrary: validNumber.map((text) => ({ text, valid: true })) },
          { weight: 1, arbitrary: invalidNumber.map((text) => ({ text, valid: false })) },
        ),
        contentTypes,
        encodings,
        async (route, number, contentType, encoding) => {
          const template = templates[`${route.method} ${route.path}`] as (typeof templates)[string];
          const text = template.body.replaceAll('N', number.text);
          const request: InProcessRequest = {
            method: route.method,
            url: template.path,
            headers: { ...auth, 'content-type': contentType },
            body: encode(text, encoding),
          };

          const response = await invoke(handlers, request);

          const where = `${route.method} ${template.path} ${contentType} ${encoding} ${text} → ${response.status} ${response.text.slice(0, 200)}`;
          seen.set(
            `${response.status} ${response.json?.code ?? ''}`,
            (seen.get(`${response.status} ${response.json?.code ?? ''}`) ?? 0) + 1,
          );
          assertDocumented(where, response);
          const charset = /charset="?([^";]+)/i.exec(contentType)?.[1]?.toLowerCase();
          const json = /^application\/([\w.-]+\+)?json\s*(;|$)/i.test(contentType);
          if (json && charset !== undefined && charset !== 'utf-8') expect(response.status, where).toBe(415);
          else if (!json) expect(response.status, where).toBe(415);
          else if (['invalid-byte', 'overlong', 'utf16le'].includes(encoding)) expect(response.json?.code, where).toBe('invalid_json');
          else if (!number.valid) expect(response.json?.code, where).toBe('invalid_json');
          else if (response.status < 300 && template.readBack && response.json?.changed !== false) {
            // Stored (a value JSON-equal to the stored one records nothing): read back digit for digit.
            const read = await invoke(handlers, { method: 'GET', url: template.readBack, headers: auth });
            expect(read.text, where).toContain(`"n":${number.text}`);
          }
        },
      ),
      { numRuns: Number(process.env.FUZZ_RUNS ?? 400), endOnFailure: true },
    );
    if (process.env.FUZZ_VERBOSE) console.log([...seen].sort());
    // The bodies reach the routes: successes show up, not only refusals.
    expect([...seen.keys()].some((status) => /^20[01] /.test(status))).toBe(true);
  }, 120_000);
});
