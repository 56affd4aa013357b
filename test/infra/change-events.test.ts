import { readFileSync } from 'node:fs';
import { type CfnElement, Duration, Stack } from 'aws-cdk-lib';
import { Match } from 'aws-cdk-lib/assertions';
import type { IConstruct } from 'constructs';
import { beforeAll, describe, expect, it } from 'vitest';
import { changeRecordFilters } from '../../functions/store/events/stream-images.js';
import { DOCUMENT_ITEM_KIND, LOG_ITEM_KIND, MEMORY_ITEM_KIND } from '../../functions/store/table/item-kinds.js';
import type { AgentStateStack } from '../../lib/agent-state-stack.js';
import { deliveryHookAccess, liveHookAccess, routeGroupAccess, webhookHookAccess, webSocketAccess } from '../../lib/permissions.js';
import { synthesize, TemplateReader } from './support.js';

let stack: AgentStateStack;
let reader: TemplateReader;

const logicalId = (construct: IConstruct) => Stack.of(construct).getLogicalId(construct.node.defaultChild as CfnElement);

beforeAll(() => {
  const synthesized = synthesize();
  stack = synthesized.stack;
  reader = new TemplateReader(synthesized.template);
});

describe('change hook on the table stream', () => {
  it('feeds two consumers, live and webhooks, each only version records, with partial batch failures, bisection, bounded retries and an on-failure queue', () => {
    // Prepare
    const streamArn = { 'Fn::GetAtt': [logicalId(stack.agentState.table), 'StreamArn'] };
    const mappings = reader
      .ofType('AWS::Lambda::EventSourceMapping')
      .map(([, mapping]) => mapping.Properties)
      .filter((properties) => JSON.stringify(properties.EventSourceArn) === JSON.stringify(streamArn));
    const common = {
      EventSourceArn: streamArn,
      StartingPosition: 'TRIM_HORIZON',
      BatchSize: 100,
      BisectBatchOnFunctionError: true,
      MaximumRetryAttempts: 5,
      MaximumRecordAgeInSeconds: 6 * 60 * 60,
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      DestinationConfig: { OnFailure: { Destination: { 'Fn::GetAtt': [logicalId(stack.agentState.deadLetterQueue), 'Arn'] } } },
      FilterCriteria: { Filters: changeRecordFilters.map((pattern) => ({ Pattern: JSON.stringify(pattern) })) },
    };

    // Assess: the webhook consumer reads a shard's sessions 10 batches at a time.
    expect(mappings).toHaveLength(2);
    expect(mappings).toContainEqual({ ...common, FunctionName: { Ref: logicalId(stack.agentState.changeHook) } });
    expect(mappings).toContainEqual({
      ...common,
      FunctionName: { Ref: logicalId(stack.agentState.webhookHook) },
      ParallelizationFactor: 10,
    });
  });

  it('takes the stream reading settings of its props, and keeps what delivery rests on whatever they say', () => {
    // Prepare
    const custom = synthesize({
      streamReading: { batchSize: 25, retryAttempts: 2, maxRecordAge: Duration.minutes(30), webhookParallelization: 3 },
    });
    const customReader = new TemplateReader(custom.template);

    // Act
    const mappings = customReader
      .ofType('AWS::Lambda::EventSourceMapping')
      .map(([, mapping]) => mapping.Properties)
      .filter((properties) => properties.StartingPosition === 'TRIM_HORIZON');

    // Assess: both consumers read as told; bisection and partial failures stay on.
    expect(mappings).toHaveLength(2);
    for (const mapping of mappings) {
      expect(mapping).toMatchObject({
        BatchSize: 25,
        MaximumRetryAttempts: 2,
        MaximumRecordAgeInSeconds: 30 * 60,
        BisectBatchOnFunctionError: true,
        FunctionResponseTypes: ['ReportBatchItemFailures'],
      });
    }
    expect(mappings.map((mapping) => mapping.ParallelizationFactor ?? 1).sort()).toEqual([1, 3]);
  });

  it.each([
    [{ batchSize: 0 }, /batchSize must be a whole number from 1 to 10000, not 0/],
    [{ retryAttempts: -1 }, /retryAttempts must be a whole number from 0 to 10000/],
    [{ webhookParallelization: 11 }, /webhookParallelization must be a whole number from 1 to 10, not 11/],
    [{ maxRecordAge: Duration.seconds(30) }, /maxRecordAge \(seconds\) must be a whole number from 60 to 604800, not 30/],
  ])('refuses stream reading settings out of range: %o', (streamReading, message) => {
    expect(() => synthesize({ streamReading })).toThrow(message);
  });

  it('filters on INSERTs of version items, expiry fences, erases handed over, copies opened, TTL removals of session items, document writes, erasures and memory items', () => {
    expect(changeRecordFilters).toEqual([
      { eventName: ['INSERT'], dynamodb: { NewImage: { kind: { S: [LOG_ITEM_KIND.version] } } } },
      // Expiry (API.md section 12): the fence of the delete that carries one out (its event), and
      // DynamoDB's TTL removing a session's item (the change hook sweeps the rest).
      { eventName: ['INSERT'], dynamodb: { NewImage: { kind: { S: [LOG_ITEM_KIND.tombstone] }, cause: { S: ['expired'] } } } },
      // A delete's erase that did not fit its request, handed to the change hook (session-delete.ts).
      {
        eventName: ['MODIFY'],
        dynamodb: { NewImage: { kind: { S: [LOG_ITEM_KIND.tombstone] }, fence: { S: ['closing'] }, eh: { S: ['hook'] } } },
      },
      // The change that opens a copy's session (one of its own, or the copy's last append) releases the copy's versions' events (session-copy.ts).
      {
        eventName: ['INSERT'],
        dynamodb: { NewImage: { kind: { S: [LOG_ITEM_KIND.settings, LOG_ITEM_KIND.nodes] }, opens: { S: ['copy'] } } },
      },
      {
        eventName: ['REMOVE'],
        userIdentity: { type: ['Service'], principalId: ['dynamodb.amazonaws.com'] },
        dynamodb: { Keys: { sk: { S: ['S'] } } },
      },
      {
        eventName: ['INSERT', 'MODIFY'],
        dynamodb: { NewImage: { kind: { S: [DOCUMENT_ITEM_KIND.run, DOCUMENT_ITEM_KIND.profile, DOCUMENT_ITEM_KIND.shared] } } },
      },
      // A user's erasure under way (each step's write brings the change hook's next) and done (its user.erased event).
      {
        eventName: ['INSERT', 'MODIFY'],
        dynamodb: { NewImage: { kind: { S: ['erasure'] }, status: { S: ['closing', 'running', 'done'] } } },
      },
      // Memory: puts and deletes, and TTL's removals (the namespace list follows those too).
      { eventName: ['INSERT', 'MODIFY'], dynamodb: { NewImage: { kind: { S: [MEMORY_ITEM_KIND.item, MEMORY_ITEM_KIND.deleted] } } } },
      {
        eventName: ['REMOVE', 'UNKNOWN_TO_SDK_VERSION'],
        dynamodb: { OldImage: { kind: { S: [MEMORY_ITEM_KIND.item, MEMORY_ITEM_KIND.deleted] } } },
      },
    ]);
  });

  it('keeps failed records in an encrypted, TLS-only queue for 14 days', () => {
    const queueId = logicalId(stack.agentState.deadLetterQueue);
    reader.template.hasResourceProperties('AWS::SQS::Queue', { SqsManagedSseEnabled: true, MessageRetentionPeriod: 14 * 24 * 60 * 60 });
    reader.template.hasResourceProperties('AWS::SQS::QueuePolicy', {
      Queues: [{ Ref: queueId }],
      PolicyDocument: {
        Statement: Match.arrayWith([Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } })]),
      },
    });
  });

  it('tells the change hook its bus and WebSocket endpoint, and lets it put events on that bus only', () => {
    const fn = reader.get(logicalId(stack.agentState.changeHook));
    const busId = logicalId(stack.agentState.eventBus);
    expect(fn.Properties?.Environment).toEqual({
      Variables: {
        AGENTSTATE_TABLE: { Ref: logicalId(stack.agentState.table) },
        NODE_OPTIONS: '--enable-source-maps',
        AGENTSTATE_EVENT_BUS: { Ref: busId },
        AGENTSTATE_WEBSOCKET_ENDPOINT: expect.objectContaining({ 'Fn::Join': expect.anything() }),
        POWERTOOLS_SERVICE_NAME: 'agentstate',
        POWERTOOLS_METRICS_NAMESPACE: 'agentstate',
        POWERTOOLS_LOG_LEVEL: 'INFO',
        AGENTSTATE_TRACING: 'lambda',
      },
    });
    const statements = reader.statementsOf(reader.roleOf(logicalId(stack.agentState.changeHook)));
    expect(statements).toContainEqual(expect.objectContaining({ Action: 'events:PutEvents', Resource: { 'Fn::GetAtt': [busId, 'Arn'] } }));
  });

  it('gives the webhook hook neither the bus nor the WebSocket stage', () => {
    const actions = reader
      .statementsOf(reader.roleOf(logicalId(stack.agentState.webhookHook)))
      .flatMap((statement) => [statement.Action].flat());
    expect(actions.filter((action) => action.startsWith('events:') || action.startsWith('execute-api:'))).toEqual([]);
  });

  it.each([
    ['the change hook', () => stack.agentState.changeHook],
    ['the WebSocket function', () => stack.agentState.webSocketFunction],
  ])('lets %s post to and close connections of its own WebSocket stage, and nothing else of the API', (_name, fn) => {
    const statements = reader.statementsOf(reader.roleOf(logicalId(fn())));
    const manage = statements.filter((statement) => [statement.Action].flat().includes('execute-api:ManageConnections'));
    expect(manage).toHaveLength(1);
    const resources = [manage[0]?.Resource].flat().map((resource) => JSON.stringify(resource));
    // POST (events, answers) and DELETE (the connections of a revoked key), each on this API's stage: no GET, no other stage.
    expect(resources).toHaveLength(2);
    for (const resource of resources) expect(resource).toContain(`{"Ref":"${logicalId(stack.agentState.webSocketApi)}"}`);
    expect(resources.map((resource) => /\/v1\/(\w+)\/@connections\/\*/.exec(resource)?.[1]).sort()).toEqual(['DELETE', 'POST']);
  });

  it('grants every DynamoDB action the event stores send (tripwire for new store calls)', () => {
    // Prepare: each store file and the functions that use it.
    const users: Record<string, readonly string[]> = {
      'events/webhook-store.ts': [...routeGroupAccess.webhooks.table, ...webhookHookAccess.table, ...deliveryHookAccess.table],
      'events/live-store.ts': [...webSocketAccess.table, ...liveHookAccess.table],
      'events/stream-images.ts': [...liveHookAccess.table, ...webhookHookAccess.table],
    };
    const commandActions: Record<string, readonly string[]> = {
      Get: ['dynamodb:GetItem'],
      Query: ['dynamodb:Query'],
      Put: ['dynamodb:PutItem'],
      Update: ['dynamodb:UpdateItem'],
      Delete: ['dynamodb:DeleteItem'],
      // IAM authorizes a transaction by the actions of its items: live-store.ts's follow and leave
      // update the connection and put or delete a follower.
      TransactWrite: ['dynamodb:UpdateItem', 'dynamodb:PutItem', 'dynamodb:DeleteItem'],
    };

    for (const [file, granted] of Object.entries(users)) {
      // Act
      const source = readFileSync(new URL(`../../functions/store/${file}`, import.meta.url), 'utf8');
      const used = [...source.matchAll(/new (\w+?)(?:Item)?Command\(/g)].flatMap(([, command]) => {
        const action = commandActions[command as string];
        if (!action) throw new Error(`${file} sends ${command}Command: map it to an IAM action in this test`);
        return action;
      });

      // Assess
      expect(
        used.filter((action) => !granted.includes(action)),
        file,
      ).toEqual([]);
    }
  });
});

describe('webhook lanes (an SQS FIFO queue, functions/streams/webhook-queue.ts)', () => {
  const queueId = () => logicalId(stack.agentState.webhookQueue);
  const failuresId = () => logicalId(stack.agentState.webhookDeliveryFailures);

  it('queue deliveries on a high-throughput FIFO queue of 1 MiB messages, encrypted, TLS only, with a FIFO dead-letter queue after 5 receives', () => {
    expect(reader.get(queueId()).Properties).toEqual({
      FifoQueue: true,
      SqsManagedSseEnabled: true,
      DeduplicationScope: 'messageGroup',
      FifoThroughputLimit: 'perMessageGroupId',
      MaximumMessageSize: 1024 * 1024,
      MessageRetentionPeriod: 14 * 24 * 60 * 60,
      VisibilityTimeout: 6 * 30,
      RedrivePolicy: { deadLetterTargetArn: { 'Fn::GetAtt': [failuresId(), 'Arn'] }, maxReceiveCount: 5 },
    });
    expect(reader.get(failuresId()).Properties).toEqual({
      FifoQueue: true,
      SqsManagedSseEnabled: true,
      MaximumMessageSize: 1024 * 1024,
      MessageRetentionPeriod: 14 * 24 * 60 * 60,
    });
    for (const id of [queueId(), failuresId()]) {
      reader.template.hasResourceProperties('AWS::SQS::QueuePolicy', {
        Queues: [{ Ref: id }],
        PolicyDocument: {
          Statement: Match.arrayWith([Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } })]),
        },
      });
    }
  });

  it('hand the delivery hook one message at a time, with partial batch failures and a bound on concurrency', () => {
    const mappings = reader
      .ofType('AWS::Lambda::EventSourceMapping')
      .map(([, mapping]) => mapping.Properties)
      .filter((properties) => JSON.stringify(properties.EventSourceArn) === JSON.stringify({ 'Fn::GetAtt': [queueId(), 'Arn'] }));
    expect(mappings).toEqual([
      {
        EventSourceArn: { 'Fn::GetAtt': [queueId(), 'Arn'] },
        FunctionName: { Ref: logicalId(stack.agentState.deliveryHook) },
        BatchSize: 1,
        FunctionResponseTypes: ['ReportBatchItemFailures'],
        ScalingConfig: { MaximumConcurrency: 100 },
      },
    ]);
  });

  it('let the webhook hook send to the queue and nothing else of it, and tell it where the queue is', () => {
    const variables = (reader.get(logicalId(stack.agentState.webhookHook)).Properties.Environment as { Variables: Record<string, unknown> })
      .Variables;
    expect(variables.AGENTSTATE_WEBHOOK_QUEUE_URL).toEqual({ Ref: queueId() });
    // (Its other SQS grant is its mapping's on-failure queue, which Lambda sends to.)
    const onWebhookQueue = reader
      .statementsOf(reader.roleOf(logicalId(stack.agentState.webhookHook)))
      .filter((statement) => JSON.stringify(statement.Resource).includes(`"${queueId()}"`));
    expect(onWebhookQueue).toEqual([
      expect.objectContaining({ Action: 'sqs:SendMessage', Resource: { 'Fn::GetAtt': [queueId(), 'Arn'] } }),
    ]);
  });

  it('give the delivery hook neither the stream, the bus, the WebSocket stage nor a way to send to the queue', () => {
    const actions = reader
      .statementsOf(reader.roleOf(logicalId(stack.agentState.deliveryHook)))
      .flatMap((statement) => [statement.Action].flat());
    expect(
      actions.filter(
        (action) =>
          action.startsWith('events:') ||
          action.startsWith('execute-api:') ||
          action === 'sqs:SendMessage' ||
          action === 'dynamodb:GetRecords',
      ),
    ).toEqual([]);
  });

  it('alarm on any delivery in the dead-letter queue', () => {
    reader.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'AWS/SQS',
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [failuresId(), 'QueueName'] } }],
      Threshold: 1,
    });
  });
});

describe('EventBridge', () => {
  it('has the bus and outputs its name', () => {
    reader.template.resourceCountIs('AWS::Events::EventBus', 1);
    reader.template.hasOutput('EventBusName', { Value: { Ref: logicalId(stack.agentState.eventBus) } });
  });
});

describe('WebSocket API', () => {
  const webSocketRoutes = () =>
    reader
      .ofType('AWS::ApiGatewayV2::Route')
      .filter(([, route]) => (route.Properties.ApiId as { Ref: string }).Ref === logicalId(stack.agentState.webSocketApi));

  it('selects routes by the message action', () => {
    reader.template.hasResourceProperties('AWS::ApiGatewayV2::Api', {
      ProtocolType: 'WEBSOCKET',
      RouteSelectionExpression: '$request.body.action',
    });
  });

  it('has $connect, $disconnect, $default, subscribe and unsubscribe, all served by the WebSocket function', () => {
    // Prepare
    const fnId = logicalId(stack.agentState.webSocketFunction);

    // Act
    const routes = webSocketRoutes();

    // Assess
    expect(routes.map(([, route]) => route.Properties?.RouteKey).sort()).toEqual([
      '$connect',
      '$default',
      '$disconnect',
      'subscribe',
      'unsubscribe',
    ]);
    for (const [id, route] of routes) {
      const integrationId = /"Ref":"([^"]+)"/.exec(JSON.stringify(route.Properties?.Target))?.[1] as string;
      expect(JSON.stringify(reader.get(integrationId).Properties?.IntegrationUri), id).toContain(fnId);
    }
  });

  it('answers subscribe, unsubscribe and $default on the connection (two-way routes)', () => {
    const responses = reader
      .ofType('AWS::ApiGatewayV2::RouteResponse')
      .map(([, response]) => response.Properties?.RouteId as { Ref: string });
    const keyOf = (ref: { Ref: string }) => reader.get(ref.Ref).Properties?.RouteKey;
    expect(responses.map(keyOf).sort()).toEqual(['$default', 'subscribe', 'unsubscribe']);
  });

  it('deploys stage v1 with throttling and outputs its wss:// URL', () => {
    reader.template.hasResourceProperties('AWS::ApiGatewayV2::Stage', {
      ApiId: { Ref: logicalId(stack.agentState.webSocketApi) },
      StageName: 'v1',
      AutoDeploy: true,
      DefaultRouteSettings: { ThrottlingRateLimit: 50, ThrottlingBurstLimit: 100 },
    });
    const url = JSON.stringify(reader.template.toJSON().Outputs.WebSocketUrl.Value);
    expect(url).toContain('wss://');
    expect(url).toContain('/v1');
  });

  it('resolves keys from the table only, never from a local key list; closes connections on its own stage', () => {
    const fn = reader.get(logicalId(stack.agentState.webSocketFunction));
    expect(fn.Properties?.Environment).toEqual({
      Variables: {
        AGENTSTATE_TABLE: { Ref: logicalId(stack.agentState.table) },
        NODE_OPTIONS: '--enable-source-maps',
        AGENTSTATE_AUTH: 'table',
        POWERTOOLS_SERVICE_NAME: 'agentstate',
        POWERTOOLS_METRICS_NAMESPACE: 'agentstate',
        POWERTOOLS_LOG_LEVEL: 'INFO',
        AGENTSTATE_TRACING: 'lambda',
        // A revoked key's message is answered, and its connection closed, through the stage's Management API.
        AGENTSTATE_WEBSOCKET_ENDPOINT: expect.anything(),
      },
    });
    const endpoint = JSON.stringify(
      (fn.Properties as { Environment: { Variables: Record<string, unknown> } }).Environment.Variables.AGENTSTATE_WEBSOCKET_ENDPOINT,
    );
    expect(endpoint).toContain(`{"Ref":"${logicalId(stack.agentState.webSocketApi)}"}`);
    expect(endpoint).toContain('/v1');
  });

  it('writes WebSocket access logs when asked to', () => {
    const { template } = synthesize({ webSocketAccessLogs: true });
    template.hasResourceProperties('AWS::ApiGatewayV2::Stage', {
      StageName: 'v1',
      AccessLogSettings: { DestinationArn: Match.anyValue(), Format: Match.stringLikeRegexp('connectionId') },
    });
  });
});

describe('alarms', () => {
  it('alarms when change events run a minute behind, and on any record in the on-failure queue', () => {
    reader.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'AWS/Lambda',
      MetricName: 'IteratorAge',
      Dimensions: [{ Name: 'FunctionName', Value: { Ref: logicalId(stack.agentState.changeHook) } }],
      Statistic: 'Maximum',
      Threshold: 60_000,
    });
    reader.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'AWS/Lambda',
      MetricName: 'IteratorAge',
      Dimensions: [{ Name: 'FunctionName', Value: { Ref: logicalId(stack.agentState.webhookHook) } }],
      Statistic: 'Maximum',
      Threshold: 60_000,
    });
    reader.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'AWS/SQS',
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [logicalId(stack.agentState.deadLetterQueue), 'QueueName'] } }],
      Threshold: 1,
    });
  });
});
