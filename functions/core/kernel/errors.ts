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
  version_pruned: 410,
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

/** A typed field's problem, as `validation_failed` lists them. */
export interface FieldProblem {
  field: string;
  problem: string;
}

/** The size of a write against its limit, as `413`s and the limits' `400`s name them. */
interface SizeFields {
  limitBytes?: number;
  sizeBytes?: number;
  /** The request field (a JSON path) whose value is over the limit. */
  field?: string;
}

/** A limit counted in items rather than bytes: what is limited, the limit and the count. */
interface CountFields {
  limit?: number | string;
  limitCount?: number;
  count?: number;
}

/** No members beside the standard ones. */
type NoFields = Record<never, never>;

/**
 * The members each problem carries beside `type`, `title`, `status`, `code` and `detail`, by
 * code (API.md section 11): the one place that says what a client may find in a problem, checked
 * by the compiler where each error is thrown.
 */
export interface ProblemFieldsByCode {
  invalid_json: NoFields;
  invalid_request: SizeFields &
    CountFields & {
      key?: string;
      scope?: string;
      maxNamespaces?: number;
      maxDepth?: number;
      /** An embedding's numbers: those a namespace's embeddings share, the most one may have. */
      dimensions?: number;
      maxDimensions?: number;
      /** A JSON Patch operation's index. */
      operation?: number;
      /** Each problem of a refused body, as its schema found them. */
      errors?: ReadonlyArray<{ path: string; message: string }>;
    };
  invalid_id: { field?: string };
  unauthorized: NoFields;
  /** `agents`: what the key may act as (null: any agent). */
  forbidden: { agents?: readonly string[] | null; namespace?: readonly string[] };
  field_forbidden: { fields: readonly string[] };
  not_found: { namespace?: readonly string[]; key?: string; webhookId?: string; erasureId?: string };
  session_not_found: { sessionId: string };
  node_not_found: { nodeId: string };
  version_not_found: { version: number };
  agent_not_found: { agentId: string };
  session_exists: { sessionId: string };
  node_exists: { nodeId: string; parentId?: string | null };
  decision_in_progress: { sessionId: string };
  exclusive_conflict: { key: string; scope: string };
  conflict: {
    attempts?: number;
    scope?: string;
    version?: number;
    field?: string;
    /** Stored fields that no longer fit their declared type. */
    fields?: readonly FieldProblem[];
    /** Sessions whose stored values would not fit a field's new type. */
    sessions?: readonly string[];
    /** The erasure of a user still closing what the user has (send the `DELETE` again). */
    erasureId?: string;
  };
  patch_conflict: { operation: number; pointer?: string };
  /** The version retention removed (API.md section 12). */
  version_pruned: { version: number };
  version_mismatch: { currentVersion: number };
  state_too_large: SizeFields & CountFields & { scope?: string };
  /** A copy past what one request writes counts instead (`limit`: `nodes`, `appends`). */
  payload_too_large: SizeFields & CountFields;
  unsupported_media_type: NoFields;
  validation_failed: { fields: readonly FieldProblem[] };
  unknown_field: { fields: readonly string[] };
  idempotency_key_reused: NoFields;
  throttled: NoFields;
  internal: NoFields;
  /** A worker's answer refused by a rule: that rule's members, and its code as `fieldError`. */
  worker_failed: Partial<UnionToIntersection<ProblemFieldsOf<Exclude<ErrorCode, 'worker_failed'>>>> & { fieldError?: ErrorCode };
  unavailable: NoFields;
  worker_timeout: NoFields;
}

type UnionToIntersection<U> = (U extends unknown ? (arg: U) => void : never) extends (arg: infer I) => void ? I : never;

/** The members of a problem with `code` (one of several codes: what any of them carries). */
export type ProblemFieldsOf<C extends ErrorCode> = C extends ErrorCode ? ProblemFieldsByCode[C] : never;

/** A code whose problem has members that are always there. */
type RequiredKeys<T> = { [K in keyof T]-?: undefined extends T[K] ? never : K }[keyof T];

/** The arguments after `detail`: the members, required where the code has required members. */
type ExtrasArguments<C extends ErrorCode> = [RequiredKeys<ProblemFieldsOf<C>>] extends [never]
  ? [extras?: ProblemFieldsOf<C>, options?: { cause?: unknown }]
  : [extras: ProblemFieldsOf<C>, options?: { cause?: unknown }];

export class AgentStateError<C extends ErrorCode = ErrorCode> extends Error {
  readonly code: C;
  readonly status: number;
  readonly extras: ProblemFieldsOf<C>;
  /** Whether `message` may be shown to the client; 5xx details never are. */
  readonly expose: boolean;

  constructor(code: C, detail: string, ...[extras, options]: ExtrasArguments<C>) {
    super(detail, options);
    this.name = 'AgentStateError';
    this.code = code;
    this.status = errorStatus[code];
    this.extras = extras ?? ({} as ProblemFieldsOf<C>);
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
