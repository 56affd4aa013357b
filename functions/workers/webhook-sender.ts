/**
 * The webhook transport (API.md section 9): one POST of an event, signed like a worker call,
 * under the same address rules as workers (outbound.ts holds them, and the request itself):
 *
 * - `https://…` always; in AWS mode not to a non-public IP literal or a `localhost` name, and
 *   host names are checked on every connection inside the socket's DNS lookup
 *   (`publicOnlyLookup`), so the address checked is the address connected to (SSRF);
 * - `http://…` only in local mode, and only to a loopback host.
 *
 * Redirects are not followed (a redirect is a failed delivery), and at most 64 KiB of the
 * answer is read, only to free the socket: the status alone decides.
 */
import { AgentStateError } from '../core/kernel/errors.js';
import type { DeliveryResult, WebhookSender } from '../core/webhooks/records.js';
import {
  ConnectionLostError,
  connectionPool,
  NonPublicHostError,
  type OutboundPolicy,
  parseHttpUrl,
  postJson,
  SIGNATURE_HEADER,
  signBody,
  standardWebhookHeaders,
  type UrlWording,
} from './outbound.js';

const WEBHOOK_TIMEOUT_MS = 5_000;
/** How much of an answer is read before the socket is let go. */
const MAX_ANSWER_BYTES = 64 * 1024;

export interface WebhookTransportOptions extends OutboundPolicy {
  /** @default 5000 */
  timeoutMs?: number;
}

function urlWording(options: { allowLoopbackHttp: boolean }): UrlWording {
  return {
    field: 'url',
    forms: options.allowLoopbackHttp ? 'url must be https://…, or http:// to localhost, 127.0.0.0/8 or ::1' : 'url must be https://…',
    instead: 'give the webhook a secret and verify webhook-signature instead',
    loopbackOnly: 'http:// is allowed only to a loopback host',
    invalid: (detail) => new AgentStateError('invalid_request', detail, { field: 'url' }),
  };
}

/**
 * Checks a webhook URL where it is registered; throws `400 invalid_request` (`field: "url"`).
 * Host names are checked against DNS later, on every delivery.
 */
export function validateWebhookUrl(url: string, options: { allowLoopbackHttp: boolean }): URL {
  return parseHttpUrl(url, options, urlWording(options));
}

/** Webhooks get a pool of their own, smaller than the workers': deliveries are many and small. */
const agentFor = connectionPool({ maxSockets: 16 });

/** A `WebhookSender` over HTTP(S). */
export function webhookSender(options: WebhookTransportOptions): WebhookSender {
  return (webhook, body, details) => postWebhook(webhook, body, details, options);
}

/** POSTs `body` once. Never throws: every failure is a `{ ok: false, error }` for the dead letter. */
export async function postWebhook(
  webhook: { url: string; secret: string | null },
  body: string,
  details: { eventId: string; attempt: number },
  options: WebhookTransportOptions,
): Promise<DeliveryResult> {
  let url: URL;
  try {
    url = validateWebhookUrl(webhook.url, options);
  } catch (error) {
    return { ok: false, error: `not delivered: ${(error as Error).message}` };
  }
  const timeoutMs = options.timeoutMs ?? WEBHOOK_TIMEOUT_MS;
  const signal = AbortSignal.timeout(timeoutMs);
  const headers: Record<string, string> = {
    'x-agentstate-event-id': details.eventId,
    'x-agentstate-delivery-attempt': String(details.attempt),
  };
  if (webhook.secret) {
    Object.assign(headers, standardWebhookHeaders(webhook.secret, details.eventId, body));
    headers[SIGNATURE_HEADER] = signBody(webhook.secret, body);
  }

  let status: number;
  try {
    // The status decides; an answer cut short (or too long) does not change it.
    ({ status } = await postJson(url, body, {
      headers,
      agent: agentFor(url, options),
      signal,
      maxAnswerBytes: MAX_ANSWER_BYTES,
      // At once: a receiver that answers 200 and keeps its body open held its lane 5 s per event.
      statusOnly: true,
    }));
  } catch (error) {
    if (signal.aborted) return { ok: false, error: `no answer within ${timeoutMs} ms` };
    if (error instanceof NonPublicHostError) return { ok: false, error: `refused: ${url.hostname} resolves to a non-public address` };
    if (error instanceof ConnectionLostError) return { ok: false, error: error.message };
    const code = (error as NodeJS.ErrnoException).code;
    return { ok: false, error: `could not connect${code ? ` (${code})` : ''}` };
  }
  if (status >= 200 && status < 300) return { ok: true, status };
  if (status >= 300 && status < 400) return { ok: false, error: `HTTP ${status} (a redirect; redirects are not followed)` };
  return { ok: false, error: `HTTP ${status}` };
}
