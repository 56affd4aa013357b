/**
 * The forms a worker URL may take (call-worker.ts describes each), checked by its text alone:
 * shared by the registration's check (worker-registration.ts) and every call (call-worker.ts).
 */
import { AgentStateError } from '../core/kernel/errors.js';
import type { ModuleDirs } from './module-dirs.js';
import { checkUrlText, type OutboundPolicy, parseHttpUrl, type UrlWording } from './outbound.js';

export const URL_FORMS = 'worker.url must be https://…, lambda:<arn> or module:<path>';

/** A worker URL by kind: what a call does with it. */
export type ParsedWorkerUrl =
  | { kind: 'http'; url: URL }
  | { kind: 'lambda'; arn: string; region: string }
  | { kind: 'module'; path: string };

const LAMBDA_ARN = /^arn:aws[a-z-]*:lambda:([a-z]{2}(?:-[a-z]+)+-\d+):\d{12}:function:[A-Za-z0-9_-]{1,64}(?::[A-Za-z0-9$_-]{1,128})?$/;

export const URL_WORDING: UrlWording = {
  field: 'worker.url',
  forms: URL_FORMS,
  instead: 'give the agent a worker.secret instead',
  loopbackOnly: 'http:// is allowed only to localhost, 127.0.0.0/8 or ::1',
  invalid: (detail) => new AgentStateError('invalid_request', detail),
};

/** What a worker URL is checked against: the mode, and where module workers may be. */
export interface WorkerUrlRules extends Pick<OutboundPolicy, 'allowLoopbackHttp'> {
  /**
   * Where `module:` workers may be loaded from (local mode).
   * @default `AGENTSTATE_MODULE_DIRS`, else `examples` and `workers` of the current directory
   */
  moduleDirs?: ModuleDirs;
}

/**
 * A worker URL's kind and parts, checked as far as its text goes: the scheme, an https (or
 * local loopback http) URL's host, a Lambda function's ARN, a module path's presence. Throws
 * `invalid_request`. A module path's file is checked where it is registered
 * (worker-registration.ts) and before each import (module-worker.ts), not here: a call of an
 * https or lambda: worker loads no module worker code.
 */
export function parseWorkerUrl(url: string, options: WorkerUrlRules): ParsedWorkerUrl {
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
 * How the transports that call-worker.ts loads on first use (module-worker.ts, lambda-worker.ts)
 * word their failures: as call-worker.ts words its own.
 */
export interface WorkerCallWording {
  failed: (detail: string, cause?: unknown) => AgentStateError;
  excerpt: (text: string) => string;
}
