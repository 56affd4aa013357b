import { createHash } from 'node:crypto';
import type { APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { canonicalJson } from '../../core/json/json.js';
import { AgentStateError } from '../../core/kernel/errors.js';
import type { IdempotencyClaim, IdempotencyStore, StoredResponse } from '../../core/model/ports.js';
import { bearerToken } from './auth.js';
import { type ApiEvent, type Middleware, WRITE_METHODS } from './middleware.js';

const IDEMPOTENCY_LOCK_MS = 60_000;
const idempotencyKeyPattern = /^[\x21-\x7e]{1,255}$/;
/** The largest answer (as kept, JSON text) a change of the log keeps with it; a larger one is kept apart. */
const KEPT_ANSWER_LIMIT_BYTES = 2 * 1024;
/**
 * How long a retry waits for the request that holds its key (the first one, still running) to
 * answer, looking again after 25 ms, then twice as long each time up to a second; then `409`.
 * As long as a write may take to get its turn (write-retry.ts).
 */
const WAIT_FOR_HOLDER_MS = 15_000;
const FIRST_WAIT_MS = 25;
const LONGEST_WAIT_MS = 1_000;

/**
 * `Idempotency-Key` on POST, PUT and PATCH (API.md section 1): the first request under a key
 * runs and its answer is kept for 24 hours; a retry gets that answer back and writes nothing;
 * the same key with a different request is `422 idempotency_key_reused`. A request that fails
 * (`5xx`, which writes nothing) lets go of its key, so its retry runs again. A request that
 * neither answered nor let go within its lock (it died, or its answer could not be kept) may
 * have written: its retries are refused with `409 conflict`, never run again. A retry that
 * comes while the first request runs waits for its answer (up to 15 s, then `409`), so many
 * retries at once all get the one answer.
 *
 * A write of a session's log (state writes, appends, decisions) keeps its answer in the change
 * it makes (`keepAnswer`, handed to the service through RouteInput.keeper): its claim is then
 * the key's only write, and a retry finds the answer there (store/log/kept-answers.ts). Any
 * other answer, or one over 2 KiB, is kept with the claim (`complete`).
 *
 * Replays belong to the API key that made the first request: the key is part of what makes
 * two requests "the same", so another key of the tenant reusing the Idempotency-Key gets
 * `422`, never the stored answer (which its own authorization checks might have refused).
 * It runs after the acting agent (`X-Agent-Id`) is checked against the key.
 */
export function idempotency(store: () => IdempotencyStore): Middleware {
  /** Each claimed request's key, and the answer its write kept in the change it made (`keepAnswer`), if any. */
  const claims = new WeakMap<object, { key: string; fingerprint: string; kept?: string }>();
  return {
    before: async (request) => {
      const { event } = request;
      const key = event.headers?.['idempotency-key'];
      if (key === undefined || !WRITE_METHODS.has(event.requestContext.http.method)) return;
      if (!idempotencyKeyPattern.test(key)) {
        throw new AgentStateError('invalid_request', 'Idempotency-Key must be 1–255 visible ASCII characters', {
          field: 'Idempotency-Key',
        });
      }
      const tenant = event.tenant as string;
      const fingerprint = fingerprintOf(event);
      // A write of a session's log keeps its answer in the change it made (kept-answers.ts).
      const sessionId = event.pathParameters?.sid;
      const deadline = Date.now() + WAIT_FOR_HOLDER_MS;
      for (let waitMs = FIRST_WAIT_MS; ; waitMs = Math.min(waitMs * 2, LONGEST_WAIT_MS)) {
        const holder = await store().claim(tenant, key, fingerprint, IDEMPOTENCY_LOCK_MS);
        if (holder.outcome === 'claimed') {
          const claim: { key: string; fingerprint: string; kept?: string } = { key, fingerprint };
          claims.set(request, claim);
          event.keepAnswer = (response) => {
            const stored = storedResponseOf(response);
            const text = JSON.stringify(stored);
            if (Buffer.byteLength(text) > KEPT_ANSWER_LIMIT_BYTES) return null;
            claim.kept = text;
            return { claimId: holder.claim.id, response: stored };
          };
          return;
        }
        const answer = await answerOf(holder, fingerprint, () =>
          holder.outcome !== 'done' && holder.claim && sessionId ? store().recover({ tenant, sessionId }, holder.claim) : null,
        );
        if (answer)
          return { statusCode: answer.statusCode, headers: { ...answer.headers, 'idempotency-replayed': 'true' }, body: answer.body };
        // The first request is still running: its answer is the retry's, so wait for it a while.
        if (Date.now() + waitMs > deadline) {
          throw new AgentStateError('conflict', 'a request with this Idempotency-Key is still in progress; retry later');
        }
        await new Promise((resolve) => setTimeout(resolve, waitMs * (0.5 + Math.random() / 2)));
      }
    },
    after: async (request) => {
      const claim = claims.get(request);
      const response = request.response;
      if (!claim || !response) return;
      const tenant = request.event.tenant as string;
      const statusCode = response.statusCode ?? 200;
      if (statusCode >= 500) {
        await store().release(tenant, claim.key, claim.fingerprint);
        return;
      }
      const stored = storedResponseOf(response);
      // Kept by the write itself, in the change it made: the claim is all the key writes.
      if (claim.kept !== undefined && claim.kept === JSON.stringify(stored)) return;
      try {
        await store().complete(tenant, claim.key, claim.fingerprint, stored);
      } catch (error) {
        // The write is done: answer it. The key stays claimed until its lock lapses, so a
        // retry in the meantime is told to wait rather than running the write twice.
        console.warn('agentstate: could not store an idempotent response', error);
      }
    },
    onError: async (request) => {
      const claim = claims.get(request);
      if (!claim) return;
      try {
        await store().release(request.event.tenant as string, claim.key, claim.fingerprint);
      } catch (error) {
        // The lock then expires by itself; the original error is what the client must see.
        console.warn('agentstate: could not release an idempotency key', error);
      }
    },
  };
}

/**
 * The answer a request gets whose key another request holds: `422` for a different request;
 * the first answer, kept with the claim or in the change the write made (`kept`); `409` when
 * the holder never finished; null while it is still running.
 */
async function answerOf(
  holder: Exclude<IdempotencyClaim, { outcome: 'claimed' }>,
  fingerprint: string,
  kept: () => Promise<StoredResponse | null> | null,
): Promise<StoredResponse | null> {
  if (holder.fingerprint !== fingerprint) {
    throw new AgentStateError('idempotency_key_reused', 'this Idempotency-Key was used with a different request in the last 24 hours');
  }
  if (holder.outcome === 'done') return holder.response;
  const answer = await kept();
  if (answer || holder.outcome === 'in_progress') return answer;
  // Its holder may have written before it died: running the request again could undo
  // what was acknowledged since. Refused until the key expires; the caller decides.
  throw new AgentStateError(
    'conflict',
    'the first request with this Idempotency-Key never finished, so whether it was applied is unknown; it is not run again. Read what you meant to change, then send a new key',
    { field: 'Idempotency-Key' },
  );
}

/** An answer as a replay gives it back. */
function storedResponseOf(response: APIGatewayProxyStructuredResultV2): StoredResponse {
  return {
    statusCode: response.statusCode ?? 200,
    headers: Object.fromEntries(Object.entries(response.headers ?? {}).map(([name, value]) => [name, String(value)])),
    body: response.body ?? '',
  };
}

/**
 * What makes two requests "the same": the API key, method, path, query, acting agent, the
 * preconditions (If-Match, If-None-Match), whether the body is a JSON Patch (`[]` is a JSON
 * Patch that changes nothing, or a merge patch that replaces the state) and the body's JSON
 * meaning. The key enters as a digest of its digest, so the claim item holds nothing that
 * resolves a key (keys are stored as sha256 digests, api-keys.ts). If-None-Match and the JSON
 * Patch mark enter only when present, so every other request keeps the fingerprint it had
 * before they were compared, and a retry made across that upgrade still replays.
 */
function fingerprintOf(event: ApiEvent): string {
  const query = new URLSearchParams(event.rawQueryString ?? '');
  query.sort();
  const token = bearerToken(event.headers?.authorization) ?? '';
  const keyDigest = createHash('sha256').update(createHash('sha256').update(token, 'utf8').digest()).digest('hex');
  return createHash('sha256')
    .update(keyDigest)
    .update('\n')
    .update(event.requestContext.http.method)
    .update('\n')
    .update(event.rawPath)
    .update('\n')
    .update(query.toString())
    .update('\n')
    .update(event.headers?.['x-agent-id'] ?? '')
    .update('\n')
    .update(event.headers?.['if-match'] ?? '')
    .update('\n')
    .update(event.body === undefined ? '' : canonicalJson(event.body))
    .update(meaningMarks(event))
    .digest('hex');
}

/** What else changes a request's meaning, as `\n`-led lines; empty for most requests. */
function meaningMarks(event: ApiEvent): string {
  const ifNoneMatch = event.headers?.['if-none-match'];
  const mediaType = (event.headers?.['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
  return `${ifNoneMatch === undefined ? '' : `\nif-none-match:${ifNoneMatch}`}${mediaType === 'application/json-patch+json' ? '\njson-patch' : ''}`;
}
