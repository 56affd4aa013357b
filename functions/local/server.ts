import { createServer, type RequestListener, type Server } from 'node:http';
import { isIPv6 } from 'node:net';
import { resolve } from 'node:path';
import { DescribeTableCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDBStreamsClient } from '@aws-sdk/client-dynamodb-streams';
import { AgentStateError, toProblem } from '../core/kernel/errors.js';
import { useSealingKey } from '../core/kernel/sealing.js';
import { pruneIntervalFrom } from '../core/model/retention.js';
import type { WebhookLanes } from '../core/webhooks/lanes.js';
import type { WebhookQueue } from '../core/webhooks/records.js';
import type { RouteGroup } from '../http/contract/routes.js';
import { parseCorsOrigins } from '../http/edge/cors.js';
import type { HttpHandler } from '../http/edge/types.js';
import { useStoreProbe } from '../http/handlers/health.js';
import { changeRecordFilters } from '../store/events/stream-images.js';
import { defaultTableName, ensureTable } from '../store/table/table.js';
import { classifyAddress } from '../workers/outbound.js';
import { useLocalConnectionGateway } from '../ws/connections.js';
import { withAccessLog, withWebSocketAccessLog } from './access-log.js';
import { withCors } from './cors.js';
import { type DynamoDbLocal, localDynamoDbClient } from './dynamodb-local.js';
import { type SupervisedDynamoDb, superviseDynamoDbLocal } from './dynamodb-supervisor.js';
import { createRequestListener } from './http-adapter.js';
import { type LocalKeyFile, localKeyFile } from './key-file.js';
import { startPruneSchedule } from './prune-schedule.js';
import { runAs } from './running-function.js';
import { StreamPoller } from './stream-poller.js';
import { attachWebSocketApi, WEBSOCKET_PATH } from './ws-server.js';

/** Thrown when the HTTP port is taken; nothing else (no java) has been started by then. */
export class PortInUseError extends Error {
  constructor(readonly port: number) {
    super(`agentstate: port ${port} is already in use. ` + `Stop whatever uses it or start on another port: PORT=${port + 1} npm start`);
    this.name = 'PortInUseError';
  }
}

export interface LocalServerOptions {
  /** HTTP port; 0 picks a free one. */
  port: number;
  /**
   * The address to listen on (`HOST`). Anything but a loopback address makes the API
   * reachable from the network (`LocalServer.exposed`).
   * @default '127.0.0.1'
   */
  host?: string;
  /**
   * Where the inspector page follows sessions (`AGENTSTATE_WEBSOCKET_URL`), when it is not
   * this server's own address: behind a proxy, or listening on every interface.
   * @default the server's own `webSocketUrl`
   */
  publicWebSocketUrl?: string;
  /** Folder for the DynamoDB Local database file, or `'memory'`. */
  dataDir: string | 'memory';
  /** `tenant:key` pairs, comma-separated; sets `AGENTSTATE_API_KEYS` when given. */
  apiKeys?: string;
  /** @default `AGENTSTATE_TABLE`, else `agentstate` */
  tableName?: string;
  /**
   * Origins whose pages may call the API (functions/http/edge/cors.ts); none turns CORS off.
   * @default `AGENTSTATE_CORS_ORIGINS`, else none
   */
  corsOrigins?: readonly string[];
  /** Where one line per request goes (functions/local/access-log.ts). @default no access log */
  accessLog?: (line: string) => void;
  /** For tests that serve their own handlers; by default the real ones are imported. */
  loadHandlers?: () => Promise<Record<RouteGroup, HttpHandler>>;
}

export interface LocalServer {
  /** e.g. `http://localhost:4000` */
  url: string;
  /** The address it listens on. */
  host: string;
  /** True when `host` is not a loopback address: anyone on the network can reach the API. */
  exposed: boolean;
  /** Live sync, e.g. `ws://localhost:4000/v1/ws` (API.md section 9). */
  webSocketUrl: string;
  port: number;
  /** Absolute folder of the database file, or `'memory'`. */
  dataDir: string | 'memory';
  tableName: string;
  /** False when the table was already there (a persistent data folder from an earlier run). */
  tableCreated: boolean;
  dynamoDb: Pick<DynamoDbLocal, 'endpoint' | 'pid' | 'loopbackOnly'>;
  /** Stops reading the stream, closes WebSockets and the HTTP server, then stops DynamoDB Local. */
  stop(): Promise<void>;
}

/**
 * Everything `npm start` runs, in-process: DynamoDB Local, the table, the HTTP API served by
 * the same handlers as in AWS, the WebSocket API on the same port, and the table's stream fed
 * to the same change hook and webhook hook (functions/streams/change-hook.ts, webhook-hook.ts) as Lambda's event source mappings
 * would (stream-poller.ts: from LATEST at start, so changes made while no server ran send no
 * events).
 *
 * It configures the handlers through `process.env` (`AGENTSTATE_TABLE`,
 * `AGENTSTATE_DYNAMODB_ENDPOINT`, …), as Lambda does, and the handlers build their DynamoDB
 * client once: so run one local server per process.
 */
export async function startLocalServer(options: LocalServerOptions): Promise<LocalServer> {
  // The port first: a clash must be reported before anything slow (java) has started.
  // Until the handlers are ready, the bound port answers 503 instead of refusing connections.
  let listener: RequestListener = startingUp;
  const server = createServer((req, res) => listener(req, res));
  // Upgrades to /v1/ws answer 503 until the handlers are ready, like plain requests.
  const webSocket = attachWebSocketApi(server);
  const host = options.host ?? DEFAULT_HOST;
  const port = await listen(server, options.port, host);
  const url = `http://${urlHost(host)}:${port}`;
  const webSocketUrl = `ws://${urlHost(host)}:${port}${WEBSOCKET_PATH}`;

  const dataDir = options.dataDir === 'memory' ? 'memory' : resolve(options.dataDir);
  const tableName = options.tableName ?? process.env.AGENTSTATE_TABLE ?? defaultTableName;
  let supervised: SupervisedDynamoDb | undefined;
  let keyFile: LocalKeyFile | undefined;
  let pollers: StreamPoller[] = [];
  let pruneSchedule: { stop(): Promise<void> } | undefined;
  let lanes: WebhookLanes | undefined;
  let streams: DynamoDBStreamsClient | undefined;
  // Set once the stream is read: what a restart of DynamoDB Local does to the stream readers.
  let afterRestart: (streamArn: string | undefined) => Promise<void> = async () => {};
  try {
    // Restarted on the same data when it exits unexpectedly (dynamodb-supervisor.ts): the
    // table again (in-memory data starts empty), then the stream readers read on.
    supervised = await superviseDynamoDbLocal({
      dataDir,
      onRestart: async (restarted) => afterRestart((await prepareTable(restarted, tableName)).streamArn),
    });
    const dynamoDb = supervised.current;
    const { tableCreated, streamArn } = await prepareTable(dynamoDb, tableName);

    process.env.AGENTSTATE_TABLE = tableName;
    process.env.AGENTSTATE_DYNAMODB_ENDPOINT = dynamoDb.endpoint;
    process.env.AGENTSTATE_DYNAMODB_MAX_IN_FLIGHT ??= String(DYNAMODB_LOCAL_MAX_IN_FLIGHT);
    // Worker and webhook secrets are stored sealed with this key (core/kernel/sealing.ts).
    keyFile = localKeyFile(dataDir);
    process.env.AGENTSTATE_KEY_FILE = keyFile.path;
    useSealingKey(keyFile.key);
    // The inspector's live sync: from this configuration, never from a request's Host header.
    process.env.AGENTSTATE_WEBSOCKET_URL = options.publicWebSocketUrl || webSocketUrl;
    if (options.apiKeys !== undefined) process.env.AGENTSTATE_API_KEYS = options.apiKeys;
    // DynamoDB Local takes any credentials, but the SDK wants some, and a region.
    process.env.AWS_REGION ??= 'us-east-1';
    process.env.AWS_ACCESS_KEY_ID ??= 'local';
    process.env.AWS_SECRET_ACCESS_KEY ??= 'local';

    // Imported only now, so that nothing in them can read the environment before it is set.
    const handlers = await (options.loadHandlers ?? importHandlers)();
    const { handler: webSocketHandler } = await import('../ws/handler.js');
    const { changeHook, pruneSweeper } = await import('../streams/change-hook.js');
    const { webhookHook, webhookLanes } = await import('../streams/webhook-hook.js');
    // Webhook deliveries wait in lanes, one per (webhook, session): a dead endpoint holds only its own.
    lanes = webhookLanes();
    const localLanes = lanes;
    // What the lanes do is the delivery hook's work in AWS (running-function.ts).
    const queue: WebhookQueue = { enqueue: (deliveries) => runAs('delivery-hook', () => localLanes.enqueue(deliveries)) };

    // Change events: the change hook posts to live clients through this server's WebSockets.
    useLocalConnectionGateway(webSocket.gateway);
    if (streamArn) {
      streams = new DynamoDBStreamsClient({
        endpoint: dynamoDb.endpoint,
        region: 'us-east-1',
        credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      });
      // The Lambda context the change hook gets in AWS, with the stack's 60 s timeout.
      const timeoutMs = 60_000;
      const client = streams;
      // Two consumers, as in AWS: live pushes never wait on a webhook that does not answer.
      const readStream = (arn: string, startingPosition: 'LATEST' | 'TRIM_HORIZON') =>
        (['live', 'webhooks'] as const).map((consumer) => {
          const hook = consumer === 'live' ? changeHook() : webhookHook(queue ? { queue } : {});
          const name = consumer === 'live' ? 'change-hook' : 'webhook-hook';
          return new StreamPoller({
            client,
            streamArn: arn,
            filters: changeRecordFilters,
            handler: (event) => {
              const deadline = Date.now() + timeoutMs;
              return runAs(name, () => hook(event, { getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()) }));
            },
            startingPosition,
            intervalMs: 100,
            // Idle, the two readers' polls cost this process and DynamoDB Local some 110 ms of
            // CPU a second; each request this server answers nudges them back to 100 ms.
            idleIntervalMs: 1_000,
          });
        });
      let readArn = streamArn;
      pollers = readStream(streamArn, 'LATEST');
      await Promise.all(pollers.map((poller) => poller.start()));
      afterRestart = async (arn) => {
        if (arn === readArn) {
          // The same data: each reader reads on after the last record it handed over.
          for (const poller of pollers) poller.reposition();
        } else if (arn) {
          // A new table (its data was in memory): everything on its stream is new.
          await Promise.all(pollers.map((poller) => poller.stop()));
          readArn = arn;
          pollers = readStream(arn, 'TRIM_HORIZON');
          await Promise.all(pollers.map((poller) => poller.start()));
        }
      };
    } else {
      console.warn(`agentstate: table ${tableName} has no stream; change events are off (recreate the table to get them)`);
    }
    // The change hook's schedule (an EventBridge rule in AWS): retention that is due without a
    // write, and the erase of a delete whose eraser died holding its fence.
    pruneSchedule = startPruneSchedule(pruneSweeper(), pruneIntervalFrom(process.env));

    // Each concern its own wrapper: the access log sees every answer, CORS preflights included.
    // Whatever a request wrote is on the stream some 20-50 ms after its answer: the readers look.
    const nudgeReaders = () => {
      for (const poller of pollers) poller.nudge();
    };
    const requests = createRequestListener(handlers);
    const nudging: typeof requests = (req, res) => {
      res.once('finish', nudgeReaders);
      return requests(req, res);
    };
    const cors = withCors(nudging, options.corsOrigins ?? parseCorsOrigins(process.env.AGENTSTATE_CORS_ORIGINS));
    listener = options.accessLog ? withAccessLog(cors, options.accessLog) : cors;
    const webSocketFunction: typeof webSocketHandler = (event) => runAs('websocket', () => webSocketHandler(event)).finally(nudgeReaders);
    webSocket.serve(options.accessLog ? withWebSocketAccessLog(webSocketFunction, options.accessLog) : webSocketFunction);

    const running = supervised;
    // `/health` reports the store: 503 while DynamoDB Local is down or restarting.
    useStoreProbe(() => running.isAnswering());
    const runningStreams = streams;
    return {
      url,
      host,
      exposed: !isLoopbackAddress(host),
      webSocketUrl,
      port,
      dataDir,
      tableName,
      tableCreated,
      dynamoDb: {
        endpoint: dynamoDb.endpoint,
        loopbackOnly: dynamoDb.loopbackOnly,
        get pid() {
          return running.current.pid;
        },
      },
      stop: async () => {
        // Requests and sockets first; then what the last writes put on the stream is still
        // handed to the change hook (webhooks), and only then does DynamoDB Local stop.
        await close(server, webSocket.close);
        await pruneSchedule?.stop();
        await Promise.all(pollers.map((poller) => poller.stop({ drain: true })));
        // Deliveries under way may finish; what a dead endpoint still holds becomes a dead letter.
        await lanes?.drain(LANES_DRAIN_MS);
        runningStreams?.destroy();
        useLocalConnectionGateway(undefined);
        useStoreProbe(undefined);
        await running.stop();
        keyFile?.removeIfEphemeral();
      },
    };
  } catch (error) {
    await pruneSchedule?.stop();
    await Promise.all(pollers.map((poller) => poller.stop()));
    streams?.destroy();
    await close(server, webSocket.close);
    await supervised?.stop();
    keyFile?.removeIfEphemeral();
    throw error;
  }
}

/** Creates the table if it is not there; its stream, if it has one. */
async function prepareTable(dynamoDb: DynamoDbLocal, tableName: string): Promise<{ tableCreated: boolean; streamArn?: string }> {
  const client = localDynamoDbClient(dynamoDb.endpoint);
  try {
    const tableCreated = await ensureTable(client, tableName);
    const { Table } = await client.send(new DescribeTableCommand({ TableName: tableName }));
    return { tableCreated, ...(Table?.LatestStreamArn ? { streamArn: Table.LatestStreamArn } : {}) };
  } finally {
    client.destroy();
  }
}

async function importHandlers(): Promise<Record<RouteGroup, HttpHandler>> {
  return (await import('../http/index.js')).handlers;
}

const startingUp: RequestListener = (_req, res) => {
  const problem = toProblem(new AgentStateError('unavailable', 'agentstate is starting'));
  res.writeHead(503, { 'content-type': 'application/problem+json', 'retry-after': '1', 'x-content-type-options': 'nosniff' });
  res.end(JSON.stringify({ ...problem, detail: 'agentstate is starting; retry in a moment' }));
};

/**
 * At most this many DynamoDB requests of the server at DynamoDB Local at once; the others wait
 * for their turn before the SDK sends them, so that its bounds (AWS's, unchanged) time only
 * DynamoDB Local's answer (functions/store/table/client.ts). DynamoDB Local, on disk above all,
 * works through its writes one at a time: more requests at once only make each answer later.
 * Measured on `npm start` on disk, 2 cores, one busy: bursts of 200 and 400 mixed writes to
 * one session made 88 attempts fail on the SDK's bounds (one write answered 503) with no bound,
 * none with 16 or with 50 (the client's sockets), and were 10-20% slower with 4.
 */
const DYNAMODB_LOCAL_MAX_IN_FLIGHT = 16;

/** Loopback only, unless `HOST` says otherwise (API.md section 1). */
const DEFAULT_HOST = '127.0.0.1';
/** How long a stop waits for webhook deliveries under way: one attempt's timeout and a little. */
const LANES_DRAIN_MS = 6_000;

/** True for `localhost` and the loopback ranges (127.0.0.0/8, ::1): unreachable from the network. */
function isLoopbackAddress(host: string): boolean {
  return host === 'localhost' || classifyAddress(host) === 'loopback';
}

/**
 * The host as it appears in this server's URLs: `localhost` for 127.0.0.1 (what the README's
 * walk-through uses) and for the wildcard addresses (reachable here as well), brackets around
 * IPv6, any other address or name as given.
 */
function urlHost(host: string): string {
  if (host === '127.0.0.1' || host === '0.0.0.0' || host === '::' || host === 'localhost') return 'localhost';
  return isIPv6(host) ? `[${host}]` : host;
}

function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolvePort, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => reject(error.code === 'EADDRINUSE' ? new PortInUseError(port) : error));
    server.listen(port, host, () => {
      const address = server.address();
      resolvePort(typeof address === 'object' && address ? address.port : port);
    });
  });
}

async function close(server: Server, closeWebSockets: () => Promise<void>): Promise<void> {
  if (!server.listening) return;
  // WebSocket connections are upgraded sockets that server.close() does not end.
  const closed = new Promise<void>((resolveClose) => {
    server.close(() => resolveClose());
    // Keep-alive connections would hold close() open until the client hangs up, and a
    // request still running gets a moment to finish, not forever.
    server.closeIdleConnections();
    setTimeout(() => server.closeAllConnections(), 3_000).unref();
  });
  await Promise.all([closed, closeWebSockets()]);
}
