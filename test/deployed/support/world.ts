import { createSocket } from 'node:dgram';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { ApiKeyStore } from '../../../functions/store/access/api-keys.js';
import { createTestTable, dynamoEndpoint, testDynamoDbClient } from '../../helpers/dynamodb.js';
import { synthesizedAssembly } from '../../helpers/synth.js';
import { HttpApiGateway, WebSocketGateway } from './api-gateway.js';
import { AwsStandIn } from './aws-stand-in.js';
import { Deployment, readAssembly } from './deployment.js';
import { StreamEventSource } from './event-source.js';
import { Iam } from './iam.js';
import { LambdaService } from './lambda.js';
import { QueueEventSource } from './queue-source.js';

/** The synthesized stack "deployed" on this machine: its functions, APIs and stream, on DynamoDB Local. */
export interface DeployedStack {
  deployment: Deployment;
  iam: Iam;
  aws: AwsStandIn;
  lambda: LambdaService;
  http: HttpApiGateway;
  webSocket: WebSocketGateway;
  stream: StreamEventSource;
  /** The SQS event source mappings (the webhook queue and its delivery hook). */
  queue: QueueEventSource;
  /** Every X-Ray segment document the functions sent to the daemon address. */
  traceSegments: Array<Record<string, any>>;
  /** A client with the operator's own access, for what a test prepares or inspects directly. */
  admin: DynamoDBClient;
  /** Issues an API key as `agentstate keys create` does. */
  createKey(tenant: string, agents?: string[]): Promise<string>;
  /** Issues an API key and revokes it when `revoke` is called, as `agentstate keys revoke` does. */
  revocableKey(tenant: string): Promise<{ apiKey: string; revoke: () => Promise<void> }>;
  close(): Promise<void>;
}

/**
 * Stands up the stack of the shared `cdk synth` (test/helpers/synth.ts) against the run's
 * DynamoDB Local, on a table of its own: API Gateway in front of the bundles, each function in
 * its own node process with its template environment and role, the stream's event source
 * mapping in front of the change hook.
 */
export async function deployStack(): Promise<DeployedStack> {
  const assembly = await synthesizedAssembly();
  const { template } = readAssembly(assembly);
  const tableName = await createTestTable('deployed');
  const deployment = new Deployment(template, tableName);
  const iam = new Iam(deployment);
  const aws = new AwsStandIn(deployment, iam, dynamoEndpoint(), (functionId) => deployment.physicalName(functionId));
  const awsEndpoint = await aws.start();
  // The X-Ray daemon: segments arrive as UDP datagrams, a JSON header line and the document.
  const traceSegments: Array<Record<string, any>> = [];
  const xray = createSocket('udp4');
  xray.on('message', (datagram) => {
    const [, document] = datagram.toString('utf8').split('\n');
    try {
      traceSegments.push(JSON.parse(document ?? ''));
    } catch {
      // Not a segment document.
    }
  });
  await new Promise<void>((resolve) => xray.bind(0, '127.0.0.1', resolve));
  const lambda = new LambdaService(deployment, { assembly, awsEndpoint, xrayDaemon: `127.0.0.1:${xray.address().port}` });
  aws.onCrash = (functionId) => lambda.kill(functionId);
  const admin = testDynamoDbClient();
  const stream = new StreamEventSource(deployment, lambda, admin, dynamoEndpoint());
  await stream.start();
  return {
    deployment,
    iam,
    aws,
    lambda,
    http: new HttpApiGateway(deployment, lambda),
    webSocket: new WebSocketGateway(deployment, lambda),
    stream,
    queue: new QueueEventSource(deployment, lambda, aws.queues),
    traceSegments,
    admin,
    createKey: async (tenant, agents) => (await new ApiKeyStore(admin, tableName).create({ tenant, agents: agents ?? null })).apiKey,
    revocableKey: async (tenant) => {
      const store = new ApiKeyStore(admin, tableName);
      const { apiKey, key } = await store.create({ tenant });
      return {
        apiKey,
        revoke: async () => {
          await store.revoke(key.keyId);
        },
      };
    },
    close: async () => {
      lambda.stopAll();
      await aws.stop();
      xray.close();
      admin.destroy();
    },
  };
}
