/**
 * `npm start`: the whole API on this machine — DynamoDB Local, the table, and the same Lambda
 * handlers as in AWS behind a local stand-in for API Gateway.
 *
 * Env: PORT (4000), HOST (127.0.0.1: anything else is reachable from the network, and the
 * banner says so), AGENTSTATE_DATA (`.agentstate/data`; `memory` keeps nothing),
 * AGENTSTATE_API_KEYS (`local:dev-key`), AGENTSTATE_TABLE (`agentstate`),
 * AGENTSTATE_WEBSOCKET_URL (the inspector's live sync, when not this server's own address),
 * AGENTSTATE_CORS_ORIGINS (origins whose pages may call the API; none by default),
 * AGENTSTATE_ACCESS_LOG (`off` silences the line printed per request and per WebSocket event).
 */
import { resolve } from 'node:path';
import { DEFAULT_LOCAL_KEYS, parseKeyPairs } from '../functions/http/edge/auth.js';
import { parseCorsOrigins } from '../functions/http/edge/cors.js';
import { JavaMissingError } from '../functions/local/dynamodb-local.js';
import { ensureInspectorBuilt } from '../functions/local/inspector-build.js';
import { type LocalServer, PortInUseError, startLocalServer } from '../functions/local/server.js';

// The SDK warns on every start that its 2027 releases will need Node 22; here that is noise.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

const fail = (message: string): never => {
  console.error(message);
  process.exit(1);
};

// `||`, not `??`: an empty variable (PORT= npm start) means the default, not port 0 or the cwd.
const port = Number(process.env.PORT || 4000);
if (!Number.isInteger(port) || port < 0 || port > 65_535) fail(`agentstate: PORT must be a port number, not "${process.env.PORT}"`);
const data = process.env.AGENTSTATE_DATA || '.agentstate/data';
const dataDir = data === 'memory' ? 'memory' : resolve(data);
const apiKeys = process.env.AGENTSTATE_API_KEYS || DEFAULT_LOCAL_KEYS;
let devKey = '';
try {
  // Checked here so that a typo is reported before java starts, not on the first request.
  devKey = parseKeyPairs(apiKeys)[0]?.key ?? fail('agentstate: AGENTSTATE_API_KEYS holds no tenant:key pair');
} catch (error) {
  fail(`agentstate: ${(error as Error).message}`);
}

let server: LocalServer | undefined;
let stopping = false;
async function shutdown(): Promise<void> {
  // A second Ctrl+C means "now": exiting still kills java (dynamodb-local's exit hook).
  if (stopping) process.exit(1);
  stopping = true;
  // While starting up there is nothing to close gracefully; the exit hook stops java.
  await server?.stop();
  process.exit(0);
}
// SIGHUP too: a closed terminal would otherwise end node without running any exit hook.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => void shutdown());

// The inspector page is built while DynamoDB Local starts, only when missing or older than
// its sources (a fresh clone, an edit): see functions/local/inspector-build.ts. Until then `/`
// answers 503; a failed build leaves the API running.
let corsOrigins: string[] = [];
try {
  corsOrigins = parseCorsOrigins(process.env.AGENTSTATE_CORS_ORIGINS);
} catch (error) {
  fail((error as Error).message);
}
const inspector = ensureInspectorBuilt().catch((error: unknown) => {
  console.warn('agentstate: the inspector page could not be built:', error);
  return 'unavailable' as const;
});
try {
  server = await startLocalServer({
    port,
    dataDir,
    apiKeys,
    // `||`: an empty HOST means the default, loopback only.
    host: process.env.HOST || undefined,
    publicWebSocketUrl: process.env.AGENTSTATE_WEBSOCKET_URL || undefined,
    corsOrigins,
    ...(process.env.AGENTSTATE_ACCESS_LOG === 'off' ? {} : { accessLog: (line: string) => console.log(line) }),
  });
  await inspector;
} catch (error) {
  if (error instanceof PortInUseError || error instanceof JavaMissingError) fail(error.message);
  console.error('agentstate: could not start:', error);
  process.exit(1);
}

const { url, webSocketUrl, tableName, tableCreated, dynamoDb, host, exposed } = server;
const warnings = exposed
  ? [
      `WARNING: HOST=${host}: the API is reachable from the network, not only from this machine.`,
      `  Anyone who can reach ${host}:${server.port} and knows a key can use it${apiKeys === DEFAULT_LOCAL_KEYS ? ' — and the key is the well-known dev-key: set AGENTSTATE_API_KEYS' : ''}.`,
      '  Unset HOST to listen on 127.0.0.1 only (docs/security.md).',
    ]
  : [];
process.stdout.write(
  [
    ...warnings,
    `agentstate listening on ${url}${exposed ? ` (bound to ${host})` : ''}`,
    `  data: ${dataDir === 'memory' ? 'in memory (gone when stopped)' : dataDir}`,
    `  table ${tableName} ${tableCreated ? 'created' : 'found'}`,
    `  DynamoDB Local: ${dynamoDb.endpoint} (java pid ${dynamoDb.pid}${dynamoDb.loopbackOnly ? '' : ', WARNING: listening on every interface'})`,
    `  inspector: ${url}/ (sign in with the dev key)`,
    `  dev key: ${devKey}`,
    `  change events: webhooks (POST ${url}/v1/webhooks), live: ${webSocketUrl}?token=<key>`,
    `  CORS: ${corsOrigins.length > 0 ? `pages of ${corsOrigins.join(', ')}` : 'off (AGENTSTATE_CORS_ORIGINS)'}`,
    `  try: curl -s ${url}/v1/sessions -H 'Authorization: Bearer ${devKey}'`,
    'Ctrl+C stops.',
    '',
  ].join('\n'),
);
