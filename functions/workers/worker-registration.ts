/**
 * The check of a worker URL where an agent is registered (the agents group): its form, and for
 * a `module:` worker that the file is one the operator allowed. Decide's calls check the form
 * again (call-worker.ts) and a module's file right before its import (module-worker.ts).
 */

import { moduleDirsFromEnv } from './module-dirs.js';
import { allowedModulePath, ModuleRefusedError } from './module-worker.js';
import { parseWorkerUrl, URL_WORDING, type WorkerUrlRules } from './worker-url.js';

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
