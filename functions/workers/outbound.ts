/**
 * Everything agentstate needs to call out over HTTP safely, for both of its outbound calls:
 * worker calls (call-worker.ts) and webhook deliveries (webhook-sender.ts). One copy of the
 * address rules, the URL rules, the connection pools, the request itself and the signature, so
 * that a worker and a webhook can never be held to different SSRF rules.
 *
 * SSRF (DESIGN.md section 5): in AWS mode (`allowLoopbackHttp: false`) only public addresses
 * may be reached. IP literals are refused when a URL is validated; host names are checked on
 * every connection, inside the socket's DNS lookup, so the address that is checked is the
 * address that is connected to (no window for DNS rebinding between a check and the request).
 * Locally (`allowLoopbackHttp: true`) http:// is allowed too, but only to a loopback host.
 */
import { isUtf8 } from 'node:buffer';
import { createHmac } from 'node:crypto';
import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { AgentStateError } from '../core/kernel/errors.js';

/** Resolves a host name to its addresses; replaces DNS in tests. */
export type HostResolver = (hostname: string) => Promise<readonly string[]>;

/** Which addresses an outbound call may reach. */
export interface OutboundPolicy {
  /** Local mode: http:// to loopback is allowed, and any address may be connected to. AWS mode: public https only. */
  allowLoopbackHttp: boolean;
  /**
   * Resolves host names for the SSRF check in AWS mode. Defaults to
   * `dns.lookup(host, { all: true })`; tests replace it.
   */
  resolveHost?: HostResolver;
}

/* ------------------------------------------------------------------ signature */

/** The header that carries `signBody`'s value on worker calls and webhook deliveries (0.x). */
export const SIGNATURE_HEADER = 'X-AgentState-Signature';

/**
 * `sha256=<hex HMAC-SHA256(secret, body)>`, the value of `X-AgentState-Signature`. Kept during
 * 0.x beside the Standard Webhooks headers; it signs the body alone, so a captured request
 * verifies forever: receivers should check `webhook-signature` instead.
 */
export function signBody(secret: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(body, 'utf8').digest('hex')}`;
}

/**
 * The HMAC key of a secret: its UTF-8 bytes, or for a secret in Standard Webhooks' own form,
 * `whsec_<base64>`, the bytes it encodes (so the reference verifiers work unchanged).
 */
function signingKey(secret: string): Buffer {
  const match = /^whsec_([A-Za-z0-9+/]+={0,2})$/.exec(secret);
  return match?.[1] ? Buffer.from(match[1], 'base64') : Buffer.from(secret, 'utf8');
}

/**
 * The Standard Webhooks headers (standardwebhooks.com) of one signed request: `webhook-id`
 * (`id`, the same on every retry of the same message), `webhook-timestamp` (unix seconds of
 * this attempt) and `webhook-signature: v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`.
 * The timestamp is signed, so a receiver that refuses old timestamps refuses replays.
 */
export function standardWebhookHeaders(secret: string, id: string, body: string, now: Date = new Date()): Record<string, string> {
  const timestamp = String(Math.floor(now.getTime() / 1000));
  const signature = createHmac('sha256', signingKey(secret)).update(`${id}.${timestamp}.${body}`, 'utf8').digest('base64');
  return { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': `v1,${signature}` };
}

/* ------------------------------------------------------------------ address classification */

export type AddressClass =
  | 'public'
  | 'private' // RFC 1918, deprecated IPv6 site-local
  | 'loopback'
  | 'link-local'
  | 'unique-local'
  | 'cgnat' // 100.64.0.0/10
  | 'unspecified' // 0.0.0.0/8, ::
  | 'multicast'
  | 'reserved' // documentation, benchmarking, future use, broadcast, tunnels, non-global IPv6
  | 'invalid';

/**
 * Classifies an IP address (v4 or v6, without brackets; an IPv6 zone `%eth0` is ignored).
 * Only `'public'` addresses may be reached in AWS mode. IPv4-mapped, NAT64 and 6to4 IPv6
 * addresses are classified by the IPv4 address they carry.
 */
export function classifyAddress(address: string): AddressClass {
  const bare = address.replace(/%.*$/, '');
  const family = isIP(bare);
  if (family === 4) return classifyV4(parseV4(bare));
  if (family === 6) return classifyV6(parseV6(bare));
  return 'invalid';
}

/** True when an outbound call may reach `address` in AWS mode. */
export function isPublicAddress(address: string): boolean {
  return classifyAddress(address) === 'public';
}

function parseV4(address: string): number {
  const [a = 0, b = 0, c = 0, d = 0] = address.split('.').map(Number);
  return ((a << 24) | (b << 16) | (c << 8) | d) >>> 0;
}

/** True when `ip` lies in `base/bits`. */
function inV4(ip: number, base: string, bits: number): boolean {
  const mask = bits === 0 ? 0 : (~0 << (32 - bits)) >>> 0;
  return (ip & mask) >>> 0 === (parseV4(base) & mask) >>> 0;
}

function classifyV4(ip: number): AddressClass {
  if (inV4(ip, '0.0.0.0', 8)) return 'unspecified';
  if (inV4(ip, '127.0.0.0', 8)) return 'loopback';
  if (inV4(ip, '10.0.0.0', 8) || inV4(ip, '172.16.0.0', 12) || inV4(ip, '192.168.0.0', 16)) return 'private';
  if (inV4(ip, '169.254.0.0', 16)) return 'link-local';
  if (inV4(ip, '100.64.0.0', 10)) return 'cgnat';
  if (inV4(ip, '224.0.0.0', 4)) return 'multicast';
  if (
    inV4(ip, '192.0.0.0', 24) || // IETF protocol assignments
    inV4(ip, '192.0.2.0', 24) || // TEST-NET-1
    inV4(ip, '198.51.100.0', 24) || // TEST-NET-2
    inV4(ip, '203.0.113.0', 24) || // TEST-NET-3
    inV4(ip, '198.18.0.0', 15) || // benchmarking
    inV4(ip, '192.88.99.0', 24) || // 6to4 relay anycast (deprecated)
    inV4(ip, '240.0.0.0', 4) // future use and 255.255.255.255
  ) {
    return 'reserved';
  }
  return 'public';
}

/** The eight 16-bit groups of a valid IPv6 address (validity checked by `isIP` first). */
function parseV6(address: string): number[] {
  let text = address.toLowerCase();
  // A dotted IPv4 tail (::ffff:10.0.0.1) becomes two hex groups.
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted?.[1]) {
    const v4 = parseV4(dotted[1]);
    text = `${text.slice(0, dotted.index)}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((group) => Number.parseInt(group, 16)));
  const left = parse(head);
  if (tail === undefined) return left;
  const right = parse(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

function v4FromGroups(high: number, low: number): number {
  return ((high << 16) | low) >>> 0;
}

function classifyV6(groups: number[]): AddressClass {
  const g = (index: number) => groups[index] ?? 0;
  const allZeroUpTo = (end: number) => groups.slice(0, end).every((group) => group === 0);

  if (allZeroUpTo(8)) return 'unspecified';
  if (allZeroUpTo(7) && g(7) === 1) return 'loopback';
  // ::ffff:a.b.c.d (IPv4-mapped) and ::ffff:0:a.b.c.d (IPv4-translated)
  if (allZeroUpTo(5) && g(5) === 0xffff) return classifyV4(v4FromGroups(g(6), g(7)));
  if (allZeroUpTo(4) && g(4) === 0xffff && g(5) === 0) return classifyV4(v4FromGroups(g(6), g(7)));
  // 64:ff9b::/96, the well-known NAT64 prefix, carries an IPv4 address
  if (g(0) === 0x64 && g(1) === 0xff9b && g(2) === 0 && g(3) === 0 && g(4) === 0 && g(5) === 0) {
    return classifyV4(v4FromGroups(g(6), g(7)));
  }
  // ::a.b.c.d (IPv4-compatible, deprecated), 64:ff9b:1::/48 (local-use NAT64), the rest of ::/8
  if (g(0) < 0x0100) return 'reserved';
  if ((g(0) & 0xff00) === 0xff00) return 'multicast';
  if ((g(0) & 0xffc0) === 0xfe80) return 'link-local';
  if ((g(0) & 0xffc0) === 0xfec0) return 'private'; // site-local, deprecated
  if ((g(0) & 0xfe00) === 0xfc00) return 'unique-local';
  // 2002::/16 (6to4) carries an IPv4 address in its next 32 bits
  if (g(0) === 0x2002) return classifyV4(v4FromGroups(g(1), g(2)));
  if (g(0) === 0x2001 && g(1) === 0x0db8) return 'reserved'; // documentation
  if (g(0) === 0x2001 && g(1) < 0x0200) return 'reserved'; // IETF protocol assignments, Teredo, ORCHID
  if (g(0) === 0x3fff && g(1) < 0x1000) return 'reserved'; // documentation (RFC 9637)
  // Only global unicast, 2000::/3, is public.
  if ((g(0) & 0xe000) !== 0x2000) return 'reserved';
  return 'public';
}

/* ------------------------------------------------------------------ URL validation */

const MAX_URL_LENGTH = 2048;

/** How a URL's problems are worded for the thing it belongs to (a worker, a webhook). */
export interface UrlWording {
  /** The URL's name in a detail: `worker.url`, `url`. */
  field: string;
  /** The accepted forms: the detail for a URL of any other shape. */
  forms: string;
  /** What to do instead of putting credentials in the URL. */
  instead: string;
  /** Added to `forms` when http:// names a host that is not loopback. */
  loopbackOnly: string;
  /** The error a problem becomes (its code and extras). */
  invalid: (detail: string) => AgentStateError;
}

/** Refuses anything but a non-empty string of at most `MAX_URL_LENGTH` characters. */
export function checkUrlText(url: unknown, wording: UrlWording): asserts url is string {
  if (typeof url !== 'string' || url === '') throw wording.invalid(wording.forms);
  if (url.length > MAX_URL_LENGTH) throw wording.invalid(`${wording.field} is longer than ${MAX_URL_LENGTH} characters`);
}

/** The URL's host without IPv6 brackets. */
function bareHost(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

function isLoopbackHost(host: string): boolean {
  if (host === 'localhost') return true;
  return isIP(host) !== 0 && classifyAddress(host) === 'loopback';
}

/**
 * Checks an https:// (or, locally, loopback http://) URL where it is registered and before
 * every call: no credentials, a host, and in AWS mode no IP literal that is not public and no
 * `localhost` name. Host names are checked against DNS later, on every connection.
 */
export function parseHttpUrl(url: unknown, policy: Pick<OutboundPolicy, 'allowLoopbackHttp'>, wording: UrlWording): URL {
  checkUrlText(url, wording);
  const { field, invalid } = wording;
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase();
  if (scheme !== 'https' && scheme !== 'http') throw invalid(wording.forms);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw invalid(`${field} is not a valid URL`);
  }
  if (parsed.username !== '' || parsed.password !== '') {
    throw invalid(`${field} must not carry credentials; ${wording.instead}`);
  }
  const host = bareHost(parsed);
  if (host === '') throw invalid(`${field} has no host`);

  if (parsed.protocol === 'http:') {
    if (!policy.allowLoopbackHttp) throw invalid(`${wording.forms}; http:// is not allowed here`);
    if (!isLoopbackHost(host)) throw invalid(`${wording.forms}; ${wording.loopbackOnly}`);
    return parsed;
  }
  if (!policy.allowLoopbackHttp) {
    if (isIP(host) !== 0) {
      const kind = classifyAddress(host);
      if (kind !== 'public') throw invalid(`${field} must not point at a ${kind} address`);
    } else if (/(^|\.)localhost\.*$/i.test(host)) {
      throw invalid(`${field} must not point at a loopback address`);
    }
  }
  return parsed;
}

/* ------------------------------------------------------------------ public-only lookup */

/**
 * What a public-only lookup fails the connection with: the host resolves to an address that
 * is not public. A `502 worker_failed` like any outbound call that could not be made; each
 * transport words it for its own caller.
 */
export class NonPublicHostError extends AgentStateError {
  constructor(readonly hostname: string) {
    super('worker_failed', `${hostname} resolves to a non-public address; refused`);
  }
}

function dnsResolver(hostname: string): Promise<string[]> {
  return new Promise<string[]>((done, fail) => {
    const all: LookupAllOptions = { all: true };
    dnsLookup(hostname, all, (error, addresses: LookupAddress[]) => (error ? fail(error) : done(addresses.map((entry) => entry.address))));
  });
}

/**
 * A socket `lookup` that refuses to connect to any non-public address (AWS mode): it fails
 * with `NonPublicHostError` unless every address the host resolves to is public.
 */
export function publicOnlyLookup(resolveHost: HostResolver | undefined): LookupFunction {
  const resolve = resolveHost ?? dnsResolver;
  return (hostname, lookupOptions, callback) => {
    resolve(hostname).then(
      (addresses) => {
        const family = lookupOptions.family === 'IPv4' ? 4 : lookupOptions.family === 'IPv6' ? 6 : lookupOptions.family;
        const usable = addresses.filter((address) => !family || isIP(address) === family);
        if (usable.length === 0) {
          const error: NodeJS.ErrnoException = new Error(`no address for ${hostname}`);
          error.code = 'ENOTFOUND';
          callback(error, '', 0);
          return;
        }
        // Every address must be public, not just the one picked: a name that mixes public and
        // private answers is a rebinding attempt or a misconfiguration either way.
        if (!addresses.every(isPublicAddress)) {
          callback(new NonPublicHostError(hostname), '', 0);
          return;
        }
        if (lookupOptions.all) {
          callback(null, usable.map((address) => ({ address, family: isIP(address) })) as never);
        } else {
          const first = usable[0] as string;
          callback(null, first, isIP(first));
        }
      },
      (error: unknown) => callback(error as NodeJS.ErrnoException, '', 0),
    );
  };
}

/* ------------------------------------------------------------------ connection pools */

/**
 * A pool of keep-alive agents, one per scheme and mode, so that a socket opened without the
 * SSRF check (local mode) is never reused with it; a strict (AWS) agent checks every address
 * it dials. Each transport has its own pool, and `maxSockets` bounds what one endpoint can
 * hold per process, so a slow worker never delays a webhook and neither delays other hosts.
 */
export function connectionPool(settings: { maxSockets: number }): (url: URL, policy: OutboundPolicy) => http.Agent {
  const agents = new Map<string, http.Agent>();
  return (url, policy) => {
    const strict = !policy.allowLoopbackHttp;
    const key = `${url.protocol}${strict ? 'strict' : 'local'}`;
    let agent = agents.get(key);
    if (!agent || policy.resolveHost) {
      // A custom resolver (tests) gets an agent of its own, without sockets kept alive.
      const options: http.AgentOptions = { keepAlive: !policy.resolveHost, maxSockets: settings.maxSockets };
      if (strict) options.lookup = publicOnlyLookup(policy.resolveHost);
      agent = url.protocol === 'https:' ? new https.Agent(options) : new http.Agent(options);
      if (!policy.resolveHost) agents.set(key, agent);
    }
    return agent;
  };
}

/* ------------------------------------------------------------------ the request */

/** How a POST's answer ended: read whole, cut off at the size limit, or cut short by the peer. */
export type OutboundAnswer =
  /** `text` is the body decoded as UTF-8; `utf8` is false when the bytes were not UTF-8 (then U+FFFD stand in). */
  | { kind: 'answered'; status: number; text: string; utf8: boolean }
  | { kind: 'too-large'; status: number }
  | { kind: 'cut'; status: number; error?: unknown };

/** With `statusOnly`: the status, as soon as it came; the body is read and dropped behind it. */
export interface StatusAnswer {
  kind: 'status';
  status: number;
}

export interface PostOptions {
  /** Sent after the JSON content type, `user-agent` and `content-length`. */
  headers: Record<string, string>;
  agent: http.Agent;
  /** Ends the request (connecting, sending or reading); the promise then rejects or cuts. */
  signal: AbortSignal;
  /** The most of an answer that is read; the socket is let go beyond it. */
  maxAnswerBytes: number;
  /**
   * Only the status matters (a webhook delivery): resolve as soon as it arrives. The body is
   * drained and dropped behind the answer, so a receiver that keeps it open holds a socket
   * until `signal` ends it, but never the delivery (nor its lane) waiting for it.
   */
  statusOnly?: boolean;
}

/**
 * The peer took the connection (it was open, the request on its way) and it ended before any
 * answer: a reset mid-request is not a host that could not be reached, and a dead letter or a
 * worker failure says which it was. `code` is the socket error's (`ECONNRESET`).
 */
export class ConnectionLostError extends Error {
  readonly code: string | undefined;
  constructor(cause: unknown) {
    const code = (cause as NodeJS.ErrnoException).code;
    super(`connection lost before an answer${code ? ` (${code})` : ''}`, { cause });
    this.name = 'ConnectionLostError';
    this.code = code;
  }
}

/**
 * POSTs `body` (JSON text) once. Redirects are not followed: a 3xx is an answer like any other.
 * Rejects when no answer began (the connection failed, the lookup refused, the signal ended
 * it; `ConnectionLostError` when the connection was open and ended); once the status is in,
 * always resolves, with how the answer ended.
 */
export function postJson(url: URL, body: string, options: PostOptions & { statusOnly: true }): Promise<StatusAnswer>;
export function postJson(url: URL, body: string, options: PostOptions): Promise<OutboundAnswer>;
export function postJson(url: URL, body: string, options: PostOptions): Promise<OutboundAnswer | StatusAnswer> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': 'agentstate',
    'content-length': String(Buffer.byteLength(body, 'utf8')),
    ...options.headers,
  };
  const transport = url.protocol === 'https:' ? https : http;
  return new Promise<OutboundAnswer | StatusAnswer>((resolve, reject) => {
    let status: number | undefined;
    const request = transport.request(url, { method: 'POST', headers, agent: options.agent, signal: options.signal }, (response) => {
      const answered = response.statusCode ?? 0;
      status = answered;
      if (options.statusOnly) {
        resolve({ kind: 'status', status: answered });
        response.on('error', () => {}).resume();
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      response.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > options.maxAnswerBytes) {
          resolve({ kind: 'too-large', status: answered });
          response.destroy();
          return;
        }
        chunks.push(chunk);
      });
      // The first of these settles the answer; the ones after it change nothing.
      response.on('error', (error) => resolve({ kind: 'cut', status: answered, error }));
      response.on('aborted', () => resolve({ kind: 'cut', status: answered }));
      response.on('end', () => {
        const bytes = Buffer.concat(chunks);
        resolve({ kind: 'answered', status: answered, text: bytes.toString('utf8'), utf8: isUtf8(bytes) });
      });
      response.on('close', () => resolve({ kind: 'cut', status: answered }));
    });
    // Open: connected now, or a kept-alive socket that was already.
    let connected = false;
    request.on('socket', (socket) => {
      if (!socket.connecting) connected = true;
      else socket.once('connect', () => (connected = true));
    });
    // The signal's abort of a body that never ends reaches the request first: the status is in.
    request.on('error', (error) => {
      const answered = status;
      if (answered !== undefined) resolve({ kind: 'cut', status: answered, error });
      else reject(connected && !options.signal.aborted ? new ConnectionLostError(error) : error);
    });
    request.end(body);
  });
}
