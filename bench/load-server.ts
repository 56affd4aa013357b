/**
 * The local server for `npm run load` and the LangGraph graph runs (bench/server-process.ts), in a process of its own so that the load generator
 * does not share its event loop: `startLocalServer({ port: 0, dataDir: 'memory' })`, exactly
 * what `npm start` runs. Prints one line, `LISTENING <url> <DynamoDB Local pid> <its endpoint>`, and stops on SIGTERM or SIGINT.
 */
import { startLocalServer } from '../functions/local/server.js';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

const server = await startLocalServer({ port: 0, dataDir: 'memory', apiKeys: process.env.AGENTSTATE_API_KEYS });
process.stdout.write(`LISTENING ${server.url} ${server.dynamoDb.pid} ${server.dynamoDb.endpoint}\n`);

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await server.stop();
  process.exit(0);
};
for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => void stop());
// The parent died without stopping us: do not outlive it.
process.stdin.on('end', () => void stop());
process.stdin.resume();
