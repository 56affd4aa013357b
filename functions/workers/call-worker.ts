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
 *                         `lambdaEndpoint`; lambda-worker.ts, loaded by the first such call).
 * - `module:<path>`       local mode only: a module exporting `decide(request)`, imported once,
 *                         from the module directories only (module-worker.ts, loaded by the
 *                         first such call).
 *
 * SSRF (DESIGN.md section 5): in AWS mode (`allowLoopbackHttp: false`) an https worker must be
 * public, under the same rules as a webhook; outbound.ts holds them, and the request itself.
 */
import { createHash } from 'node:crypto';
import { workerTimeoutMs } from '../core/agents/worker-timeout.js';
import { isJsonObject, JsonTextError, parseJson } from '../core/json/json.js';
import { AgentStateError } from '../core/kernel/errors.js';
import { reportUnexpected } from '../telemetry/report.js';
import { moduleDirsFromEnv } from './module-dirs.js';
import {
  ConnectionLostError,
  connectionPool,
  NonPublicHostError,
  type OutboundAnswer,
  type OutboundPolicy,
  postJson,
  SIGNATURE_HEADER,
  signBody,
  standardWebhookHeaders,
} from './outbound.js';
import { type ParsedWorkerUrl, parseWorkerUrl, URL_FORMS, type WorkerUrlRules } from './worker-url.js';

export interface WorkerConfig {
  url: string;
  secret?: string;
  timeoutMs?: number;
}

/** `allowLoopbackHttp: false` (AWS mode) forbids http:// and non-public addresses (outbound.ts). */
export interface WorkerCallOptions extends OutboundPolicy, WorkerUrlRules {
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

const LAMBDA_HINT = 'lambda: workers need AWS; set AGENTSTATE_LAMBDA_ENDPOINT to call a local Lambda emulator';

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
      case 'lambda': {
        if (options.allowLoopbackHttp && !options.lambdaEndpoint) throw failed(LAMBDA_HINT);
        // The invocation and the Lambda client: a chunk read by the first lambda: worker's call.
        const { callLambda } = await import('./lambda-worker.js');
        const text = await callLambda(target, body, {
          endpoint: options.lambdaEndpoint,
          signal: call.signal,
          wording: { failed, excerpt },
        });
        return parseAnswer(text, "the worker's Lambda answer");
      }
      case 'module': {
        const dirs = options.moduleDirs ?? moduleDirsFromEnv(process.env);
        // Local mode only (parseWorkerUrl refuses module: in AWS): its code is a chunk read on
        // the first module worker's call, never by a Lambda.
        const { callModule } = await import('./module-worker.js');
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
  // Every failure of a worker or of the network is mapped where it happens, with its reason.
  // What reaches here is ours: a bug, or a broken package (a transport's chunk that does not
  // load). The caller still learns that the call failed; the log, in a Lambda too, says why.
  reportUnexpected('a worker call failed for a reason its transport does not map', error);
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
    if (error instanceof ConnectionLostError)
      throw failed(`the connection to the worker was lost before an answer${error.code ? ` (${error.code})` : ''}`, error);
    const code = (error as NodeJS.ErrnoException).code;
    throw failed(`could not reach the worker${code ? ` (${code})` : ''}`, error);
  }
  const { status } = answer;
  switch (answer.kind) {
    case 'too-large':
      throw failed(`the worker's answer is larger than ${MAX_WORKER_RESPONSE_BYTES} bytes`);
    case 'cut': {
      // The timeout's abort breaks the stream too: toWorkerError answers that as a timeout first.
      const code = (answer.error as NodeJS.ErrnoException | undefined)?.code;
      throw failed(`the worker closed the connection before its answer was complete${code ? ` (${code})` : ''}`, answer.error);
    }
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
