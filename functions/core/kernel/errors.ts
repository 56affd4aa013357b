/**
 * The one error type of agentstate. Every failure a client can see carries one of the API's
 * error codes (API.md section 10); the HTTP status comes from the table below, in one place.
 */
export const errorStatus = {
  invalid_json: 400,
  invalid_request: 400,
  invalid_id: 400,
  unauthorized: 401,
  forbidden: 403,
  field_forbidden: 403,
  not_found: 404,
  session_not_found: 404,
  node_not_found: 404,
  version_not_found: 404,
  agent_not_found: 404,
  session_exists: 409,
  node_exists: 409,
  decision_in_progress: 409,
  exclusive_conflict: 409,
  conflict: 409,
  patch_conflict: 409,
  version_mismatch: 412,
  state_too_large: 413,
  payload_too_large: 413,
  unsupported_media_type: 415,
  validation_failed: 422,
  unknown_field: 422,
  idempotency_key_reused: 422,
  throttled: 429,
  internal: 500,
  worker_failed: 502,
  unavailable: 503,
  worker_timeout: 504,
} as const;

export type ErrorCode = keyof typeof errorStatus;

/**
 * A problem's title is its code in words, capitalized (`version_mismatch`: "Version
 * mismatch"), but for these. A rule rather than a table of every code: each function bundles
 * this module, and the titles were the codes' words all along.
 */
const TITLES_IN_OTHER_WORDS: Partial<Record<ErrorCode, string>> = {
  invalid_json: 'Invalid JSON',
  invalid_id: 'Invalid identifier',
  internal: 'Internal error',
  unavailable: 'Service unavailable',
};

/** The title of a problem with `code` (RFC 9457 `title`). */
function titleOf(code: ErrorCode): string {
  const words = code.replaceAll('_', ' ');
  return TITLES_IN_OTHER_WORDS[code] ?? `${words.charAt(0).toUpperCase()}${words.slice(1)}`;
}

/** Extra members of a problem document, e.g. `currentVersion` or `limitBytes`. */
export type ProblemExtras = Record<string, unknown>;

export class AgentStateError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly extras: ProblemExtras;
  /** Whether `message` may be shown to the client; 5xx details never are. */
  readonly expose: boolean;

  constructor(code: ErrorCode, detail: string, extras: ProblemExtras = {}, options?: { cause?: unknown }) {
    super(detail, options);
    this.name = 'AgentStateError';
    this.code = code;
    this.status = errorStatus[code];
    this.extras = extras;
    this.expose = this.status < 500 || code === 'worker_failed' || code === 'worker_timeout';
  }

  get title(): string {
    return titleOf(this.code);
  }

  /** True for an AgentStateError whose code starts with `prefix` (all of them by default). */
  static match(error: unknown, prefix = ''): error is AgentStateError {
    return error instanceof AgentStateError && error.code.startsWith(prefix);
  }
}

/**
 * An error whose detail is worked out only when it is answered, by code a valid request never
 * loads (a refused body's messages, functions/http/edge/request.ts): the outermost middleware awaits
 * `described()` and answers that.
 */
export class LateDetailError extends AgentStateError {
  constructor(
    code: ErrorCode,
    message: string,
    readonly described: () => Promise<AgentStateError>,
  ) {
    super(code, message);
  }
}

/** An RFC 9457 problem document. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  code: ErrorCode;
  detail: string;
  [extra: string]: unknown;
}

export function toProblem(error: AgentStateError): Problem {
  const detail = error.expose ? error.message : error.title;
  return {
    ...error.extras,
    type: `https://agentstate.dev/problems/${error.code.replaceAll('_', '-')}`,
    title: error.title,
    status: error.status,
    code: error.code,
    detail,
  };
}
