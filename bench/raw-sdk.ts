/**
 * The baselines: the raw AWS SDK doing the least DynamoDB work an operation could need, on
 * items shaped like a version item of the same state. Every ratio is taken over these.
 */
import { type DynamoDBClient, GetItemCommand, PutItemCommand, QueryCommand } from '@aws-sdk/client-dynamodb';
import { TENANT } from './config.js';
import { kilobyteState } from './fixture.js';
import type { Operation } from './measure.js';

/** The main table: the raw items live beside agentstate's, under their own partition. */
export const TABLE = 'bench';

const rawItem = (sk: string, counter: number) => ({
  pk: { S: `RAW#${TENANT}` },
  sk: { S: sk },
  kind: { S: 'v' },
  version: { N: String(counter) },
  state: { S: JSON.stringify(kilobyteState(counter)) },
});

/** The two items the raw reads read. */
export async function writeRawItems(client: DynamoDBClient): Promise<void> {
  await client.send(new PutItemCommand({ TableName: TABLE, Item: rawItem('V#000000000001', 1) }));
  await client.send(new PutItemCommand({ TableName: TABLE, Item: rawItem('V#000000000002', 2) }));
}

let rawPutCounter = 10;
/** The newest raw item: the request shape agentstate's tip read has (newest version of a session). */
export const rawNewest = (on: DynamoDBClient) =>
  on.send(
    new QueryCommand({
      TableName: TABLE,
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :v)',
      ExpressionAttributeValues: { ':pk': { S: `RAW#${TENANT}` }, ':v': { S: 'V#' } },
      ScanIndexForward: false,
      Limit: 1,
      ConsistentRead: true,
    }),
  );
export const rawGet = (on: DynamoDBClient) =>
  on.send(new GetItemCommand({ TableName: TABLE, Key: { pk: { S: `RAW#${TENANT}` }, sk: { S: 'V#000000000002' } }, ConsistentRead: true }));
export const rawPut = (on: DynamoDBClient) => {
  const counter = ++rawPutCounter;
  return on.send(
    new PutItemCommand({
      TableName: TABLE,
      Item: rawItem(`V#${String(counter).padStart(12, '0')}`, counter),
      ConditionExpression: 'attribute_not_exists(pk)',
    }),
  );
};

export const RAW_GET = 'GetItem, 1 KB item (consistent)';
export const RAW_PUT = 'PutItem if absent, 1 KB item';
export const RAW_QUERY = 'Query newest item, limit 1';
export const RAW_QUERY_PUT = 'Query newest item, then PutItem if absent (the requests of a patch)';
export const RAW_READ_MODIFY_WRITE = 'GetItem then PutItem if absent (read-modify-write floor)';

/** The raw rows of section 1: single requests, and the very requests a read and a patch make. */
export function rawOperations(client: DynamoDBClient): Operation[] {
  return [
    { name: RAW_GET, layer: 'raw', kind: 'read', make: () => () => rawGet(client) },
    { name: RAW_PUT, layer: 'raw', kind: 'write', make: () => () => rawPut(client) },
    { name: RAW_QUERY, layer: 'raw', kind: 'read', make: () => () => rawNewest(client) },
    {
      name: RAW_QUERY_PUT,
      layer: 'raw',
      kind: 'write',
      make: () => async () => {
        await rawNewest(client);
        await rawPut(client);
      },
    },
    {
      name: RAW_READ_MODIFY_WRITE,
      layer: 'raw',
      kind: 'write',
      make: () => async () => {
        await rawGet(client);
        await rawPut(client);
      },
    },
  ];
}
