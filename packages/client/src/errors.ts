import type { ClientErrorCode, ErrorCode, Problem } from './types.js';

/** Codes an `AgentStateError` may carry: the API's, and the client's own. */
export type AgentStateErrorCode = ErrorCode | ClientErrorCode;

/** The status → code fallback for error answers that are not problem documents. */
const codeOfStatus: Record<number, ErrorCode> = {
  400: 'invalid_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  409: 'conflict',
  412: 'version_mismatch',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'throttled',
  500: 'internal',
  502: 'worker_failed',
  503: 'unavailable',
  504: 'worker_timeout',
};

/**
 * The one error type of the client. An error answer of the API becomes an `AgentStateError`
 * with the problem document's `code`, `status` and `detail`, and its extra members
 * (`currentVersion`, `field`, `limitBytes`, …) as properties and in `problem`. Failures with
 * no answer carry a client code (`network_error`, `timeout`, …) and `status` 0.
 *
 * ```ts
 * try { … } catch (error) {
 *   if (AgentStateError.is(error, 'version_mismatch')) console.log(error.currentVersion);
 * }
 * ```
 */
export class AgentStateError extends Error {
  override name = 'AgentStateError';
  /** The API's error code (`version_mismatch`, …) or a client code (`timeout`, …). */
  readonly code: AgentStateErrorCode | (string & {});
  /** The HTTP status; 0 when no answer came. */
  readonly status: number;
  /** The human-readable explanation. */
  readonly detail: string;
  /** The whole problem document, when the server sent one. */
  readonly problem: Problem | undefined;
  /** `412`: the version the node is at. */
  declare readonly currentVersion?: number;
  /** `400`: the offending field. */
  declare readonly field?: string;
  /** `413`: the limit broken. */
  declare readonly limitBytes?: number;
  /** Any other member of the problem document. */
  readonly [member: string]: unknown;

  constructor(
    code: AgentStateErrorCode | (string & {}),
    status: number,
    detail: string,
    extras: Record<string, unknown> = {},
    options?: { cause?: unknown; problem?: Problem },
  ) {
    super(detail, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.status = status;
    this.detail = detail;
    this.problem = options?.problem;
    for (const [member, value] of Object.entries(extras)) {
      if (!(member in this)) Object.defineProperty(this, member, { value, enumerable: true });
    }
  }

  /** The error an HTTP error answer stands for: its problem document, or its status. */
  static fromResponse(status: number, body: unknown, text: string): AgentStateError {
    if (isProblem(body)) {
      const { type: _type, title: _title, status: _status, code, detail, ...extras } = body;
      return new AgentStateError(code, status, typeof detail === 'string' ? detail : String(code), extras, { problem: body });
    }
    // A gateway's own answer (`{"message":"Not Found"}`) or plain text.
    const message =
      body !== null && typeof body === 'object' && typeof (body as { message?: unknown }).message === 'string'
        ? (body as { message: string }).message
        : text.slice(0, 200);
    const code = codeOfStatus[status] ?? (status >= 500 ? 'internal' : 'http_error');
    return new AgentStateError(code, status, message || `HTTP ${status}`);
  }

  /** True when `error` is an `AgentStateError` whose code is `code` (or starts with a prefix ending in `_`). */
  static is(error: unknown, code?: AgentStateErrorCode | (string & {})): error is AgentStateError {
    if (!(error instanceof AgentStateError)) return false;
    if (code === undefined) return true;
    return code.endsWith('_') ? error.code.startsWith(code) : error.code === code;
  }
}

/** Where in a value the codec failed: `['a', 2, 'b']` for `value.a[2].b`. */
export type ValuePath = ReadonlyArray<string | number>;

/** `$.a[2].b` */
function formatPath(path: ValuePath): string {
  return `$${path.map((part) => (typeof part === 'number' ? `[${part}]` : /^[A-Za-z_$][\w$]*$/.test(part) ? `.${part}` : `[${JSON.stringify(part)}]`)).join('')}`;
}

/**
 * A value the codec cannot carry (a function, a class instance, a symbol, a circular
 * reference) or stored data it cannot read. Thrown before anything is sent.
 */
export class CodecError extends AgentStateError {
  override name = 'CodecError';
  /** Where in the value the problem is. */
  readonly path: ValuePath;

  constructor(detail: string, path: ValuePath) {
    super('codec_error', 0, `${detail} at ${formatPath(path)}`);
    this.path = path;
  }
}

/** One problem a Standard Schema reported. */
export interface SchemaIssue {
  readonly message: string;
  readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined;
}

/**
 * A typed key's value does not match its schema: stored data that no longer fits (`read`),
 * or a value given to a write (`write`, nothing sent). Stored data is never silently replaced.
 */
export class SchemaMismatchError extends AgentStateError {
  override name = 'SchemaMismatchError';
  /** The state key (e.g. `review/42/state`). */
  readonly key: string;
  readonly phase: 'read' | 'write';
  readonly issues: readonly SchemaIssue[];
  /** The offending value (decoded). */
  readonly value: unknown;

  constructor(key: string, phase: 'read' | 'write', issues: readonly SchemaIssue[], value: unknown) {
    const first = issues[0];
    const where = first?.path?.length
      ? ` (at ${first.path.map((part) => String(typeof part === 'object' ? part.key : part)).join('.')})`
      : '';
    super(
      'schema_mismatch',
      0,
      phase === 'read'
        ? `the stored value of key ${key} does not match its schema: ${first?.message ?? 'invalid'}${where}`
        : `the value for key ${key} does not match its schema: ${first?.message ?? 'invalid'}${where}`,
    );
    this.key = key;
    this.phase = phase;
    this.issues = issues;
    this.value = value;
  }
}

function isProblem(body: unknown): body is Problem {
  return (
    body !== null &&
    typeof body === 'object' &&
    typeof (body as { code?: unknown }).code === 'string' &&
    typeof (body as { status?: unknown }).status === 'number'
  );
}
