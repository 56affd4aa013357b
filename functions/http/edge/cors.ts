/**
 * Cross-origin requests from browsers (API.md section 1): off unless origins are configured
 * (the construct's `corsOrigins`, locally `AGENTSTATE_CORS_ORIGINS`); then preflights are
 * answered and answers to those origins say what a page may read. One policy for both: API
 * Gateway is given it in lib/agent-state.ts, the local server applies it in
 * functions/local/cors.ts.
 *
 * Keys travel in `Authorization`, never in cookies, so credentials are not allowed; a page
 * of an allowed origin sends the key it holds.
 */
export const corsPolicy = {
  allowMethods: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'],
  /** What a request may carry besides the CORS-safelisted headers. */
  allowHeaders: ['authorization', 'content-type', 'if-match', 'if-none-match', 'idempotency-key', 'x-agent-id'],
  /** What a page may read from an answer besides the safelisted headers. */
  exposeHeaders: ['etag', 'location', 'idempotency-replayed', 'retry-after', 'www-authenticate'],
  /** How long a browser may keep a preflight's answer. */
  maxAgeSeconds: 600,
} as const;

/**
 * The allowed origins of a comma-separated setting: each `*` or an origin
 * (`https://app.example.com`, `http://localhost:5173`: scheme, host, port, nothing else).
 * Throws on anything else, so a typo fails at start-up rather than silently blocking a page.
 */
export function parseCorsOrigins(setting: string | undefined): string[] {
  const origins = (setting ?? '')
    .split(',')
    .map((origin) => origin.trim())
    .filter(Boolean);
  for (const origin of origins) {
    if (origin === '*') continue;
    let parsed: URL | undefined;
    try {
      parsed = new URL(origin);
    } catch {
      parsed = undefined;
    }
    if (!parsed || !/^https?:$/.test(parsed.protocol) || parsed.origin !== origin) {
      throw new Error(`agentstate: CORS origin "${origin}" is not an origin like https://app.example.com (scheme, host and port only)`);
    }
  }
  return origins;
}
