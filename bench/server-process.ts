/**
 * The local server in a process of its own (bench/load-server.ts: `startLocalServer({ port: 0,
 * dataDir: 'memory' })`, exactly what `npm start` runs), so that whatever drives it does not
 * share its event loop. Used by `npm run load` and by the LangGraph graph runs.
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface ServerProcess {
  /** The API's base URL, on loopback. */
  url: string;
  /** The server's DynamoDB Local. */
  dynamoDbEndpoint: string;
  child: ChildProcessWithoutNullStreams;
  /** Stops the server (and its DynamoDB Local) and resolves when its process has exited. */
  stop: () => Promise<void>;
}

const repoRoot = fileURLToPath(new URL('../', import.meta.url));

/** Starts the server with `apiKeys` (`tenant:key,…`) and resolves once it listens. */
export async function startServerProcess(apiKeys: string): Promise<ServerProcess> {
  const tsxCli = join(repoRoot, 'node_modules', 'tsx', 'dist', 'cli.mjs');
  const child = spawn(process.execPath, [tsxCli, join(repoRoot, 'bench', 'load-server.ts')], {
    cwd: repoRoot,
    env: { ...process.env, AGENTSTATE_API_KEYS: apiKeys, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let serverOutput = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (serverOutput += chunk));
  const kill = () => child.kill('SIGTERM');
  process.once('exit', kill);
  const exited = new Promise<void>((resolveExit) => child.once('exit', () => resolveExit()));
  const [url, dynamoDbEndpoint] = await new Promise<[string, string]>((resolveStarted, reject) => {
    let text = '';
    // Generous: DynamoDB Local is a JVM, and a loaded machine starts it slowly.
    const timer = setTimeout(() => reject(new Error(`the server did not start in 120 s:\n${text}${serverOutput}`)), 120_000);
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      text += chunk;
      const match = /LISTENING (\S+) \S+ (\S+)/.exec(text);
      if (match) {
        clearTimeout(timer);
        resolveStarted([(match[1] as string).replace('localhost', '127.0.0.1'), match[2] as string]);
      }
    });
    child.once('exit', (code) => reject(new Error(`the server exited (${code}):\n${text}${serverOutput}`)));
  });
  const loopback = new URL(url);
  if (!['127.0.0.1', 'localhost', '[::1]'].includes(loopback.hostname)) {
    kill();
    throw new Error(`refusing a server on a non-loopback address: ${url}`);
  }
  return {
    url,
    dynamoDbEndpoint,
    child,
    stop: async () => {
      process.removeListener('exit', kill);
      kill();
      await exited;
    },
  };
}
