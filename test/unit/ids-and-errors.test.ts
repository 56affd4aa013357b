import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AgentStateError, type ErrorCode, errorStatus, type ProblemFieldsByCode, toProblem } from '../../functions/core/kernel/errors.js';
import { isValidId, newId, ROOT_NODE, requireId, requireNodeId } from '../../functions/core/kernel/ids.js';

/* ------------------------------------------------------------------ helpers (local) */

/** Runs `action` and returns what it threw, failing the test when it did not throw. */
function thrownBy(action: () => unknown): unknown {
  try {
    action();
  } catch (error) {
    return error;
  }
  throw new Error('expected the action to throw');
}

const ID_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:~@-';
const idChar = fc.constantFrom(...ID_ALPHABET.split(''));
/** Every id the rule accepts: the dot segments `.` and `..` are the alphabet's only refusals. */
const validId = fc.string({ unit: idChar, minLength: 1, maxLength: 128 }).filter((id) => id !== '.' && id !== '..');

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The 48-bit millisecond timestamp at the front of a UUIDv7. */
const uuidTime = (id: string) => Number.parseInt(id.replaceAll('-', '').slice(0, 12), 16);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/* ------------------------------------------------------------------ isValidId */

describe('isValidId: 1–128 characters of A-Z a-z 0-9 . _ : ~ @ -', () => {
  it.each<[label: string, value: string]>([
    ['a single letter', 'a'],
    ['a single digit', '7'],
    ['every allowed punctuation mark', '._:~@-'],
    ['the whole alphabet', ID_ALPHABET],
    ['a UUID', '018f3c1e-7a2b-7c3d-8e4f-0123456789ab'],
    ['an email-like id', 'agent@example.com'],
    ['a namespaced id', 'tenant:session~1'],
    ['exactly 128 characters', 'x'.repeat(128)],
    ['the reserved word root (valid as a plain id)', 'root'],
    ['dots beside other characters', '..a.'],
  ])('accepts %s', (_label, value) => {
    expect(isValidId(value)).toBe(true);
    expect(requireId(value, 'sessionId')).toBe(value);
  });

  it.each<[label: string, value: unknown]>([
    ['the empty string', ''],
    ['129 characters', 'x'.repeat(129)],
    ['a hash', 'a#b'],
    ['a slash', 'a/b'],
    ['a backslash', 'a\\b'],
    ['a space', 'a b'],
    ['a leading space', ' a'],
    ['a trailing newline', 'abc\n'],
    ['a tab', 'a\tb'],
    ['a question mark', 'a?b'],
    ['a percent sign', 'a%20b'],
    ['a dot segment, which URLs cannot carry', '.'],
    ['a double-dot segment', '..'],
    ['a plus sign', 'a+b'],
    ['an accented letter', 'café'],
    ['a non-Latin letter', 'идентификатор'],
    ['an emoji', 'a😀'],
    ['a full-width digit', '１'],
    ['a NUL character', 'a\u0000'],
    ['a number', 123],
    ['null', null],
    ['undefined', undefined],
    ['an object', { id: 'a' }],
    ['an array of one valid id', ['a']],
  ])('rejects %s', (_label, value) => {
    expect(isValidId(value)).toBe(false);
  });

  it('accepts any string of 1–128 allowed characters', () => {
    fc.assert(
      fc.property(validId, (id) => {
        expect(isValidId(id)).toBe(true);
      }),
    );
  });

  it('rejects a valid id with any character outside the alphabet inserted', () => {
    const foreign = fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }).filter((char) => !ID_ALPHABET.includes(char));
    fc.assert(
      fc.property(fc.string({ unit: idChar, maxLength: 100 }), foreign, fc.nat(), (id, char, at) => {
        const position = at % (id.length + 1);
        const spoiled = id.slice(0, position) + char + id.slice(position);
        expect(isValidId(spoiled)).toBe(false);
      }),
    );
  });

  it('rejects any string longer than 128 characters, even of allowed characters', () => {
    fc.assert(
      fc.property(fc.string({ unit: idChar, minLength: 129, maxLength: 300 }), (id) => {
        expect(isValidId(id)).toBe(false);
      }),
    );
  });
});

/* ------------------------------------------------------------------ requireId / requireNodeId */

describe('requireId and requireNodeId', () => {
  it.each<[label: string, value: unknown]>([
    ['empty', ''],
    ['too long', 'x'.repeat(129)],
    ['with a slash', 'a/b'],
    ['not a string', 42],
  ])('throws 400 invalid_id naming the field for an id that is %s', (_label, value) => {
    // Act
    const error = thrownBy(() => requireId(value, 'sessionId'));

    // Assess
    expect(error).toBeInstanceOf(AgentStateError);
    expect(error).toMatchObject({ code: 'invalid_id', status: 400, extras: { field: 'sessionId' } });
    expect((error as AgentStateError).message).toContain('sessionId');
  });

  it('returns a valid message node id unchanged', () => {
    expect(requireNodeId('msg-1', 'parentId')).toBe('msg-1');
  });

  it('rejects the reserved id "root" for a node with 400 invalid_id', () => {
    // Act
    const error = thrownBy(() => requireNodeId(ROOT_NODE, 'id'));

    // Assess
    expect(ROOT_NODE).toBe('root');
    expect(error).toBeInstanceOf(AgentStateError);
    expect(error).toMatchObject({ code: 'invalid_id', status: 400, extras: { field: 'id' } });
    expect((error as AgentStateError).message).toContain('root');
  });

  it('rejects an invalid node id with the same error as requireId', () => {
    const error = thrownBy(() => requireNodeId('a b', 'parentId'));

    expect(error).toMatchObject({ code: 'invalid_id', status: 400, extras: { field: 'parentId' } });
  });

  it('treats the reserved word case-sensitively', () => {
    expect(requireNodeId('Root', 'id')).toBe('Root');
    expect(requireNodeId('root1', 'id')).toBe('root1');
  });

  it('agrees with isValidId for every node id other than root', () => {
    fc.assert(
      fc.property(fc.oneof(validId, fc.string()), (value) => {
        fc.pre(value !== ROOT_NODE);
        if (isValidId(value)) expect(requireNodeId(value, 'id')).toBe(value);
        else expect(() => requireNodeId(value, 'id')).toThrow(AgentStateError);
      }),
    );
  });
});

/* ------------------------------------------------------------------ newId */

describe('newId: time-ordered UUIDv7 identifiers', () => {
  it('yields lower-case UUIDv7 strings that are also valid ids', () => {
    for (let i = 0; i < 100; i++) {
      const id = newId();
      expect(id).toMatch(UUID_V7);
      expect(isValidId(id)).toBe(true);
    }
  });

  it('never repeats itself and sorts in creation order, even within one millisecond', () => {
    // Prepare / Act
    const ids = Array.from({ length: 5000 }, () => newId());

    // Assess
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
  });

  it('sorts ids made later after ids made earlier', async () => {
    const earlier = newId();
    await sleep(5);
    const later = newId();

    expect(earlier < later).toBe(true);
    expect(uuidTime(later)).toBeGreaterThan(uuidTime(earlier));
  });

  it('carries the creation time in its first 48 bits', () => {
    const before = Date.now();
    const id = newId();
    const after = Date.now();

    expect(uuidTime(id)).toBeGreaterThanOrEqual(before);
    expect(uuidTime(id)).toBeLessThanOrEqual(after + 1);
  });
});

/* ------------------------------------------------------------------ errors */

describe('AgentStateError', () => {
  it.each(Object.entries(errorStatus) as Array<[ErrorCode, number]>)('gives code %s the status %i and a title', (code, status) => {
    const error = new AgentStateError(code, 'detail');

    expect(error.status).toBe(status);
    expect(error.title).toEqual(expect.any(String));
    expect(error.title.length).toBeGreaterThan(0);
    expect(error.name).toBe('AgentStateError');
    expect(error).toBeInstanceOf(Error);
  });

  it('keeps the cause and the extras it was given', () => {
    const cause = new Error('low level');
    const error = new AgentStateError('conflict', 'lost the race', { attempts: 3 }, { cause });

    expect(error.cause).toBe(cause);
    expect(error.extras).toEqual({ attempts: 3 });
    expect(error.message).toBe('lost the race');
  });

  it('defaults its extras to an empty object', () => {
    expect(new AgentStateError('not_found', 'x').extras).toEqual({});
  });

  it.each<[ErrorCode, boolean]>([
    ['invalid_request', true],
    ['version_mismatch', true],
    ['throttled', true],
    ['internal', false],
    ['unavailable', false],
    ['worker_failed', true],
    ['worker_timeout', true],
  ])('marks %s as exposing its message: %s', (code, expose) => {
    expect(new AgentStateError(code, 'x').expose).toBe(expose);
  });
});

describe('toProblem: RFC 9457 problem documents', () => {
  it('builds type, title, status, code and detail, and adds the extras', () => {
    // Prepare
    const error = new AgentStateError('version_mismatch', 'expected version 3, current is 5', {
      currentVersion: 5,
    });

    // Act
    const problem = toProblem(error);

    // Assess
    expect(problem).toEqual({
      type: 'https://agentstate.dev/problems/version-mismatch',
      title: 'Version mismatch',
      status: 412,
      code: 'version_mismatch',
      detail: 'expected version 3, current is 5',
      currentVersion: 5,
    });
  });

  // The title of every code, as problem documents have always said it (docs/openapi.json's
  // examples too): errors.ts now makes them from the code's words, but for four.
  const titles: Record<ErrorCode, string> = {
    invalid_json: 'Invalid JSON',
    invalid_request: 'Invalid request',
    invalid_id: 'Invalid identifier',
    unauthorized: 'Unauthorized',
    forbidden: 'Forbidden',
    field_forbidden: 'Field forbidden',
    not_found: 'Not found',
    session_not_found: 'Session not found',
    node_not_found: 'Node not found',
    version_not_found: 'Version not found',
    agent_not_found: 'Agent not found',
    session_exists: 'Session exists',
    node_exists: 'Node exists',
    decision_in_progress: 'Decision in progress',
    exclusive_conflict: 'Exclusive conflict',
    conflict: 'Conflict',
    patch_conflict: 'Patch conflict',
    version_pruned: 'Version pruned',
    version_mismatch: 'Version mismatch',
    state_too_large: 'State too large',
    payload_too_large: 'Payload too large',
    unsupported_media_type: 'Unsupported media type',
    validation_failed: 'Validation failed',
    unknown_field: 'Unknown field',
    idempotency_key_reused: 'Idempotency key reused',
    throttled: 'Throttled',
    internal: 'Internal error',
    worker_failed: 'Worker failed',
    unavailable: 'Service unavailable',
    worker_timeout: 'Worker timeout',
  };

  it.each(Object.entries(titles) as Array<[ErrorCode, string]>)('titles a %s problem "%s"', (code, title) => {
    expect(toProblem(new AgentStateError(code, 'x')).title).toBe(title);
  });

  it('titles every code (the list above is the whole set)', () => {
    expect(Object.keys(titles).sort()).toEqual(Object.keys(errorStatus).sort());
  });

  it.each(Object.keys(errorStatus) as ErrorCode[])('gives %s a type URL with dashes for underscores', (code) => {
    const problem = toProblem(new AgentStateError(code, 'x'));

    expect(problem.type).toBe(`https://agentstate.dev/problems/${code.split('_').join('-')}`);
    expect(problem.type).not.toContain('_');
    expect(problem.status).toBe(errorStatus[code]);
    expect(problem.code).toBe(code);
  });

  it.each<ErrorCode>(['internal', 'unavailable'])('does not leak the message of a %s error; its detail is the title', (code) => {
    const secret = 'ECONNREFUSED 10.0.0.7:8000 table agentstate-prod';
    const problem = toProblem(new AgentStateError(code, secret));

    expect(problem.detail).toBe(problem.title);
    expect(JSON.stringify(problem)).not.toContain('ECONNREFUSED');
    expect(problem.status).toBeGreaterThanOrEqual(500);
  });

  it.each<ErrorCode>(['worker_failed', 'worker_timeout'])('shows the message of a %s error', (code) => {
    expect(toProblem(new AgentStateError(code, 'the worker said no')).detail).toBe('the worker said no');
  });

  it('does not let extras override the standard members', () => {
    // The compiler refuses such members where an error is thrown (ProblemFieldsByCode); a
    // problem built from data it never saw must hold all the same.
    const hostile = { type: 'evil', title: 'evil', status: 200, code: 'internal', detail: 'evil', hint: 'kept' };
    const error = new AgentStateError('not_found', 'no such thing', hostile as unknown as ProblemFieldsByCode['not_found']);

    expect(toProblem(error)).toEqual({
      type: 'https://agentstate.dev/problems/not-found',
      title: 'Not found',
      status: 404,
      code: 'not_found',
      detail: 'no such thing',
      hint: 'kept',
    });
  });

  it('is plain JSON that survives a round trip', () => {
    const problem = toProblem(new AgentStateError('state_too_large', 'too big', { limitBytes: 262144 }));

    expect(JSON.parse(JSON.stringify(problem))).toEqual(problem);
  });
});

describe('AgentStateError.match', () => {
  it('matches every AgentStateError when no prefix is given', () => {
    expect(AgentStateError.match(new AgentStateError('internal', 'x'))).toBe(true);
    expect(AgentStateError.match(new AgentStateError('invalid_id', 'x'))).toBe(true);
  });

  it.each<[ErrorCode, string, boolean]>([
    ['session_not_found', 'session', true],
    ['session_exists', 'session', true],
    ['node_not_found', 'session', false],
    ['worker_failed', 'worker_', true],
    ['worker_timeout', 'worker_', true],
    ['not_found', 'not_found', true],
    ['node_not_found', 'not_found', false],
    ['conflict', 'conflict', true],
    ['exclusive_conflict', 'conflict', false],
  ])('matches code %s against prefix %s: %s', (code, prefix, expected) => {
    expect(AgentStateError.match(new AgentStateError(code, 'x'), prefix)).toBe(expected);
  });

  it.each<[label: string, value: unknown]>([
    ['a plain Error', new Error('x')],
    ['a look-alike object', { name: 'AgentStateError', code: 'not_found', status: 404 }],
    ['an Error named AgentStateError', Object.assign(new Error('x'), { name: 'AgentStateError', code: 'internal' })],
    ['null', null],
    ['undefined', undefined],
    ['a string', 'not_found'],
  ])('rejects %s', (_label, value) => {
    expect(AgentStateError.match(value)).toBe(false);
  });

  it('narrows the type, so that code is readable after a match', () => {
    const error: unknown = new AgentStateError('node_exists', 'x', { nodeId: 'x' });
    if (!AgentStateError.match(error, 'node')) throw new Error('expected a match');
    expect(error.code).toBe('node_exists');
  });
});
