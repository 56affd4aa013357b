/**
 * `module:<path>` workers (API.md section 6): local mode only, a module exporting
 * `decide(request)`, imported into the server itself. Importing a file runs it with the
 * server's rights (its environment holds every tenant's keys), so a tenant may name only a
 * module that the operator put in one of the module directories:
 *
 * - `AGENTSTATE_MODULE_DIRS` (path-delimiter separated, like `NODE_PATH`; default `examples`
 *   and `workers`), each resolved against the directory the server runs in;
 * - a `module:` path is resolved against that same directory, every link followed
 *   (`realpath`), and must then be a regular file with a JavaScript or TypeScript extension
 *   strictly inside one of those directories, also after following the links;
 * - checked where the agent is registered and again right before each import, and what is
 *   imported is the real path that was checked, never the link that led there.
 *
 * A refused or failed load never echoes the file: a syntax or reference error of a planted
 * file would otherwise read parts of it back to the caller. The operator's log gets the cause.
 */
import { realpathSync, statSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseJson, stringifyJson } from '../core/json/json.js';
import type { ModuleDirs } from './module-dirs.js';
import type { WorkerCallWording } from './worker-url.js';

/** What a module worker may be: code Node (with tsx) can import. */
const MODULE_EXTENSIONS = new Set(['.js', '.mjs', '.cjs', '.ts', '.mts', '.cts']);

/** Why a `module:` path was refused; each caller words it as its own error. */
export class ModuleRefusedError extends Error {}

/** True when `child` lies strictly below `parent` (both absolute and real). */
function isInside(parent: string, child: string): boolean {
  const relative = path.relative(parent, child);
  return relative !== '' && !relative.startsWith(`..${path.sep}`) && relative !== '..' && !path.isAbsolute(relative);
}

function realOrNull(file: string): string | null {
  try {
    return realpathSync(file);
  } catch {
    return null;
  }
}

/**
 * The real path of the module `modulePath` names, when it is allowed: an existing regular
 * file with a module extension, inside one of `dirs` once every link is followed. Throws
 * `ModuleRefusedError` otherwise, with the same words whether the file is missing, outside or
 * not a module, so that the answer cannot be used to probe the server's file system.
 */
export function allowedModulePath(modulePath: string, dirs: ModuleDirs): string {
  const refused = () =>
    new ModuleRefusedError(
      `module:<path> must name a .js or .ts module inside the module directories (AGENTSTATE_MODULE_DIRS: ${dirs.configured.join(', ') || 'none'})`,
    );
  if (modulePath.trim() === '' || modulePath.includes('\0')) throw refused();
  const real = realOrNull(path.resolve(dirs.base, modulePath));
  if (real === null || !MODULE_EXTENSIONS.has(path.extname(real).toLowerCase())) throw refused();
  const inside = dirs.absolute.some((dir) => {
    const realDir = realOrNull(dir);
    return realDir !== null && isInside(realDir, real);
  });
  if (!inside) throw refused();
  let isFile = false;
  try {
    isFile = statSync(real).isFile();
  } catch {
    isFile = false;
  }
  if (!isFile) throw refused();
  return real;
}

/* ------------------------------------------------------------------ loading and calling */

type DecideFunction = (request: unknown) => unknown;
/** Loaded modules by real path: a module is imported once, as Node would. */
const modules = new Map<string, Promise<DecideFunction>>();

/**
 * Imports the module at `real` (a path `allowedModulePath` returned) once and returns its
 * `decide`. A failure to load says which module and what kind of error (SyntaxError, …),
 * never its message: that message can quote the file.
 */
function loadModule(real: string, shownAs: string, wording: WorkerCallWording): Promise<DecideFunction> {
  let loading = modules.get(real);
  if (!loading) {
    loading = import(/* @vite-ignore */ pathToFileURL(real).href).then(
      (loaded: { decide?: unknown; default?: { decide?: unknown } }) => {
        const decide = loaded.decide ?? loaded.default?.decide;
        if (typeof decide !== 'function') throw wording.failed(`the module worker ${shownAs} does not export a decide function`);
        return decide as DecideFunction;
      },
      (error: unknown) => {
        console.error(`agentstate: could not load the module worker ${real}`, error);
        const kind = error instanceof Error ? ` (${error.name})` : '';
        throw wording.failed(`could not load the module worker ${shownAs}${kind}; the server's log has the details`, error);
      },
    );
    modules.set(real, loading);
    // A module that failed to load is tried again next time (the file may have been fixed).
    loading.catch(() => modules.delete(real));
  }
  return loading;
}

function whenAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    else signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return `a ${typeof value}`;
}

/**
 * Calls the module worker `modulePath` with the DecisionRequest `body`: checks the path again
 * (a link may have been turned since the agent was registered), imports the real file, and
 * returns its answer as JSON text, as an https worker's would be. Aborting `signal` gives up
 * (the module keeps running; its late answer is ignored).
 */
export async function callModule(
  modulePath: string,
  body: string,
  context: { dirs: ModuleDirs; signal: AbortSignal; wording: WorkerCallWording },
): Promise<string> {
  const { dirs, signal, wording } = context;
  let real: string;
  try {
    real = allowedModulePath(modulePath, dirs);
  } catch (error) {
    if (!(error instanceof ModuleRefusedError)) throw error;
    throw wording.failed(`the agent's worker cannot be called: ${error.message}`);
  }
  const aborted = whenAborted(signal);
  aborted.catch(() => {}); // handled by the race below, or not needed at all
  const decide = await Promise.race([loadModule(real, modulePath, wording), aborted]);
  // The request as an https worker would read it: numbers a double would change are JsonNumbers,
  // which come back verbatim in the answer if the module passes them on (core/json/json.ts).
  const request: unknown = parseJson(body);
  let answer: unknown;
  try {
    answer = await Promise.race([Promise.resolve().then(() => decide(request)), aborted]);
  } catch (error) {
    if (signal.aborted) throw error;
    // The module's own error, like an https worker's error answer: the worker's words.
    const message = error instanceof Error ? wording.excerpt(error.message) : wording.excerpt(String(error));
    throw wording.failed(`the module worker's decide threw${message === '' ? '' : `: ${message}`}`, error);
  }
  // Through JSON, exactly as an https worker's answer: drops undefined, copies the object.
  let text: string | undefined;
  try {
    text = stringifyJson(answer);
  } catch (error) {
    throw wording.failed("the module worker's answer cannot be serialized as JSON", error);
  }
  if (text === undefined) throw wording.failed(`the module worker's answer is not JSON (got ${describe(answer)})`);
  return text;
}
