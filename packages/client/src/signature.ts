/**
 * Verifying what agentstate signs (its webhook deliveries and its calls to `https://` workers)
 * as Standard Webhooks specifies (standardwebhooks.com):
 *
 *   webhook-id:        the message id (an event's `id`; the same on every redelivery)
 *   webhook-timestamp: unix seconds when this attempt was sent
 *   webhook-signature: v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>  (space-separated, several while rotating)
 *
 * The key is the secret's UTF-8 bytes, or for a `whsec_<base64>` secret the bytes it encodes.
 * A timestamp more than 5 minutes from now is refused, so a captured request cannot be
 * replayed later; deduplicate by `webhook-id` within that window. Web Crypto compares the
 * signatures in constant time. (`X-AgentState-Signature`, which signs the body alone and so
 * verifies forever, is still sent during 0.x but is not accepted here.)
 */

/** How far a signed timestamp may be from now, either way. */
export const WEBHOOK_TOLERANCE_SECONDS = 5 * 60;

export interface VerifyWebhookOptions {
  /** @default 300 (5 minutes) */
  toleranceSeconds?: number;
  /** The clock, in epoch milliseconds. @default Date.now */
  now?: () => number;
}

/** Why a request did not verify, or `ok`. */
export type WebhookVerdict =
  | { ok: true; id: string; timestamp: number }
  | { ok: false; reason: 'unsigned' | 'stale-timestamp' | 'bad-signature' };

/** A Web Crypto key (the global `CryptoKey` type is not declared in every environment). */
type HmacKey = Awaited<ReturnType<typeof globalThis.crypto.subtle.importKey>>;

/** The HMAC keys of one or more secrets (several while rotating), for `verifyWith`. */
export function signingKeys(secret: string | readonly string[]): Promise<HmacKey[]> {
  const secrets = (typeof secret === 'string' ? [secret] : [...secret]).filter((candidate) => candidate.length > 0);
  return Promise.all(secrets.map(importKey));
}

function importKey(secret: string): Promise<HmacKey> {
  const standard = /^whsec_([A-Za-z0-9+/]+={0,2})$/.exec(secret);
  const bytes = standard?.[1] ? base64Bytes(standard[1]) : new TextEncoder().encode(secret);
  return globalThis.crypto.subtle.importKey('raw', bytes, { name: 'HMAC', hash: 'SHA-256' }, false, ['verify']);
}

/** Checks a signed request against keys from `signingKeys`. */
export async function verifyWith(
  keys: readonly HmacKey[],
  request: { body: string | Uint8Array; headers: Record<string, string | string[] | undefined> },
  options: VerifyWebhookOptions = {},
): Promise<WebhookVerdict> {
  const id = header(request.headers, 'webhook-id');
  const timestampText = header(request.headers, 'webhook-timestamp');
  const signatures = header(request.headers, 'webhook-signature');
  if (!id || !timestampText || !signatures) return { ok: false, reason: 'unsigned' };
  if (!/^\d{1,15}$/.test(timestampText)) return { ok: false, reason: 'stale-timestamp' };
  const timestamp = Number(timestampText);
  const now = (options.now ?? Date.now)() / 1000;
  if (Math.abs(now - timestamp) > (options.toleranceSeconds ?? WEBHOOK_TOLERANCE_SECONDS)) return { ok: false, reason: 'stale-timestamp' };

  const body = typeof request.body === 'string' ? new TextEncoder().encode(request.body) : request.body;
  const prefix = new TextEncoder().encode(`${id}.${timestampText}.`);
  const signed = new Uint8Array(prefix.byteLength + body.byteLength);
  signed.set(prefix, 0);
  signed.set(body, prefix.byteLength);
  let valid = false;
  for (const entry of signatures.split(' ')) {
    const [version, value] = entry.split(',', 2);
    if (version !== 'v1' || !value) continue;
    let mac: Uint8Array<ArrayBuffer>;
    try {
      mac = base64Bytes(value);
    } catch {
      continue;
    }
    if (mac.byteLength !== 32) continue;
    // Every key and signature is tried, so the time taken does not tell which one matched.
    for (const key of keys) valid = (await globalThis.crypto.subtle.verify('HMAC', key, mac, signed)) || valid;
  }
  return valid ? { ok: true, id, timestamp } : { ok: false, reason: 'bad-signature' };
}

/**
 * Verifies a webhook delivery (or a worker call) from agentstate: the Standard Webhooks
 * signature with the webhook's secret, over the exact body received (verify before parsing),
 * and a timestamp within 5 minutes.
 *
 * ```ts
 * const verdict = await verifyWebhook(process.env.WEBHOOK_SECRET, { body: rawBody, headers: request.headers });
 * if (!verdict.ok) return response.writeHead(401).end();
 * ```
 */
export async function verifyWebhook(
  secret: string | readonly string[],
  request: { body: string | Uint8Array; headers: Record<string, string | string[] | undefined> },
  options: VerifyWebhookOptions = {},
): Promise<WebhookVerdict> {
  return verifyWith(await signingKeys(secret), request, options);
}

function header(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === name) return Array.isArray(value) ? value[0] : value;
  }
  return undefined;
}

function base64Bytes(text: string): Uint8Array<ArrayBuffer> {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let index = 0; index < binary.length; index++) bytes[index] = binary.charCodeAt(index);
  return bytes;
}
