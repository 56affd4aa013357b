/**
 * The worker transport of `decide` (API.md sections 6 and 7): sends one DecisionRequest to an
 * agent's worker and returns its parsed answer, or throws `worker_failed` (502) /
 * `worker_timeout` (504).
 *
 * A worker URL is one of
 * - `https://…`           POST of the JSON body, signed when the agent has a secret: the
 *                         Standard Webhooks headers (`webhook-id`, `webhook-timestamp`,
 *                         `webhook-signature`) and, during 0.x, `X-AgentState-Signature`.
 *                         Redirects are not followed.
 * - `http://…`            local mode only, and only to a loopback host (localhost, 127/8, ::1).
 * - `lambda:<arn>`        a synchronous Lambda invocation (AWS, or a local emulator through
 *                         `lambdaEndpoint`).
 * - `module:<path>`       local mode only: a module exporting `decide(request)`, imported once,
 *                         from the module directories only (module-worker.ts).
 *
 * SSRF (DESIGN.md section 5): in AWS mode (`allowLoopbackHttp: false`) an https worker must be
 * public, under the same rules as a webhook; outbound.ts holds them, and the request itself.
 */
import { createHash } from 'node:crypto';
import type { InvokeCommandOutput } from '@aws-sdk/client-lambda';
import { AgentStateError } from '../core/errors.js';
import { isJsonObject, JsonTextError, parseJson } from '../core/json.js';
import { workerTimeoutMs } from '../core/worker-timeout.js';
import { AWS_CALL_TIMEOUTS } from '../store/client.js';
import { allowedModulePath, callModule, type ModuleDirs, ModuleRefusedError, moduleDirsFromEnv } from './module-worker.js';
import {
  checkUrlText,
  connectionPool,
  NonPublicHostError,
  type OutboundAnswer,
  type OutboundPolicy,
  parseHttpUrl,
  postJson,
  SIGNATURE_HEADER,
  signBody,
  standardWebhookHeaders,
  type UrlWording,
} from './outbound.js';

export interface WorkerConfig {
  url: string;
  secret?: string;
  timeoutMs?: number;
}

/** `allowLoopbackHttp: false` (AWS mode) forbids http:// and non-public addresses (outbound.ts). */
export interface WorkerCallOptions extends OutboundPolicy {
  /**
   * Where `module:` workers may be loaded from (local mode).
   * @default `AGENTSTATE_MODULE_DIRS`, else `examples` and `workers` of the current directory
   */
  moduleDirs?: ModuleDirs;
  /** Endpoint of a Lambda emulator for `lambda:` workers (`AGENTSTATE_LAMBDA_ENDPOINT`). */
  lambdaEndpoint?: string;
  /** Aborts the call (e.g. the handler's own deadline); the call then fails with `worker_timeout`. */
  signal?: AbortSignal;
  /** This call's `webhook-id` (the same on a retry of the same message). @default a digest of the body */
  messageId?: string;
}

/** The largest answer read from a worker: Lambda's own limit for a synchronous response. */
const MAX_WORKER_RESPONSE_BYTES = 6 * 1024 * 1024;
/** How much of a worker's answer may appear in an error detail. */
const EXCERPT_CHARS = 200;

const URL_FORMS = 'worker.url must be https://…, lambda:<arn> or module:<path>';
const LAMBDA_HINT = 'lambda: workers need AWS; set AGENTSTATE_LAMBDA_ENDPOINT to call a local Lambda emulator';

/* ------------------------------------------------------------------ URL validation */

type ParsedWorkerUrl = { kind: 'http'; url: URL } | { kind: 'lambda'; arn: string; region: string } | { kind: 'module'; path: string };

const LAMBDA_ARN = /^arn:aws[a-z-]*:lambda:([a-z]{2}(?:-[a-z]+)+-\d+):\d{12}:function:[A-Za-z0-9_-]{1,64}(?::[A-Za-z0-9$_-]{1,128})?$/;

const URL_WORDING: UrlWording = {
  field: 'worker.url',
  forms: URL_FORMS,
  instead: 'give the agent a worker.secret instead',
  loopbackOnly: 'http:// is allowed only to localhost, 127.0.0.0/8 or ::1',
  invalid: (detail) => new AgentStateError('invalid_request', detail),
};

/** What a worker URL is checked against: the mode, and where module workers may be. */
type WorkerUrlRules = Pick<WorkerCallOptions, 'allowLoopbackHttp' | 'moduleDirs'>;

function parseWorkerUrl(url: string, options: WorkerUrlRules): ParsedWorkerUrl {
  checkUrlText(url, URL_WORDING);
  const invalid = URL_WORDING.invalid;

  if (url.startsWith('lambda:')) {
    const arn = url.slice('lambda:'.length);
    const match = LAMBDA_ARN.exec(arn);
    if (!match?.[1]) {
      throw invalid('worker.url lambda:<arn> needs a Lambda function ARN, arn:aws:lambda:<region>:<account>:function:<name>[:<qualifier>]');
    }
    return { kind: 'lambda', arn, region: match[1] };
  }

  if (url.startsWith('module:')) {
    if (!options.allowLoopbackHttp) throw invalid('module: workers run only in the local server; in AWS use https:// or lambda:<arn>');
    const modulePath = url.slice('module:'.length);
    if (modulePath.trim() === '' || modulePath.includes('\0')) throw invalid('worker.url module:<path> needs a path');
    return { kind: 'module', path: modulePath };
  }

  return { kind: 'http', url: parseHttpUrl(url, options, URL_WORDING) };
}

/**
 * Checks a worker URL when an agent is registered: throws `invalid_request` unless it is
 * `https://…` (in AWS mode not at a non-public IP literal), `http://` to a loopback host (local
 * mode only), `lambda:<function arn>`, or `module:<path>` (local mode only, inside the module
 * directories). Host names are checked against DNS later, on every call; module paths again
 * before every import.
 */
export function validateWorkerUrl(url: string, options: WorkerUrlRules): void {
  const target = parseWorkerUrl(url, options);
  if (target.kind !== 'module') return;
  try {
    allowedModulePath(target.path, options.moduleDirs ?? moduleDirsFromEnv(process.env));
  } catch (error) {
    if (error instanceof ModuleRefusedError) throw URL_WORDING.invalid(`worker.url ${error.message}`);
    throw error;
  }
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
      case 'module': {
        const dirs = options.moduleDirs ?? moduleDirsFromEnv(process.env);
        const text = await callModule(target.path, body, { dirs, signal: call.signal, wording: { failed, excerpt } });
        return parseAnswer(text, "the module worker's answer");
      }
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
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it takes out.
  const line = text.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
  return line.length > EXCERPT_CHARS ? `${line.slice(0, EXCERPT_CHARS)}…` : line;
}

/** The parsed answer, which must be a JSON object. */
function parseAnswer(text: string, from: string): Record<string, unknown> {
  let value: unknown;
  try {
    // Verbatim, as a request body: numbers as written, a key given twice refused.
    value = parseJson(text);
  } catch (error) {
    if (!(error instanceof JsonTextError)) throw error;
    const shown = excerpt(text);
    throw failed(`${from} is not JSON (${error.message})${shown === '' ? ' (empty body)' : `: ${shown}`}`);
  }
  if (!isJsonObject(value)) {
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

/** Workers get a pool of their own: a slow worker never holds a webhook's sockets. */
const agentFor = connectionPool({ maxSockets: 64 });

async function callHttp(url: URL, secret: string | undefined, body: string, options: WorkerCallOptions, call: CallContext) {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (secret) {
    const id = options.messageId ?? `sha256-${createHash('sha256').update(body, 'utf8').digest('hex').slice(0, 32)}`;
    Object.assign(headers, standardWebhookHeaders(secret, id, body));
    headers[SIGNATURE_HEADER] = signBody(secret, body);
  }
  let answer: OutboundAnswer;
  try {
    answer = await postJson(url, body, {
      headers,
      agent: agentFor(url, options),
      signal: call.signal,
      maxAnswerBytes: MAX_WORKER_RESPONSE_BYTES,
    });
  } catch (error) {
    if (error instanceof NonPublicHostError) {
      throw failed(`the worker's host ${error.hostname} resolves to a non-public address; refused`);
    }
    if (error instanceof AgentStateError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    throw failed(`could not reach the worker${code ? ` (${code})` : ''}`, error);
  }
  const { status } = answer;
  switch (answer.kind) {
    case 'too-large':
      throw failed(`the worker's answer is larger than ${MAX_WORKER_RESPONSE_BYTES} bytes`);
    case 'cut':
      // An error of the answer's stream (the timeout's abort among them) is judged by toWorkerError.
      if (answer.error !== undefined) throw answer.error;
      throw failed('the worker closed the connection before its answer was complete');
    case 'answered':
      break;
  }
  if (status >= 300 && status < 400) {
    throw failed(`the worker answered HTTP ${status} (a redirect); redirects are not followed`);
  }
  if (status < 200 || status >= 300) {
    const shown = excerpt(answer.text);
    throw failed(`the worker answered HTTP ${status}${shown === '' ? '' : `: ${shown}`}`);
  }
  if (!answer.utf8) throw failed(`the worker's answer (HTTP ${status}) is not UTF-8`);
  return parseAnswer(answer.text, `the worker's answer (HTTP ${status})`);
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
      // The invocation itself is bounded by the worker's timeout (the abort signal); the
      // connection gets the same bound as every AWS call.
      requestHandler: { connectionTimeout: AWS_CALL_TIMEOUTS.connectionTimeout },
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
  let output: InvokeCommandOutput;
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
  let text = '';
  try {
    text = output.Payload ? new TextDecoder('utf-8', { fatal: true }).decode(output.Payload) : '';
  } catch {
    throw failed("the worker's Lambda answer is not UTF-8");
  }
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
