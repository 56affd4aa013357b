import path from 'node:path';

// Where `module:` workers may be loaded from (module-worker.ts holds the rules and the call):
// read once where the server is wired, which loads no module worker code.

/** Where `module:` workers may live when `AGENTSTATE_MODULE_DIRS` is not set. */
const DEFAULT_MODULE_DIRS = ['examples', 'workers'] as const;

/** The directories `module:` workers may be loaded from, as configured and as resolved. */
export interface ModuleDirs {
  /** As the operator wrote them (for error details: no absolute paths of the server). */
  readonly configured: readonly string[];
  /** Absolute, resolved against the server's directory (links are followed at each check). */
  readonly absolute: readonly string[];
  /** The directory relative `module:` paths are resolved against. */
  readonly base: string;
}

/**
 * The module directories from `AGENTSTATE_MODULE_DIRS` (entries separated by the platform's
 * path delimiter, `:` on POSIX), else `examples` and `workers`, under `base`.
 */
export function moduleDirsFromEnv(env: NodeJS.ProcessEnv, base: string = process.cwd()): ModuleDirs {
  const raw = env.AGENTSTATE_MODULE_DIRS;
  const configured =
    raw === undefined || raw.trim() === ''
      ? [...DEFAULT_MODULE_DIRS]
      : raw
          .split(path.delimiter)
          .map((entry) => entry.trim())
          .filter((entry) => entry !== '');
  return { configured, absolute: configured.map((dir) => path.resolve(base, dir)), base };
}
