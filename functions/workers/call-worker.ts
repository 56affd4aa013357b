/**
 * The worker transport of `decide` (API.md sections 6 and 7): sends one DecisionRequest to an
 * agent's worker and returns its parsed answer, or throws `worker_failed` (502) /
 * `worker_timeout` (504).
 *
 * A worker URL is one of
 * - `https://…`           POST of the JSON body; `X-AgentState-Signature: sha256=<hex>` when the
 *                         agent has a secret. Redirects are not followed.
 * - `http://…`            local mode only, and only to a loopback host (localhost, 127/8, ::1).
 * - `lambda:<arn>`        a synchronous Lambda invocation (AWS, or a local emulator through
 *                         `lambdaEndpoint`).
 * - `module:<path>`       local mode only: a module exporting `decide(request)`, imported once.
 *
 * SSRF (DESIGN.md section 5): in AWS mode (`allowLoopbackHttp: false`) an https worker must be
 * public. IP literals are checked when the URL is validated; host names are checked on every
 * connection, inside the socket's DNS lookup, so the address that is checked is the address
 * that is connected to (no window for DNS rebinding between a check and the request).
 */
import { createHmac } from 'node:crypto';
import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { AgentStateError } from '../core/errors.js';
import { workerTimeoutMs } from '../core/worker-timeout.js';

export interface WorkerConfig {
  url: string;
  secret?: string;
  timeoutMs?: number;
}

export interface WorkerCallOptions {
  /** AWS mode forbids http:// and private addresses */
  allowLoopbackHttp: boolean;
  /** Endpoint of a Lambda emulator for `lambda:` workers (`AGENTSTATE_LAMBDA_ENDPOINT`). */
  lambdaEndpoint?: string;
  /** Aborts the call (e.g. the handler's own deadline); the call then fails with `worker_timeout`. */
  signal?: AbortSignal;
  /**
   * Resolves a host name to its addresses for the SSRF check of https workers in AWS mode.
   * Defaults to `dns.lookup(host, { all: true })`; tests replace it.
   */
  resolveHost?: (hostname: string) => Promise<readonly string[]>;
}

/** The largest answer read from a worker: Lambda's own limit for a synchronous response. */
export const MAX_WORKER_RESPONSE_BYTES = 6 * 1024 * 1024;
/** How much of a worker's answer may appear in an error detail. */
const EXCERPT_CHARS = 200;
const MAX_URL_LENGTH = 2048;
const SIGNATURE_HEADER = 'X-AgentState-Signature';

const URL_FORMS = 'worker.url must be https://…, lambda:<arn> or module:<path>';
const LAMBDA_HINT = 'lambda: workers need AWS; set AGENTSTATE_LAMBDA_ENDPOINT to call a local Lambda emulator';

/* ------------------------------------------------------------------ signature */

/** `sha256=<hex HMAC-SHA256(secret, body)>`, the value of `X-AgentState-Signature`. */
export function signBody(secret: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(body, 'utf8').digest('hex')}`;
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
 * Only `'public'` addresses may be reached by a worker call in AWS mode. IPv4-mapped, NAT64
 * and 6to4 IPv6 addresses are classified by the IPv4 address they carry.
 */
export function classifyAddress(address: string): AddressClass {
  const bare = address.replace(/%.*$/, '');
  const family = isIP(bare);
  if (family === 4) return classifyV4(parseV4(bare));
  if (family === 6) return classifyV6(parseV6(bare));
  return 'invalid';
}

/** True when a worker may be called at `address` in AWS mode. */
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
  return ((ip & mask) >>> 0) === ((parseV4(base) & mask) >>> 0);
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

type ParsedWorkerUrl =
  | { kind: 'http'; url: URL }
  | { kind: 'lambda'; arn: string; region: string }
  | { kind: 'module'; path: string };

const LAMBDA_ARN = /^arn:aws[a-z-]*:lambda:([a-z]{2}(?:-[a-z]+)+-\d+):\d{12}:function:[A-Za-z0-9_-]{1,64}(?::[A-Za-z0-9$_-]{1,128})?$/;

function invalid(detail: string): AgentStateError {
  return new AgentStateError('invalid_request', detail);
}

/** The URL's host without IPv6 brackets. */
function bareHost(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

function isLoopbackHost(host: string): boolean {
  if (host === 'localhost') return true;
  return isIP(host) !== 0 && classifyAddress(host) === 'loopback';
}

function parseWorkerUrl(url: string, options: { allowLoopbackHttp: boolean }): ParsedWorkerUrl {
  if (typeof url !== 'string' || url === '') throw invalid(URL_FORMS);
  if (url.length > MAX_URL_LENGTH) throw invalid(`worker.url is longer than ${MAX_URL_LENGTH} characters`);
  const local = options.allowLoopbackHttp;

  if (url.startsWith('lambda:')) {
    const arn = url.slice('lambda:'.length);
    const match = LAMBDA_ARN.exec(arn);
    if (!match?.[1]) {
      throw invalid('worker.url lambda:<arn> needs a Lambda function ARN, arn:aws:lambda:<region>:<account>:function:<name>[:<qualifier>]');
    }
    return { kind: 'lambda', arn, region: match[1] };
  }

  if (url.startsWith('module:')) {
    if (!local) throw invalid('module: workers run only in the local server; in AWS use https:// or lambda:<arn>');
    const modulePath = url.slice('module:'.length);
    if (modulePath.trim() === '' || modulePath.includes('\0')) throw invalid('worker.url module:<path> needs a path');
    return { kind: 'module', path: modulePath };
  }

  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase();
  if (scheme !== 'https' && scheme !== 'http') throw invalid(URL_FORMS);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw invalid(`worker.url is not a valid URL`);
  }
  if (parsed.username !== '' || parsed.password !== '') {
    throw invalid('worker.url must not carry credentials; give the agent a worker.secret instead');
  }
  const host = bareHost(parsed);
  if (host === '') throw invalid('worker.url has no host');

  if (parsed.protocol === 'http:') {
    if (!local) throw invalid(`${URL_FORMS}; http:// is not allowed here`);
    if (!isLoopbackHost(host)) throw invalid(`${URL_FORMS}; http:// is allowed only to localhost, 127.0.0.0/8 or ::1`);
    return { kind: 'http', url: parsed };
  }

  if (!local) {
    if (isIP(host) !== 0) {
      const kind = classifyAddress(host);
      if (kind !== 'public') throw invalid(`worker.url must not point at a ${kind} address`);
    } else if (/(^|\.)localhost\.*$/i.test(host)) {
      throw invalid('worker.url must not point at a loopback address');
    }
  }
  return { kind: 'http', url: parsed };
}

/**
 * Checks a worker URL when an agent is registered: throws `invalid_request` unless it is
 * `https://…` (in AWS mode not at a non-public IP literal), `http://` to a loopback host (local
 * mode only), `lambda:<function arn>`, or `module:<path>` (local mode only). Host names are
 * checked against DNS later, on every call.
 */
export function validateWorkerUrl(url: string, options: { allowLoopbackHttp: boolean }): void {
  parseWorkerUrl(url, options);
}

/* ------------------------------------------------------------------ the call */

/** Sends `body` (already-serialized JSON text of the DecisionRequest) to the worker; returns the parsed JSON answer. */
export async function callWorker(worker: WorkerConfig, body: string, options: WorkerCallOptions): Promise<unknown> {
  let target: ParsedWorkerUrl;
  try {
    target = parseWorkerUrl(worker.url, options);
  } catch (error) {
    // Registered under other rules (or edited behind our back): the worker cannot be called.
    const detail = error instanceof AgentStateError ? error.message : URL_FORMS;
    throw new AgentStateError('worker_failed', `the agent's worker cannot be called: ${detail}`);
  }
  const timeoutMs = workerTimeoutMs(worker);
  const timeout = AbortSignal.timeout(timeoutMs);
  const signal = options.signal ? AbortSignal.any([timeout, options.signal]) : timeout;
  const call = { timeoutMs, timeout, signal };

  try {
    switch (target.kind) {
      case 'http':
        return await callHttp(target.url, worker.secret, body, options, call);
      case 'lambda':
        return await callLambda(target, body, options, call);
      case 'module':
        return await callModule(target.path, body, call);
    }
  } catch (error) {
    throw toWorkerError(error, call, options.signal);
  }
}

interface CallContext {
  timeoutMs: number;
  timeout: AbortSignal;
  signal: AbortSignal;
}

function toWorkerError(error: unknown, call: CallContext, callerSignal: AbortSignal | undefined): AgentStateError {
  if (call.timeout.aborted) {
    return new AgentStateError('worker_timeout', `the worker did not answer within ${call.timeoutMs} ms`);
  }
  if (callerSignal?.aborted) {
    const reason: unknown = callerSignal.reason;
    if (reason instanceof AgentStateError) return reason;
    return new AgentStateError('worker_timeout', 'the worker did not answer before the request had to end');
  }
  if (error instanceof AgentStateError) return error;
  return new AgentStateError('worker_failed', 'the worker call failed', {}, { cause: error });
}

function failed(detail: string, cause?: unknown): AgentStateError {
  return new AgentStateError('worker_failed', detail, {}, cause === undefined ? undefined : { cause });
}

/** At most ~200 characters of a worker's text, on one line, for an error detail. */
function excerpt(text: string): string {
  // eslint-disable-next-line no-control-regex
  const line = text.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
  return line.length > EXCERPT_CHARS ? `${line.slice(0, EXCERPT_CHARS)}…` : line;
}

/** The parsed answer, which must be a JSON object. */
function parseAnswer(text: string, from: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    const shown = excerpt(text);
    throw failed(`${from} is not JSON${shown === '' ? ' (empty body)' : `: ${shown}`}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw failed(`${from} is JSON but not an object (got ${describe(value)}); a DecisionResponse is an object`);
  }
  return value as Record<string, unknown>;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return `a ${typeof value}`;
}

/* ------------------------------------------------------------------ https:// and loopback http:// */

/**
 * A socket `lookup` that refuses to connect to any non-public address (AWS mode): it fails with
 * `worker_failed` unless every address the host resolves to is public. Exported for tests.
 */
export function publicOnlyLookup(resolveHost: WorkerCallOptions['resolveHost']): LookupFunction {
  const resolve =
    resolveHost ??
    ((hostname: string) =>
      new Promise<string[]>((done, fail) => {
        const all: LookupAllOptions = { all: true };
        dnsLookup(hostname, all, (error, addresses: LookupAddress[]) =>
          error ? fail(error) : done(addresses.map((entry) => entry.address)),
        );
      }));
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
          callback(failed(`the worker's host ${hostname} resolves to a non-public address; refused`), '', 0);
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

const agents = new Map<string, http.Agent>();

/** Keep-alive agents, one per scheme and mode, so a socket opened without the SSRF check is never reused with it. */
function agentFor(url: URL, options: WorkerCallOptions): http.Agent {
  const strict = !options.allowLoopbackHttp;
  const key = `${url.protocol}${strict ? 'strict' : 'local'}`;
  let agent = agents.get(key);
  if (!agent || options.resolveHost) {
    // A custom resolver (tests) gets an agent of its own, without sockets kept alive.
    const settings: http.AgentOptions = { keepAlive: !options.resolveHost, maxSockets: 64 };
    if (strict) settings.lookup = publicOnlyLookup(options.resolveHost);
    agent = url.protocol === 'https:' ? new https.Agent(settings) : new http.Agent(settings);
    if (!options.resolveHost) agents.set(key, agent);
  }
  return agent;
}

function callHttp(url: URL, secret: string | undefined, body: string, options: WorkerCallOptions, call: CallContext) {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json',
    'user-agent': 'agentstate',
    'content-length': String(Buffer.byteLength(body, 'utf8')),
  };
  if (secret) headers[SIGNATURE_HEADER] = signBody(secret, body);
  const transport = url.protocol === 'https:' ? https : http;
  const agent = agentFor(url, options);

  return new Promise<Record<string, unknown>>((resolve, reject) => {
    const request = transport.request(url, { method: 'POST', headers, agent, signal: call.signal }, (response) => {
      const status = response.statusCode ?? 0;
      const chunks: Buffer[] = [];
      let size = 0;
      response.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_WORKER_RESPONSE_BYTES) {
          reject(failed(`the worker's answer is larger than ${MAX_WORKER_RESPONSE_BYTES} bytes`));
          response.destroy();
          return;
        }
        chunks.push(chunk);
      });
      response.on('error', reject);
      response.on('aborted', () => reject(failed('the worker closed the connection before its answer was complete')));
      response.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        if (status >= 300 && status < 400) {
          reject(failed(`the worker answered HTTP ${status} (a redirect); redirects are not followed`));
        } else if (status < 200 || status >= 300) {
          const shown = excerpt(text);
          reject(failed(`the worker answered HTTP ${status}${shown === '' ? '' : `: ${shown}`}`));
        } else {
          try {
            resolve(parseAnswer(text, `the worker's answer (HTTP ${status})`));
          } catch (error) {
            reject(error);
          }
        }
      });
    });
    request.on('error', (error: NodeJS.ErrnoException) => {
      if (error instanceof AgentStateError) reject(error);
      else reject(failed(`could not reach the worker${error.code ? ` (${error.code})` : ''}`, error));
    });
    request.end(body);
  });
}

/* ------------------------------------------------------------------ lambda:<arn> */

type LambdaModule = typeof import('@aws-sdk/client-lambda');
let lambdaModule: Promise<LambdaModule> | undefined;
const lambdaClients = new Map<string, InstanceType<LambdaModule['LambdaClient']>>();

async function lambdaClient(region: string, endpoint: string | undefined) {
  lambdaModule ??= import('@aws-sdk/client-lambda');
  const { LambdaClient } = await lambdaModule;
  const key = `${region} ${endpoint ?? ''}`;
  let client = lambdaClients.get(key);
  if (!client) {
    client = new LambdaClient({
      region,
      ...(endpoint
        ? {
            endpoint,
            // An emulator takes any credentials, but the SDK insists on having some.
            ...(process.env.AWS_ACCESS_KEY_ID ? {} : { credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }),
          }
        : {}),
    });
    lambdaClients.set(key, client);
  }
  return { client, InvokeCommand: (await lambdaModule).InvokeCommand };
}

async function callLambda(
  target: { arn: string; region: string },
  body: string,
  options: WorkerCallOptions,
  call: CallContext,
): Promise<Record<string, unknown>> {
  if (options.allowLoopbackHttp && !options.lambdaEndpoint) throw failed(LAMBDA_HINT);
  const { client, InvokeCommand } = await lambdaClient(target.region, options.lambdaEndpoint);
  let output;
  try {
    output = await client.send(
      new InvokeCommand({
        FunctionName: target.arn,
        InvocationType: 'RequestResponse',
        Payload: new TextEncoder().encode(body),
      }),
      { abortSignal: call.signal },
    );
  } catch (error) {
    if (call.signal.aborted) throw error;
    const name = error instanceof Error ? error.name : 'Error';
    throw failed(`the Lambda invocation failed (${name})`, error);
  }
  const text = output.Payload ? new TextDecoder().decode(output.Payload) : '';
  if (output.FunctionError) {
    let message = '';
    try {
      const payload = JSON.parse(text) as { errorType?: unknown; errorMessage?: unknown };
      message = [payload.errorType, payload.errorMessage].filter((part) => typeof part === 'string').join(': ');
    } catch {
      message = text;
    }
    const shown = excerpt(message);
    throw failed(`the worker's Lambda function failed (${output.FunctionError})${shown === '' ? '' : `: ${shown}`}`);
  }
  return parseAnswer(text, "the worker's Lambda answer");
}

/* ------------------------------------------------------------------ module:<path> */

type DecideFunction = (request: unknown) => unknown;
const modules = new Map<string, Promise<DecideFunction>>();

function loadModule(modulePath: string): Promise<DecideFunction> {
  const absolute = path.resolve(process.cwd(), modulePath);
  let loading = modules.get(absolute);
  if (!loading) {
    loading = import(/* @vite-ignore */ pathToFileURL(absolute).href).then(
      (loaded: { decide?: unknown; default?: { decide?: unknown } }) => {
        const decide = loaded.decide ?? loaded.default?.decide;
        if (typeof decide !== 'function') throw failed(`the module worker ${modulePath} does not export a decide function`);
        return decide as DecideFunction;
      },
      (error: unknown) => {
        const message = error instanceof Error ? `: ${excerpt(error.message)}` : '';
        throw failed(`could not load the module worker ${modulePath}${message}`, error);
      },
    );
    modules.set(absolute, loading);
    // A module that failed to load is tried again next time (the file may have been fixed).
    loading.catch(() => modules.delete(absolute));
  }
  return loading;
}

function whenAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    else signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}

async function callModule(modulePath: string, body: string, call: CallContext): Promise<Record<string, unknown>> {
  const aborted = whenAborted(call.signal);
  aborted.catch(() => {}); // handled by the race below, or not needed at all
  const decide = await Promise.race([loadModule(modulePath), aborted]);
  const request: unknown = JSON.parse(body);
  let answer: unknown;
  try {
    // The module keeps running after a timeout; its late answer is ignored.
    answer = await Promise.race([Promise.resolve().then(() => decide(request)), aborted]);
  } catch (error) {
    if (call.signal.aborted) throw error;
    const message = error instanceof Error ? excerpt(error.message) : excerpt(String(error));
    throw failed(`the module worker's decide threw${message === '' ? '' : `: ${message}`}`, error);
  }
  // Through JSON, exactly as an https worker's answer: drops undefined, copies the object.
  let text: string | undefined;
  try {
    text = JSON.stringify(answer);
  } catch (error) {
    throw failed("the module worker's answer cannot be serialized as JSON", error);
  }
  if (text === undefined) throw failed(`the module worker's answer is not JSON (got ${describe(answer)})`);
  return parseAnswer(text, "the module worker's answer");
}
