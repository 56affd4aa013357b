import { type ApiClient, apiClient } from './api-client.js';
import { startContractProxy } from './contract-proxy.js';
import { startServerProcess } from './server.js';

/** Three tenants: the default one, another to prove isolation, one for list ordering. */
const TEST_API_KEYS = 'local:dev-key,other:other-key,lists:list-key';

export interface RunningApi {
  /** The server behind a proxy that holds every exchange to docs/openapi.json (contract-proxy.ts). */
  url: string;
  /** The server itself, for what must not go through the proxy. */
  serverUrl: string;
  client: ApiClient;
  output(): string;
  stop(): Promise<void>;
}

/**
 * Starts the server the way `npm start` does (a child process, in-memory data) for one file,
 * behind the contract proxy: `stop()` fails the file if any exchange broke the OpenAPI document.
 */
export async function startApi(env: Record<string, string | undefined> = {}): Promise<RunningApi> {
  const server = await startServerProcess({ env: { AGENTSTATE_API_KEYS: TEST_API_KEYS, ...env } });
  const proxy = await startContractProxy(server.url);
  return {
    url: proxy.url,
    serverUrl: server.url,
    client: apiClient(proxy.url),
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
