import { backoffDelay, defaultRetry, type RetryOptions, sleep } from './backoff.js';
import { AgentStateError } from './errors.js';

/** Options of one call; every method of the client takes them last. */
export interface CallOptions {
  /** Aborts the call, retries and backoff included; it then rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Per attempt; the client's `timeoutMs` by default. */
  timeoutMs?: number;
  /**
   * `Idempotency-Key` of a write (POST, PUT, PATCH). By default each logical write gets a
   * fresh UUID, reused by its retries; pass your own to make a write idempotent across
   * processes, or `false` to send none (the write is then not retried after a network error).
   */
  idempotencyKey?: string | false;
  /** `X-Agent-Id` for this call; the client's `agentId` by default, `null` for none. */
  agentId?: string | null;
  /** Retries of this call; `false` for none. */
  retry?: Partial<RetryOptions> | false;
}

export interface HttpOptions {
  baseUrl: string;
  apiKey: string;
  agentId?: string | undefined;
  fetch?: typeof fetch | undefined;
  timeoutMs?: number | undefined;
  retry?: Partial<RetryOptions> | false | undefined;
  headers?: Record<string, string> | undefined;
}

export interface HttpRequest {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  query?: Record<string, string | number | undefined> | undefined;
  body?: unknown;
  contentType?: string;
  /** `If-Match: "<version>"` (`'*'`: `If-Match: *`) */
  ifMatch?: number | '*' | undefined;
  /** `If-None-Match: *` */
  ifNoneMatch?: '*' | undefined;
}

/** An answer: status, headers and the parsed body. */
export interface HttpResponse<T> {
  status: number;
  headers: Headers;
  body: T;
  /** `Idempotency-Replayed: true`: this is the stored answer of an earlier identical request. */
  replayed: boolean;
}

export const DEFAULT_TIMEOUT_MS = 30_000;

/**
 * The transport: JSON over fetch, with
 * - an `Idempotency-Key` on every POST/PUT/PATCH (one UUID per logical write, the same on
 *   each of its retries, so a retry never writes twice);
 * - retries with backoff and jitter on network errors, timeouts, `429` and `503` (honouring
 *   `Retry-After`), and on `409 conflict` when the retry found its own first try still running;
 * - a timeout per attempt, and `AbortSignal` support through retries and backoff.
 */
export class HttpTransport {
  readonly baseUrl: string;
  private readonly fetch: typeof fetch;
  private readonly timeoutMs: number;
  private readonly retry: RetryOptions | false;

  constructor(private readonly options: HttpOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    // Bound: some fetch implementations insist on being called on globalThis.
    this.fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.retry = options.retry === false ? false : { ...defaultRetry, ...options.retry };
  }

  async request<T>(request: HttpRequest, call: CallOptions = {}): Promise<HttpResponse<T>> {
    const url = this.url(request.path, request.query);
    const headers: Record<string, string> = {
      accept: 'application/json, application/problem+json',
      ...this.options.headers,
      authorization: `Bearer ${this.options.apiKey}`,
    };
    const agentId = call.agentId === undefined ? this.options.agentId : call.agentId;
    if (agentId) headers['x-agent-id'] = agentId;
    if (request.ifMatch !== undefined) headers['if-match'] = request.ifMatch === '*' ? '*' : `"${request.ifMatch}"`;
    if (request.ifNoneMatch !== undefined) headers['if-none-match'] = request.ifNoneMatch;
    let body: string | undefined;
    if (request.body !== undefined) {
      body = JSON.stringify(request.body);
      headers['content-type'] = request.contentType ?? 'application/json';
    }
    const write = request.method === 'POST' || request.method === 'PUT' || request.method === 'PATCH';
    const idempotencyKey = write && call.idempotencyKey !== false ? (call.idempotencyKey ?? randomUuid()) : undefined;
    if (idempotencyKey) headers['idempotency-key'] = idempotencyKey;
    // A write without a key may have happened when its answer was lost: do not send it twice.
    const safeToResend = !write || idempotencyKey !== undefined;

    const retry = call.retry === false || this.retry === false ? false : { ...this.retry, ...call.retry };
    const attempts = retry ? Math.max(1, retry.attempts) : 1;
    const timeoutMs = call.timeoutMs ?? this.timeoutMs;

    for (let attempt = 1; ; attempt++) {
      call.signal?.throwIfAborted();
      const last = attempt >= attempts;
      let outcome: { response: Response; text: string } | { error: AgentStateError };
      const timeout = AbortSignal.timeout(timeoutMs);
      const signal = call.signal ? AbortSignal.any([call.signal, timeout]) : timeout;
      try {
        const response = await this.fetch(url, { method: request.method, headers, ...(body === undefined ? {} : { body }), signal });
        outcome = { response, text: await response.text() };
      } catch (error) {
        if (call.signal?.aborted) throw call.signal.reason;
        outcome = timeout.aborted
          ? {
              error: new AgentStateError(
                'timeout',
                0,
                `no answer from ${request.method} ${request.path} within ${timeoutMs} ms`,
                {},
                { cause: error },
              ),
            }
          : {
              error: new AgentStateError(
                'network_error',
                0,
                `${request.method} ${request.path} failed: ${(error as Error)?.message ?? String(error)}`,
                {},
                { cause: error },
              ),
            };
      }

      if ('error' in outcome) {
        if (last || !safeToResend || !retry) throw outcome.error;
        await sleep(backoffDelay(attempt, retry), call.signal);
        continue;
      }

      const { response, text } = outcome;
      const parsed = parseBody(text);
      if (response.ok) {
        return {
          status: response.status,
          headers: response.headers,
          body: parsed as T,
          replayed: response.headers.get('idempotency-replayed') === 'true',
        };
      }
      const error = AgentStateError.fromResponse(response.status, parsed, text);
      const retryable =
        response.status === 429 ||
        response.status === 503 ||
        // Our own first try, still running (its answer was lost): wait for it to finish.
        (error.code === 'conflict' && idempotencyKey !== undefined && attempt > 1 && error.attempts === undefined);
      if (last || !retryable || !safeToResend || !retry) throw error;
      const retryAfterMs = parseRetryAfter(response.headers.get('retry-after'));
      await sleep(Math.min(retry.maxDelayMs, Math.max(retryAfterMs ?? 0, backoffDelay(attempt, retry))), call.signal);
    }
  }

  private url(path: string, query: HttpRequest['query']): string {
    const search = new URLSearchParams();
    for (const [name, value] of Object.entries(query ?? {})) if (value !== undefined) search.set(name, String(value));
    const text = search.toString();
    return `${this.baseUrl}${path}${text ? `?${text}` : ''}`;
  }
}

/** `/v1/sessions/{sid}` with each segment escaped. */
export function path(strings: TemplateStringsArray, ...segments: Array<string | number>): string {
  return strings.reduce(
    (out, part, index) => out + part + (index < segments.length ? encodeURIComponent(String(segments[index])) : ''),
    '',
  );
}

function parseBody(text: string): unknown {
  if (text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function parseRetryAfter(value: string | null): number | undefined {
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

/** A v4 UUID from Web Crypto (Node 20, browsers, workers). */
function randomUuid(): string {
  return globalThis.crypto.randomUUID();
}
