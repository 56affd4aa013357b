import type { Exchange } from './contract.js';
import { VIOLATION_HEADER } from './contract-proxy.js';

/** A minimal HTTP client for the tests: real fetch against a real server, nothing mocked. */
export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface RequestOptions {
  key?: string | null;
  headers?: Record<string, string>;
  /** A raw body string sent as is (for malformed JSON); otherwise `json` is serialized. */
  raw?: string;
  json?: unknown;
  contentType?: string;
}

/**
 * `contract`: holds each exchange to the OpenAPI document (contract-proxy.ts `check`) and answers
 * what it breaks, for a client that talks to a server directly rather than through the proxy.
 */
export function apiClient(baseUrl: string, defaultKey = 'dev-key', contract?: (exchange: Exchange) => string[]) {
  async function request<T = any>(method: string, path: string, options: RequestOptions = {}): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = { ...options.headers };
    const key = options.key === undefined ? defaultKey : options.key;
    if (key !== null) headers.authorization = `Bearer ${key}`;
    let body: string | undefined;
    if (options.raw !== undefined) body = options.raw;
    else if (options.json !== undefined) body = JSON.stringify(options.json);
    if (body !== undefined) headers['content-type'] = options.contentType ?? 'application/json';
    const url = new URL(`${baseUrl}${path}`);
    const response = await fetch(url, { method, headers, body });
    const text = await response.text();
    // The exchange as the proxy would see it on the wire: the request line's path and query as
    // fetch writes them, the headers fetch sends, the body in UTF-8 (a lone surrogate replaced).
    const violations = contract?.({
      method,
      url: `${url.pathname}${url.search}`,
      requestContentType: new Headers(headers).get('content-type') ?? undefined,
      requestBody: body === undefined ? '' : Buffer.from(body, 'utf8').toString('utf8'),
      status: response.status,
      responseContentType: response.headers.get('content-type') ?? undefined,
      responseBody: text,
    });
    // Else set by the contract proxy (contract-proxy.ts) in front of the servers e2e tests start.
    const violation = violations ? violations.join('\n') : decodeURIComponent(response.headers.get(VIOLATION_HEADER) ?? '');
    if (violation) throw new Error(`the API broke its OpenAPI document (docs/openapi.json):\n${violation}`);
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = text;
    }
    return { status: response.status, headers: response.headers, body: parsed as T, text };
  }
  return {
    request,
    get: <T = any>(path: string, options?: RequestOptions) => request<T>('GET', path, options),
    post: <T = any>(path: string, json?: unknown, options?: RequestOptions) => request<T>('POST', path, { ...options, json }),
    put: <T = any>(path: string, json?: unknown, options?: RequestOptions) => request<T>('PUT', path, { ...options, json }),
    patch: <T = any>(path: string, json?: unknown, options?: RequestOptions) => request<T>('PATCH', path, { ...options, json }),
    delete: <T = any>(path: string, options?: RequestOptions) => request<T>('DELETE', path, options),
  };
}

export type ApiClient = ReturnType<typeof apiClient>;

/** A session id no other test uses. */
export function uniqueId(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}
