/**
 * The webhook transport (API.md section 9): one POST of an event, signed like a worker call,
 * under the same address rules as workers (call-worker.ts):
 *
 * - `https://…` always; in AWS mode not to a non-public IP literal or a `localhost` name, and
 *   host names are checked on every connection inside the socket's DNS lookup
 *   (`publicOnlyLookup`), so the address checked is the address connected to (SSRF);
 * - `http://…` only in local mode, and only to a loopback host.
 *
 * Redirects are not followed (a redirect is a failed delivery), and the answer's body is
 * read only to free the socket.
 */
import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { AgentStateError } from '../core/errors.js';
import type { DeliveryResult, WebhookSender } from '../core/webhooks.js';
import { classifyAddress, publicOnlyLookup, signBody } from './call-worker.js';

export const WEBHOOK_TIMEOUT_MS = 5_000;
const MAX_URL_LENGTH = 2048;
/** How much of an answer is read before the socket is let go. */
const MAX_ANSWER_BYTES = 64 * 1024;

export interface WebhookTransportOptions {
  /** Local mode: http:// to loopback is allowed, and any address may be connected to. */
  allowLoopbackHttp: boolean;
  /** @default 5000 */
  timeoutMs?: number;
  /** Replaces DNS for the SSRF check (tests). */
  resolveHost?: (hostname: string) => Promise<readonly string[]>;
}

function invalid(detail: string): AgentStateError {
  return new AgentStateError('invalid_request', detail, { field: 'url' });
}

function bareHost(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

/**
 * Checks a webhook URL where it is registered; throws `400 invalid_request` (`field: "url"`).
 * Host names are checked against DNS later, on every delivery.
 */
export function validateWebhookUrl(url: string, options: { allowLoopbackHttp: boolean }): URL {
  const forms = options.allowLoopbackHttp
    ? 'url must be https://…, or http:// to localhost, 127.0.0.0/8 or ::1'
    : 'url must be https://…';
  if (typeof url !== 'string' || url === '') throw invalid(forms);
  if (url.length > MAX_URL_LENGTH) throw invalid(`url is longer than ${MAX_URL_LENGTH} characters`);
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase();
  if (scheme !== 'https' && scheme !== 'http') throw invalid(forms);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw invalid('url is not a valid URL');
  }
  if (parsed.username !== '' || parsed.password !== '') {
    throw invalid('url must not carry credentials; give the webhook a secret and verify X-AgentState-Signature instead');
  }
  const host = bareHost(parsed);
  if (host === '') throw invalid('url has no host');
  const loopback = host === 'localhost' || (isIP(host) !== 0 && classifyAddress(host) === 'loopback');

  if (parsed.protocol === 'http:') {
    if (!options.allowLoopbackHttp) throw invalid(`${forms}; http:// is not allowed here`);
    if (!loopback) throw invalid(`${forms}; http:// is allowed only to a loopback host`);
    return parsed;
  }
  if (!options.allowLoopbackHttp) {
    if (isIP(host) !== 0) {
      const kind = classifyAddress(host);
      if (kind !== 'public') throw invalid(`url must not point at a ${kind} address`);
    } else if (/(^|\.)localhost\.*$/i.test(host)) {
      throw invalid('url must not point at a loopback address');
    }
  }
  return parsed;
}

const agents = new Map<string, http.Agent>();

/** Keep-alive agents per scheme and mode; a strict (AWS) agent checks every address it dials. */
function agentFor(url: URL, options: WebhookTransportOptions): http.Agent {
  const strict = !options.allowLoopbackHttp;
  const key = `${url.protocol}${strict ? 'strict' : 'local'}`;
  let agent = agents.get(key);
  if (!agent || options.resolveHost) {
    // maxSockets bounds what one endpoint can hold per process; other hosts are unaffected.
    const settings: http.AgentOptions = { keepAlive: !options.resolveHost, maxSockets: 16 };
    if (strict) settings.lookup = publicOnlyLookup(options.resolveHost);
    agent = url.protocol === 'https:' ? new https.Agent(settings) : new http.Agent(settings);
    if (!options.resolveHost) agents.set(key, agent);
  }
  return agent;
}

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
    'content-type': 'application/json',
    'user-agent': 'agentstate',
    'content-length': String(Buffer.byteLength(body, 'utf8')),
    'x-agentstate-event-id': details.eventId,
    'x-agentstate-delivery-attempt': String(details.attempt),
  };
  if (webhook.secret) headers['x-agentstate-signature'] = signBody(webhook.secret, body);
  const transport = url.protocol === 'https:' ? https : http;

  return new Promise<DeliveryResult>((resolve) => {
    const request = transport.request(url, { method: 'POST', headers, agent: agentFor(url, options), signal }, (response) => {
      const status = response.statusCode ?? 0;
      let read = 0;
      response.on('data', (chunk: Buffer) => {
        read += chunk.length;
        if (read > MAX_ANSWER_BYTES) response.destroy();
      });
      const settle = () => {
        if (status >= 200 && status < 300) resolve({ ok: true, status });
        else if (status >= 300 && status < 400) resolve({ ok: false, error: `HTTP ${status} (a redirect; redirects are not followed)` });
        else resolve({ ok: false, error: `HTTP ${status}` });
      };
      // The status decides; an answer body cut short (or too long) does not change it.
      response.on('end', settle);
      response.on('close', settle);
      response.on('error', settle);
    });
    request.on('error', (error: NodeJS.ErrnoException) => {
      if (signal.aborted) resolve({ ok: false, error: `no answer within ${timeoutMs} ms` });
      // publicOnlyLookup refused the address (AWS mode).
      else if (error instanceof AgentStateError) resolve({ ok: false, error: `refused: ${url.hostname} resolves to a non-public address` });
      else resolve({ ok: false, error: `could not connect${error.code ? ` (${error.code})` : ''}` });
    });
    request.end(body);
  });
}
