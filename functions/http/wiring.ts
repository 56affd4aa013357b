import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { AgentService } from '../core/agents/agent-service.js';
import type { CommitService } from '../core/commits/commit-service.js';
import type { DecideService } from '../core/decide/decide-service.js';
import type { ErasureService } from '../core/erasure/erasure.js';
import type { MemoryService } from '../core/memory/memory-service.js';
import type { IdempotencyStore } from '../core/model/ports.js';
import type { SessionCopier } from '../core/sessions/session-copy.js';
import type { SessionService } from '../core/sessions/session-service.js';
import type { SessionTreeService } from '../core/sessions/session-tree-service.js';
import type { WebhookService } from '../core/webhooks/registry.js';
import { dynamoDbClient } from '../store/table/client.js';
import { defaultTableName } from '../store/table/table.js';
import { TableClient } from '../store/table/table-client.js';
import type { KeyResolver } from './edge/auth.js';

/** Every service a route handler may use. A route group's function builds only the ones it names. */
export interface Dependencies {
  sessions: SessionService;
  /** Sessions and the message tree alone (the sessions and tree groups): no state writes in their bundles. */
  sessionTree: SessionTreeService;
  /** Copies of sessions (the tree group). */
  copier: SessionCopier;
  /** Erasures of users (the sessions group). */
  erasures: ErasureService;
  agents: AgentService;
  decide: DecideService;
  commits: CommitService;
  memory: MemoryService;
  webhooks: WebhookService;
  idempotency: IdempotencyStore;
  resolveKey: KeyResolver;
}

/**
 * What every part is built from: the environment and one table client per process, and the
 * other parts, each built once (`use`). A part is a plain function, so a bundle carries a
 * part, and the stores and clients it imports, only when its group names it.
 */
export interface Wiring {
  readonly env: NodeJS.ProcessEnv;
  readonly client: DynamoDBClient;
  readonly table: TableClient;
  use<T>(part: Part<T>): T;
}

/** How one dependency is built (functions/http/dependencies.ts holds them all). */
export type Part<T> = (wiring: Wiring) => T;

/** The parts a route group names: the services its routes use, and nothing else. */
export type Parts<K extends keyof Dependencies> = { readonly [P in K]: Part<Dependencies[P]> };

/**
 * A wiring over one table client. `built` seeds parts with what a caller made already (the
 * stores of a test, with its clock), so that the parts above them use those.
 */
export function createWiring(
  base: { env: NodeJS.ProcessEnv; client: DynamoDBClient; table: TableClient },
  built: ReadonlyArray<readonly [Part<unknown>, unknown]> = [],
): Wiring {
  const parts = new Map<Part<unknown>, unknown>(built);
  const wiring: Wiring = {
    ...base,
    use<T>(part: Part<T>): T {
      if (!parts.has(part)) parts.set(part, part(wiring));
      return parts.get(part) as T;
    },
  };
  return wiring;
}

let replacement: Dependencies | undefined;
let fromEnv: Wiring | undefined;

/**
 * The process's wiring, created from the environment on first use, so that the local server
 * and tests can set `AGENTSTATE_*` before any handler runs: `AGENTSTATE_TABLE`,
 * `AGENTSTATE_DYNAMODB_ENDPOINT` (DynamoDB Local), `AGENTSTATE_API_KEYS`.
 */
function processWiring(): Wiring {
  if (!fromEnv) {
    const env = process.env;
    const client = dynamoDbClient(env);
    fromEnv = createWiring({ env, client, table: new TableClient(client, env.AGENTSTATE_TABLE ?? defaultTableName) });
  }
  return fromEnv;
}

/**
 * The dependencies of one route group: the parts it names, built on first use over the
 * process's wiring, or the replacement of `useDependencies` while one is set.
 */
export function groupDependencies<K extends keyof Dependencies>(parts: Parts<K>): () => Pick<Dependencies, K> {
  const names = Object.keys(parts) as K[];
  let built: { wiring: Wiring; deps: Pick<Dependencies, K> } | undefined;
  return () => {
    if (replacement) return replacement;
    const wiring = processWiring();
    if (built?.wiring !== wiring) {
      const deps = {} as Pick<Dependencies, K>;
      for (const name of names) deps[name] = wiring.use(parts[name]);
      built = { wiring, deps };
    }
    return built.deps;
  };
}

/**
 * Replaces every group's dependencies, for the benchmark and in-process tests that wire their
 * own (`dependenciesFor` in dependencies.ts); undefined builds them from the environment again on
 * next use.
 */
export function useDependencies(dependencies: Omit<Dependencies, 'sessionTree'> | undefined): void {
  // A replacement's sessions service is its sessions and tree service too (SessionService is a
  // SessionTreeService): a test that replaces \`sessions\` replaces it for every route of them.
  replacement = dependencies && { ...dependencies, sessionTree: dependencies.sessions };
  fromEnv = undefined;
}
