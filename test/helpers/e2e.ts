import { type ApiClient, apiClient } from './api-client.js';
import { startContractProxy } from './contract-proxy.js';
import { type IamGate, startIamGate } from './iam-gate.js';
import { type ServerProcessOptions, type StartedServerProcess, startServerProcess } from './server.js';
import { IAM_GATE_PRELOAD, SERVER_BUNDLE_VARIABLE } from './server-bundle.js';

/** Three tenants: the default one, another to prove isolation, one for list ordering. */
const TEST_API_KEYS = 'local:dev-key,other:other-key,lists:list-key';

export interface RunningApi {
  /** The server behind a proxy that holds every exchange to docs/openapi.json (contract-proxy.ts). */
  url: string;
  /** The server itself, for what must not go through the proxy. */
  serverUrl: string;
  client: ApiClient;
  /** How many items DynamoDB has read for the server so far (iam-gate.ts, `itemsRead`). */
  itemsRead(): number;
  /** Delays the server's DynamoDB calls that `matches` picks (iam-gate.ts, `slow`). */
  slow: IamGate['slow'];
  output(): string;
  stop(): Promise<void>;
}

/** A server whose DynamoDB calls pass the IAM gate; `stop()` also fails over any call it refused. */
export type GatedServer = StartedServerProcess & Pick<RunningApi, 'itemsRead' | 'slow'>;

export interface GateOptions {
  /**
   * Every DynamoDB call through the gate in the test's process, for `itemsRead` and `slow`
   * (iam-gate.ts); else the server judges each call itself and only a refused one comes there.
   */
  everyCallThroughGate?: boolean;
  /**
   * For the gate's own test (test/e2e/iam-gate.test.ts): the role of the function `fn` (a name of
   * functions/local/running-function.ts) loses every grant of `action`, in the gate and in the
   * server's own judgement alike.
   */
  withhold?: { fn: string; action: string };
}

/**
 * Starts the server as `startServerProcess` does, in front of an IAM gate (iam-gate.ts): every
 * DynamoDB call its functions make is held to that function's role in the synthesized
 * template, and `stop()` throws, naming them, if any was refused.
 */
export async function startGatedServer(options: ServerProcessOptions & GateOptions = {}): Promise<GatedServer> {
  const { everyCallThroughGate = false, withhold, ...serverOptions } = options;
  const gate = await startIamGate(options.env?.AGENTSTATE_TABLE);
  if (withhold) {
    gate.roles.grants[withhold.fn] = (gate.roles.grants[withhold.fn] ?? []).filter((grant) => grant.action !== withhold.action);
  }
  // The run's bundle of the preload and bin/start.ts when vitest's global set-up made one
  // (server-bundle.ts); tsx loading both, as `npm start` does, otherwise.
  const bundle = process.env[SERVER_BUNDLE_VARIABLE];
  const roles = everyCallThroughGate ? undefined : JSON.stringify(gate.roles);
  const server = await startServerProcess({
    ...serverOptions,
    env: { ...options.env, AGENTSTATE_TEST_IAM_GATE: gate.url, AGENTSTATE_TEST_IAM_ROLES: roles },
    ...(bundle && !options.imports?.length ? { bundle } : { imports: [...(options.imports ?? []), IAM_GATE_PRELOAD] }),
  }).catch(async (error: unknown) => {
    await gate.close();
    throw error;
  });
  const throughGate = <T extends (...args: never[]) => unknown>(what: T): T =>
    everyCallThroughGate
      ? what
      : ((() => {
          throw new Error('the gate sees only refused calls: start the server with everyCallThroughGate');
        }) as unknown as T);
  return {
    ...server,
    itemsRead: throughGate(gate.itemsRead),
    slow: throughGate(gate.slow),
    stop: async (signal) => {
      const code = await server.stop(signal);
      await gate.close();
      const refused = gate.refused().map(({ fn, action, resource }) => `${fn}: ${action} on ${resource}`);
      if (refused.length > 0) throw new Error(`calls the synthesized template's roles refuse:\n${[...new Set(refused)].join('\n')}`);
      return code;
    },
  };
}

/**
 * Starts the server the way `npm start` does (a child process, in-memory data) for one file,
 * behind the contract proxy and in front of the IAM gate (`startGatedServer`): `stop()` fails
 * the file if any exchange broke the OpenAPI document, or any function made a DynamoDB call its
 * role in the synthesized template does not allow.
 */
export async function startApi(env: Record<string, string | undefined> = {}, options: GateOptions = {}): Promise<RunningApi> {
  const server = await startGatedServer({ ...options, env: { AGENTSTATE_API_KEYS: TEST_API_KEYS, ...env } });
  const proxy = await startContractProxy(server.url);
  return {
    url: proxy.url,
    serverUrl: server.url,
    // Straight to the server: the client holds each of its exchanges to the document itself,
    // with the proxy's check, and the proxy's hop costs the test's process more than the check.
    client: apiClient(server.url, undefined, proxy.check),
    itemsRead: server.itemsRead,
    slow: server.slow,
    output: server.output,
    stop: async () => {
      await proxy.close();
      const code = await server.stop('SIGINT');
      if (code !== 0) throw new Error(`the server exited with ${code}:\n${server.output()}`);
      const violations = proxy.violations();
      if (violations.length > 0) throw new Error(`answers that break docs/openapi.json:\n${[...new Set(violations)].join('\n')}`);
    },
  };
}
