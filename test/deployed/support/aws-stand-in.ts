import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, request, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Deployment } from './deployment.js';
import type { Call, Iam } from './iam.js';

/** What a fault does to one DynamoDB request, decided once DynamoDB Local has answered it. */
export type Fault = 'pass' | 'lose-answer' | 'crash';

/** A DynamoDB request as the stand-in saw it: who sent it, the operation and its input. */
export interface DynamoDbRequest {
  functionId: string;
  operation: string;
  input: Record<string, any>;
}

/** A message on a stand-in queue, as SendMessage(Batch) left it. */
export interface QueuedMessage {
  messageId: string;
  body: string;
  md5OfBody: string;
  attributes: Record<string, { DataType: string; StringValue?: string }>;
  groupId?: string;
  deduplicationId?: string;
  sequenceNumber: string;
  senderId: string;
  sentAt: number;
  receiveCount: number;
}

/**
 * The AWS endpoints a deployed function calls, on one local port, each enforcing the caller's
 * IAM policy from the template before it does anything:
 *
 * - DynamoDB (`X-Amz-Target: DynamoDB_20120810.*`), forwarded to DynamoDB Local; a call the
 *   role does not allow is answered as AWS does, `400 AccessDeniedException`;
 * - EventBridge PutEvents (`X-Amz-Target: AWSEvents.PutEvents`), whose entries are kept;
 * - KMS GenerateDataKey and Decrypt (`X-Amz-Target: TrentService.*`), with a "ciphertext" that
 *   is the key id, the encryption context and the plaintext in the clear: enough to check that
 *   a function unwraps only what was wrapped for it, with the key and context it was wrapped with;
 * - SQS SendMessage and SendMessageBatch (`X-Amz-Target: AmazonSQS.*`), whose messages wait on
 *   their queue (`queues`, by ARN) for the queue event source (queue-source.ts); a FIFO queue
 *   wants a group and a deduplication id on each, and drops a deduplication id it has seen;
 * - the WebSocket stage's Management API (`POST /<stage>/@connections/<id>`), whose messages
 *   are kept per connection, and which answers `410 Gone` for connections marked gone;
 *   `DELETE /<stage>/@connections/<id>` closes one: it is kept in `closedConnections`, and gone;
 * - Lambda Invoke (`POST /2015-03-31/functions/<arn>/invocations`, RequestResponse) of the
 *   functions in `lambdaWorkers`, the `lambda:` workers a test stands up; its payloads are kept
 *   in `lambdaInvocations`.
 *
 * The caller is the access key id of the request's signature: each function process gets its
 * logical id as its key, as each Lambda function gets its own role's credentials.
 */
export class AwsStandIn {
  readonly eventBridgeEntries: Array<Record<string, any>> = [];
  readonly posted = new Map<string, string[]>();
  readonly goneConnections = new Set<string>();
  /** Connections closed by DeleteConnection, in order. */
  readonly closedConnections: string[] = [];
  readonly dynamoDbRequests: DynamoDbRequest[] = [];
  /** Messages waiting, by queue ARN. */
  readonly queues = new Map<string, QueuedMessage[]>();
  /** `lambda:` workers, by function ARN: each answers an invocation's payload with its own. */
  readonly lambdaWorkers = new Map<string, (payload: unknown) => unknown>();
  /** Every invocation of a worker that was let through: who called which function, with what. */
  readonly lambdaInvocations: Array<{ functionId: string; arn: string; payload: unknown }> = [];
  private readonly deduplicationIds = new Set<string>();
  private sequence = 0;
  eventBridgeDown = false;
  /** Decides, per DynamoDB request once answered, whether to pass the answer on. */
  fault: (request: DynamoDbRequest) => Fault = () => 'pass';
  /** Runs before a DynamoDB request is forwarded: what another writer does at that moment (a race a test forces). */
  beforeForward: (request: DynamoDbRequest) => Promise<void> = async () => {};
  /** Called for a `crash` fault: stop the function, as Lambda does at its timeout. */
  onCrash: (functionId: string) => void = () => {};
  private server: Server | undefined;
  private url = '';

  constructor(
    private readonly deployment: Deployment,
    private readonly iam: Iam,
    private readonly dynamoDbEndpoint: string,
    private readonly functionNames: (functionId: string) => string,
  ) {}

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      this.serve(req, res).catch((error: unknown) => {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(String(error));
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this.url;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }

  get endpoint(): string {
    return this.url;
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readBody(req);
    const functionId = /Credential=([^/]+)\//.exec(req.headers.authorization ?? '')?.[1] ?? '';
    const target = String(req.headers['x-amz-target'] ?? '');
    if (target.startsWith('DynamoDB_20120810.'))
      return this.dynamoDb(req, res, { functionId, operation: target.split('.')[1] ?? '', body });
    if (target === 'AWSEvents.PutEvents') return this.putEvents(res, functionId, body);
    if (target.startsWith('TrentService.')) return this.kms(res, { functionId, operation: target.split('.')[1] ?? '', body });
    if (target.startsWith('AmazonSQS.')) return this.sqs(res, { functionId, operation: target.split('.')[1] ?? '', body });
    const invocation = /^\/2015-03-31\/functions\/([^/?]+)\/invocations$/.exec(req.url ?? '');
    if (invocation && req.method === 'POST') {
      return this.invoke(req, res, { functionId, arn: decodeURIComponent(invocation[1] as string), body });
    }
    const connection = /^\/([^/]+)\/@connections\/([^/?]+)$/.exec(req.url ?? '');
    if (connection && (req.method === 'POST' || req.method === 'DELETE')) {
      return this.postToConnection(res, {
        method: req.method,
        functionId,
        stage: connection[1] as string,
        id: decodeURIComponent(connection[2] as string),
        body,
      });
    }
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end(`the stand-in serves no ${req.method} ${req.url} (${target})`);
  }

  private denied(res: ServerResponse, functionId: string, refused: Call, protocol: 'json' | 'rest'): void {
    const message =
      `User: ${this.iam.callerArn(functionId, this.functionNames(functionId))} is not authorized to perform: ${refused.action} ` +
      `on resource: ${refused.resource} because no identity-based policy allows the ${refused.action} action`;
    if (protocol === 'json') {
      res.writeHead(400, { 'content-type': 'application/x-amz-json-1.0' });
      res.end(JSON.stringify({ __type: 'com.amazon.coral.service#AccessDeniedException', Message: message }));
    } else {
      res.writeHead(403, { 'content-type': 'application/json', 'x-amzn-errortype': 'AccessDeniedException' });
      res.end(JSON.stringify({ message }));
    }
  }

  private authorizeAll(functionId: string, calls: Call[]): Call | undefined {
    // Every call is asked (and recorded), so one refusal does not hide another.
    const refused = calls.filter((call) => !this.iam.authorize(functionId, call));
    return refused[0];
  }

  private async dynamoDb(
    req: IncomingMessage,
    res: ServerResponse,
    { functionId, operation, body }: { functionId: string; operation: string; body: Buffer },
  ): Promise<void> {
    const input = JSON.parse(body.toString('utf8') || '{}') as Record<string, any>;
    const seen: DynamoDbRequest = { functionId, operation, input };
    this.dynamoDbRequests.push(seen);
    const refused = this.authorizeAll(
      functionId,
      requiredCalls(operation, input, (table) => this.tableArn(table)),
    );
    if (refused) {
      this.denied(res, functionId, refused, 'json');
      return;
    }
    await this.beforeForward(seen);
    const answer = await forward(this.dynamoDbEndpoint, req, body);
    const fault = this.fault(seen);
    if (fault === 'crash') {
      this.onCrash(functionId);
      res.destroy();
      return;
    }
    if (fault === 'lose-answer') {
      // DynamoDB did the work; the answer never reached the caller, who sees a 500 and retries.
      res.writeHead(500, { 'content-type': 'application/x-amz-json-1.0' });
      res.end(JSON.stringify({ __type: 'com.amazonaws.dynamodb.v20120810#InternalServerError', message: 'answer lost (test fault)' }));
      return;
    }
    res.writeHead(answer.status, answer.headers);
    res.end(answer.body);
  }

  private tableArn(table: string): string {
    return table.startsWith('arn:') ? table : `arn:aws:dynamodb:${this.deployment.region}:${this.deployment.account}:table/${table}`;
  }

  private putEvents(res: ServerResponse, functionId: string, body: Buffer): void {
    if (this.eventBridgeDown) {
      res.destroy();
      return;
    }
    const input = JSON.parse(body.toString('utf8')) as { Entries: Array<Record<string, any>> };
    const busArn = (name: string | undefined) =>
      name?.startsWith('arn:')
        ? name
        : `arn:aws:events:${this.deployment.region}:${this.deployment.account}:event-bus/${name ?? 'default'}`;
    const refused = this.authorizeAll(
      functionId,
      input.Entries.map((entry) => ({ action: 'events:PutEvents', resource: busArn(entry.EventBusName) })),
    );
    if (refused) {
      this.denied(res, functionId, refused, 'json');
      return;
    }
    this.eventBridgeEntries.push(...input.Entries);
    res.writeHead(200, { 'content-type': 'application/x-amz-json-1.1' });
    res.end(JSON.stringify({ FailedEntryCount: 0, Entries: input.Entries.map(() => ({ EventId: randomUUID() })) }));
  }

  private kms(res: ServerResponse, { functionId, operation, body }: { functionId: string; operation: string; body: Buffer }): void {
    const input = JSON.parse(body.toString('utf8') || '{}') as Record<string, any>;
    const answer = (status: number, value: unknown) => {
      res.writeHead(status, { 'content-type': 'application/x-amz-json-1.1' });
      res.end(JSON.stringify(value));
    };
    if (operation === 'GenerateDataKey') {
      const keyId = String(input.KeyId);
      const refused = this.authorizeAll(functionId, [{ action: 'kms:GenerateDataKey', resource: keyId }]);
      if (refused) {
        this.denied(res, functionId, refused, 'json');
        return;
      }
      const plaintext = randomBytes(32).toString('base64');
      const wrapped = Buffer.from(JSON.stringify({ keyId, context: input.EncryptionContext ?? {}, plaintext })).toString('base64');
      answer(200, { KeyId: keyId, Plaintext: plaintext, CiphertextBlob: wrapped });
      return;
    }
    if (operation === 'Decrypt') {
      const wrapped = JSON.parse(Buffer.from(String(input.CiphertextBlob), 'base64').toString('utf8')) as {
        keyId: string;
        context: unknown;
        plaintext: string;
      };
      const refused = this.authorizeAll(functionId, [{ action: 'kms:Decrypt', resource: wrapped.keyId }]);
      if (refused) {
        this.denied(res, functionId, refused, 'json');
        return;
      }
      if (JSON.stringify(wrapped.context) !== JSON.stringify(input.EncryptionContext ?? {})) {
        answer(400, { __type: 'InvalidCiphertextException', message: 'the encryption context does not match' });
        return;
      }
      answer(200, { KeyId: wrapped.keyId, Plaintext: wrapped.plaintext });
      return;
    }
    answer(400, { __type: 'UnsupportedOperationException', message: `the stand-in serves no KMS ${operation}` });
  }

  /** Lambda Invoke, synchronous: the worker's answer as the payload, as Lambda returns a function's result. */
  private invoke(
    req: IncomingMessage,
    res: ServerResponse,
    { functionId, arn, body }: { functionId: string; arn: string; body: Buffer },
  ): void {
    const refused = this.authorizeAll(functionId, [{ action: 'lambda:InvokeFunction', resource: arn }]);
    if (refused) {
      this.denied(res, functionId, refused, 'rest');
      return;
    }
    const worker = this.lambdaWorkers.get(arn);
    if (!worker || (req.headers['x-amz-invocation-type'] ?? 'RequestResponse') !== 'RequestResponse') {
      res.writeHead(404, { 'content-type': 'application/json', 'x-amzn-errortype': 'ResourceNotFoundException' });
      res.end(JSON.stringify({ Type: 'User', message: `Function not found: ${arn}` }));
      return;
    }
    const payload: unknown = JSON.parse(body.toString('utf8'));
    this.lambdaInvocations.push({ functionId, arn, payload });
    res.writeHead(200, { 'content-type': 'application/json', 'x-amz-executed-version': '$LATEST' });
    res.end(JSON.stringify(worker(payload)));
  }

  private sqs(res: ServerResponse, { functionId, operation, body }: { functionId: string; operation: string; body: Buffer }): void {
    const input = JSON.parse(body.toString('utf8') || '{}') as Record<string, any>;
    const answer = (status: number, value: unknown) => {
      res.writeHead(status, { 'content-type': 'application/x-amz-json-1.0' });
      res.end(JSON.stringify(value));
    };
    if (operation !== 'SendMessageBatch' && operation !== 'SendMessage') {
      answer(400, { __type: 'com.amazonaws.sqs#UnsupportedOperation', message: `the stand-in serves no SQS ${operation}` });
      return;
    }
    // https://sqs.<region>.amazonaws.com/<account>/<name> names arn:aws:sqs:<region>:<account>:<name>.
    const [, region, account, name] = /^https:\/\/sqs\.([^.]+)\.amazonaws\.com\/(\d+)\/([^/]+)$/.exec(String(input.QueueUrl)) ?? [];
    if (!name) {
      answer(400, { __type: 'com.amazonaws.sqs#QueueDoesNotExist', message: `no queue ${input.QueueUrl}` });
      return;
    }
    const queueArn = `arn:aws:sqs:${region}:${account}:${name}`;
    // SendMessageBatch is authorized as sqs:SendMessage (the Service Authorization Reference).
    const refused = this.authorizeAll(functionId, [{ action: 'sqs:SendMessage', resource: queueArn }]);
    if (refused) {
      this.denied(res, functionId, refused, 'json');
      return;
    }
    const fifo = name.endsWith('.fifo');
    const entries = (operation === 'SendMessage' ? [{ ...input, Id: 'single' }] : input.Entries) as Array<Record<string, any>>;
    const successful: Array<Record<string, string>> = [];
    const failed: Array<Record<string, unknown>> = [];
    const queue = this.queues.get(queueArn) ?? [];
    this.queues.set(queueArn, queue);
    for (const entry of entries) {
      if (fifo && (!entry.MessageGroupId || !entry.MessageDeduplicationId)) {
        failed.push({
          Id: entry.Id,
          SenderFault: true,
          Code: 'MissingParameter',
          Message: 'a FIFO message needs a group and a deduplication id',
        });
        continue;
      }
      const md5OfBody = createHash('md5').update(String(entry.MessageBody), 'utf8').digest('hex');
      const messageId = randomUUID();
      successful.push({ Id: entry.Id, MessageId: messageId, MD5OfMessageBody: md5OfBody });
      const deduplication = `${queueArn} ${entry.MessageDeduplicationId}`;
      if (fifo && this.deduplicationIds.has(deduplication)) continue;
      this.deduplicationIds.add(deduplication);
      queue.push({
        messageId,
        body: String(entry.MessageBody),
        md5OfBody,
        attributes: entry.MessageAttributes ?? {},
        ...(fifo ? { groupId: entry.MessageGroupId, deduplicationId: entry.MessageDeduplicationId } : {}),
        sequenceNumber: String(++this.sequence).padStart(20, '0'),
        senderId: functionId,
        sentAt: Date.now(),
        receiveCount: 0,
      });
    }
    if (operation === 'SendMessage') {
      const [sent] = successful;
      if (sent) answer(200, { MessageId: sent.MessageId, MD5OfMessageBody: sent.MD5OfMessageBody });
      else answer(400, { __type: 'com.amazonaws.sqs#MissingParameter', message: String(failed[0]?.Message) });
      return;
    }
    answer(200, { Successful: successful, Failed: failed });
  }

  private postToConnection(
    res: ServerResponse,
    { method, functionId, stage, id, body }: { method: 'POST' | 'DELETE'; functionId: string; stage: string; id: string; body: Buffer },
  ): void {
    const [webSocketApi] = this.deployment
      .ofType('AWS::ApiGatewayV2::Api')
      .filter(([, api]) => api.Properties.ProtocolType === 'WEBSOCKET');
    const apiId = this.deployment.ref((webSocketApi as [string, unknown])[0]);
    const resource = `arn:aws:execute-api:${this.deployment.region}:${this.deployment.account}:${apiId}/${stage}/${method}/@connections/${id}`;
    const refused = this.authorizeAll(functionId, [{ action: 'execute-api:ManageConnections', resource }]);
    if (refused) {
      this.denied(res, functionId, refused, 'rest');
      return;
    }
    if (this.goneConnections.has(id)) {
      res.writeHead(410, { 'content-type': 'application/json', 'x-amzn-errortype': 'GoneException' });
      res.end(JSON.stringify({ message: 'GoneException' }));
      return;
    }
    if (method === 'DELETE') {
      this.closedConnections.push(id);
      this.goneConnections.add(id);
      res.writeHead(204);
      res.end();
      return;
    }
    this.posted.set(id, [...(this.posted.get(id) ?? []), body.toString('utf8')]);
    res.writeHead(200);
    res.end();
  }
}

/**
 * What IAM checks for one DynamoDB request (the Service Authorization Reference): the
 * operation's own action on the table (or the index a Query or Scan names); a batch's action
 * on each table it names; and for a transaction, the action of each item's kind, since
 * `TransactWriteItems` has no action of its own.
 */
export function requiredCalls(operation: string, input: Record<string, any>, tableArn: (table: string) => string): Call[] {
  const on = (action: string, table: string, index?: string) => ({
    action: `dynamodb:${action}`,
    resource: index ? `${tableArn(table)}/index/${index}` : tableArn(table),
  });
  switch (operation) {
    case 'BatchGetItem':
    case 'BatchWriteItem':
      return Object.keys(input.RequestItems ?? {}).map((table) => on(operation, table));
    case 'TransactWriteItems': {
      const actions: Record<string, string> = {
        Put: 'PutItem',
        Update: 'UpdateItem',
        Delete: 'DeleteItem',
        ConditionCheck: 'ConditionCheckItem',
      };
      return (input.TransactItems as Array<Record<string, { TableName: string }>>).map((item) => {
        const [kind, detail] = Object.entries(item)[0] as [string, { TableName: string }];
        return on(actions[kind] ?? kind, detail.TableName);
      });
    }
    case 'TransactGetItems':
      return (input.TransactItems as Array<{ Get: { TableName: string } }>).map((item) => on('GetItem', item.Get.TableName));
    case 'Query':
    case 'Scan':
      return [on(operation, input.TableName, input.IndexName)];
    default:
      if (typeof input.TableName === 'string') return [on(operation, input.TableName)];
      return [{ action: `dynamodb:${operation}`, resource: '*' }];
  }
}

export function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

export function forward(
  endpoint: string,
  req: IncomingMessage,
  body: Buffer,
): Promise<{ status: number; headers: Record<string, string | string[]>; body: Buffer }> {
  const target = new URL(endpoint);
  return new Promise((resolve, reject) => {
    const upstream = request(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: target.host },
      },
      (answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (chunk: Buffer) => chunks.push(chunk));
        answer.on('end', () => {
          const headers = Object.fromEntries(
            Object.entries(answer.headers).filter((entry): entry is [string, string | string[]] => entry[1] !== undefined),
          );
          resolve({ status: answer.statusCode ?? 500, headers, body: Buffer.concat(chunks) });
        });
        answer.on('error', reject);
      },
    );
    upstream.on('error', reject);
    upstream.end(body);
  });
}
