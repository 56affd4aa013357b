/**
 * What a test does as the operator of a server it started: find the server's DynamoDB Local,
 * read its table directly, and run the admin CLI against it (in-process, as `agentstate`
 * runs), most often to issue a key limited to some agents.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { main } from '../../bin/agentstate.js';
import { defaultTableName } from '../../functions/store/table/table.js';

/** The endpoint of the DynamoDB Local a server started, as its banner names it. */
export function dynamoDbEndpointOf(server: { output(): string }): string {
  const endpoint = /DynamoDB Local: (\S+)/.exec(server.output())?.[1];
  if (!endpoint) throw new Error(`no DynamoDB Local endpoint in the banner:\n${server.output()}`);
  return endpoint;
}

/** A document client on that DynamoDB Local, to look at (or plant) items as they are stored. */
export function rawTableClient(endpoint: string): DynamoDBDocumentClient {
  return DynamoDBDocumentClient.from(
    new DynamoDBClient({ endpoint, region: 'local', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }),
  );
}

/** Every item of the server's table, read raw and consistently; only those of partition `pk` when given. */
export async function scanTable(raw: DynamoDBDocumentClient, pk?: string): Promise<Array<Record<string, unknown>>> {
  const items: Array<Record<string, unknown>> = [];
  let start: Record<string, unknown> | undefined;
  do {
    const page = await raw.send(
      new ScanCommand({
        TableName: defaultTableName,
        ConsistentRead: true,
        ExclusiveStartKey: start,
        ...(pk === undefined ? {} : { FilterExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': pk } }),
      }),
    );
    items.push(...(page.Items ?? []));
    start = page.LastEvaluatedKey;
  } while (start);
  return items;
}

/** Runs the admin CLI against `endpoint`; its output, or an error naming its exit code and what it wrote. */
export async function adminCli(endpoint: string, ...args: string[]): Promise<string> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main([...args, '--endpoint', endpoint], { out: (line) => out.push(line), err: (line) => err.push(line), env: {} });
  if (code !== 0) throw new Error(`agentstate ${args.join(' ')} exited ${code}:\n${[...out, ...err].join('\n')}`);
  return out.join('\n');
}

/** A new key of `tenant` (default `local`), limited to `agents` when any are named. */
export async function issueKey(endpoint: string, options: { agents?: readonly string[]; tenant?: string } = {}): Promise<string> {
  const agents = options.agents?.length ? ['--agents', options.agents.join(',')] : [];
  const issued = await adminCli(endpoint, 'keys', 'create', '--tenant', options.tenant ?? 'local', ...agents, '--json');
  return (JSON.parse(issued) as { apiKey: string }).apiKey;
}
