/**
 * Section 1b: agentstate's own code. The ratios of section 1 mix our code with DynamoDB
 * Local's own costs (a Query answers slower than a GetItem there). To weigh our code alone,
 * the same requests go to a stub DynamoDB that answers at once with the very items DynamoDB
 * Local returned: the SDK still builds, signs and parses every request, so raw and handler
 * differ only by what agentstate does around them.
 */
import { DynamoDBClient, type DynamoDBClientConfig, QueryCommand } from '@aws-sdk/client-dynamodb';
import { dependenciesFor, useDependencies } from '../functions/http/dependencies.js';
import { keysFromEnv } from '../functions/http/edge/auth.js';
import { createStores } from '../functions/store/index.js';
import { API_KEY, log, STUB_ROUNDS, TENANT } from './config.js';
import { sessionIds as s, type Wired } from './fixture.js';
import { type Measured, measureAll, median, pad, padLeft, tableRow } from './measure.js';
import type { Meter } from './meter.js';
import { getHeadState, patchHeadState } from './operations.js';
import { rawGet, rawNewest, rawPut, TABLE } from './raw-sdk.js';

export interface OwnCodeResult {
  /** Raw Query, handler GET, raw Query and PutItem, handler PATCH, in that order. */
  ownCode: Measured[];
  /** The SDK's own cost of one request (the raw Query), µs. */
  stubQuery: number;
  ownGetMicros: number;
  ownPatchMicros: number;
}

export async function measureOwnCode(meter: Meter, client: DynamoDBClient, main: Wired): Promise<OwnCodeResult> {
  log(`\n1b. agentstate's own code: the same requests answered at once by a stub DynamoDB`);
  const stubClient = await stubDynamoDb(client);
  const stub = dependenciesFor(createStores(stubClient, TABLE), { resolveKey: keysFromEnv(`${TENANT}:${API_KEY}`) });
  useDependencies(stub);
  const ownCode = await measureAll(
    meter,
    [
      { name: 'raw Query newest', layer: 'raw', kind: 'read', make: () => () => rawNewest(stubClient) },
      { name: 'handler GET state (head)', layer: 'handler', kind: 'read', make: getHeadState },
      {
        name: 'raw Query newest, then PutItem',
        layer: 'raw',
        kind: 'write',
        make: () => async () => {
          await rawNewest(stubClient);
          await rawPut(stubClient);
        },
      },
      { name: 'handler PATCH state', layer: 'handler', kind: 'write', make: patchHeadState },
    ],
    STUB_ROUNDS,
    Math.floor(STUB_ROUNDS / 5),
  );
  useDependencies(main.deps);
  const [stubQuery, stubGet, stubQueryPut, stubPatch] = ownCode.map((entry) => median(entry.samples) * 1000) as [
    number,
    number,
    number,
    number,
  ];
  const ownGetMicros = stubGet - stubQuery;
  const ownPatchMicros = stubPatch - stubQueryPut;
  for (const entry of ownCode) log(`  ${pad(entry.operation.name, 40)} ${padLeft((median(entry.samples) * 1000).toFixed(0), 6)} µs`);
  log(
    `  agentstate's code: GET +${ownGetMicros.toFixed(0)} µs over its Query, ` +
      `PATCH +${ownPatchMicros.toFixed(0)} µs over its Query and PutItem`,
  );
  return { ownCode, stubQuery, ownGetMicros, ownPatchMicros };
}

/**
 * A DynamoDB client whose every request is answered at once with what DynamoDB Local answered
 * the same request (the newest version of the PATCH session, the raw item, an empty PutItem).
 */
export async function stubDynamoDb(client: DynamoDBClient): Promise<DynamoDBClient> {
  const answers = new Map<string, Uint8Array>();
  const wireBody = (body: unknown) => new TextEncoder().encode(JSON.stringify(body));
  {
    const tip = await client.send(
      new QueryCommand({
        TableName: TABLE,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :v)',
        ExpressionAttributeValues: { ':pk': { S: `S#${TENANT}#${s.patch}` }, ':v': { S: 'V#' } },
        ScanIndexForward: false,
        Limit: 1,
        ConsistentRead: true,
      }),
    );
    answers.set('Query', wireBody({ Count: 1, ScannedCount: 1, Items: tip.Items }));
    answers.set('GetItem', wireBody({ Item: (await rawGet(client)).Item }));
    answers.set('PutItem', wireBody({}));
  }
  return new DynamoDBClient({
    region: 'us-east-1',
    endpoint: 'http://stub.invalid',
    credentials: { accessKeyId: 'stub', secretAccessKey: 'stub' },
    requestHandler: {
      handle: async (request: { headers: Record<string, string> }) => {
        const operation = String(request.headers['x-amz-target']).split('.')[1] ?? '';
        const body = answers.get(operation);
        if (!body) throw new Error(`the stub DynamoDB does not answer ${operation}`);
        return { response: { statusCode: 200, headers: { 'content-type': 'application/x-amz-json-1.0' }, body } };
      },
    } as unknown as DynamoDBClientConfig['requestHandler'],
  });
}

export function ownCodeTable(ownCode: Measured[]): string {
  return [
    '| operation | median µs |',
    '|---|---:|',
    ...ownCode.map((entry) =>
      tableRow([
        `${entry.operation.layer}: ${entry.operation.name.replace(/^(raw|handler) /, '')}`,
        (median(entry.samples) * 1000).toFixed(0),
      ]),
    ),
  ].join('\n');
}
