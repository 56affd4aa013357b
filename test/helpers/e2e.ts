import { type ApiClient, apiClient } from './api-client.js';
import { startServerProcess } from './server.js';

/** Three tenants: the default one, another to prove isolation, one for list ordering. */
const TEST_API_KEYS = 'local:dev-key,other:other-key,lists:list-key';

export interface RunningApi {
  url: string;
  client: ApiClient;
  output(): string;
  stop(): Promise<void>;
}

/** Starts the server the way `npm start` does (a child process, in-memory data) for one file. */
export async function startApi(env: Record<string, string | undefined> = {}): Promise<RunningApi> {
  const server = await startServerProcess({ env: { AGENTSTATE_API_KEYS: TEST_API_KEYS, ...env } });
  return {
    url: server.url,
    client: apiClient(server.url),
    output: server.output,
    stop: async () => {
      const code = await server.stop('SIGINT');
      if (code !== 0) throw new Error(`the server exited with ${code}:\n${server.output()}`);
    },
  };
}
