import { type CfnElement, Duration, RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import { Annotations, Match } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { beforeAll, describe, expect, it } from 'vitest';
import { type RouteGroup, routeGroups, routeKey, routes } from '../../functions/http/contract/routes.js';
import { corsPolicy } from '../../functions/http/edge/cors.js';
import { tableKeys } from '../../functions/store/table/table.js';
import type { AgentStateStack } from '../../lib/agent-state-stack.js';
import { deployedEntries } from '../../lib/entries.js';
import {
  authorizerAccess,
  deliveryHookAccess,
  liveHookAccess,
  publicGroups,
  routeGroupAccess,
  webhookHookAccess,
  webSocketAccess,
  workerCallingGroups,
  workerCheckingGroups,
} from '../../lib/permissions.js';
import { synthesize, TemplateReader } from './support.js';

let stack: AgentStateStack;
let reader: TemplateReader;

/** What every function is given for Powertools and its tracing level (functions/telemetry/telemetry.ts), by default. */
const POWERTOOLS = {
  POWERTOOLS_SERVICE_NAME: 'agentstate',
  POWERTOOLS_METRICS_NAMESPACE: 'agentstate',
  POWERTOOLS_LOG_LEVEL: 'INFO',
  AGENTSTATE_TRACING: 'lambda',
};

/** The logical id of a construct's CloudFormation resource. */
const logicalId = (construct: IConstruct) => Stack.of(construct).getLogicalId(construct.node.defaultChild as CfnElement);

beforeAll(() => {
  const synthesized = synthesize();
  stack = synthesized.stack;
  reader = new TemplateReader(synthesized.template);
});

/** The routes of the HTTP API (the WebSocket API has routes of its own). */
const httpRoutes = () =>
  reader
    .ofType('AWS::ApiGatewayV2::Route')
    .filter(([, route]) => (route.Properties.ApiId as { Ref: string }).Ref === logicalId(stack.agentState.api));

describe('routes', () => {
  it('has exactly the routes of functions/http/contract/routes.ts', () => {
    const deployed = httpRoutes().map(([, route]) => route.Properties?.RouteKey);
    expect(deployed.sort()).toEqual(routes.map(routeKey).sort());
  });

  it.each(routes.map((route) => [routeKey(route), route.group] as const))('%s goes to the %s function', (key, group) => {
    // Prepare
    const functionId = logicalId(stack.agentState.functions[group] as IConstruct);
    const [, route] = reader.ofType('AWS::ApiGatewayV2::Route').find(([, r]) => r.Properties?.RouteKey === key) ?? [];

    // Act
    const target = JSON.stringify(route?.Properties?.Target);
    const integrationId = /"Ref":"([^"]+)"/.exec(target)?.[1] as string;
    const integration = reader.get(integrationId).Properties;

    // Assess
    expect(integration).toMatchObject({
      IntegrationType: 'AWS_PROXY',
      PayloadFormatVersion: '2.0',
      IntegrationUri: { 'Fn::GetAtt': [functionId, 'Arn'] },
    });
  });

  it('asks for an API key on every route but GET /health, GET /v1/openapi.json and the inspector page', () => {
    const authorizerId = reader.ofType('AWS::ApiGatewayV2::Authorizer')[0]?.[0];
    for (const [, route] of httpRoutes()) {
      const key = route.Properties?.RouteKey as string;
      const group = routes.find((r) => routeKey(r) === key)?.group as string;
      if (publicGroups.includes(group)) {
        expect(route.Properties, key).toMatchObject({ AuthorizationType: 'NONE' });
        expect(route.Properties?.AuthorizerId, key).toBeUndefined();
      } else {
        expect(route.Properties, key).toMatchObject({ AuthorizationType: 'CUSTOM', AuthorizerId: { Ref: authorizerId } });
      }
    }
    expect(publicGroups).toEqual(['health', 'inspector']);
    expect(routes.filter((route) => route.group === 'health').map(routeKey)).toEqual(['GET /health', 'GET /v1/openapi.json']);
    const inspectorRoutes = routes.filter((route) => route.group === 'inspector').map(routeKey);
    expect(inspectorRoutes).toEqual(['GET /', 'GET /inspector/{file}']);
  });

  it('authorizes with the API key authorizer: simple responses, Authorization header, 5 minute cache', () => {
    reader.template.resourceCountIs('AWS::ApiGatewayV2::Authorizer', 1);
    reader.template.hasResourceProperties('AWS::ApiGatewayV2::Authorizer', {
      AuthorizerType: 'REQUEST',
      AuthorizerPayloadFormatVersion: '2.0',
      EnableSimpleResponses: true,
      IdentitySource: ['$request.header.Authorization'],
      AuthorizerResultTtlInSeconds: 300,
      AuthorizerUri: Match.objectLike({
        'Fn::Join': Match.arrayWith([Match.arrayWith([{ 'Fn::GetAtt': [logicalId(stack.agentState.authorizerFunction), 'Arn'] }])]),
      }),
    });
  });

  it('throttles the $default stage and writes JSON access logs', () => {
    reader.template.hasResourceProperties('AWS::ApiGatewayV2::Stage', {
      StageName: '$default',
      AutoDeploy: true,
      DefaultRouteSettings: { ThrottlingRateLimit: 100, ThrottlingBurstLimit: 200 },
      AccessLogSettings: { DestinationArn: { 'Fn::GetAtt': [logicalId(stack.agentState.accessLogs), 'Arn'] }, Format: Match.anyValue() },
    });
    const [, stage] = reader.ofType('AWS::ApiGatewayV2::Stage').find(([, st]) => st.Properties?.StageName === '$default') ?? [];
    if (!stage) throw new Error('the HTTP API has no $default stage');
    const format = JSON.parse((stage.Properties.AccessLogSettings as { Format: string }).Format) as Record<string, string>;
    expect(format).toMatchObject({ requestId: '$context.requestId', status: '$context.status', tenant: '$context.authorizer.tenant' });
  });
});

describe('functions', () => {
  it('has one function per route group, the authorizer, the WebSocket function, the two stream consumers and the delivery hook', () => {
    expect(Object.keys(stack.agentState.functions).sort()).toEqual([...routeGroups].sort());
    reader.template.resourceCountIs('AWS::Lambda::Function', routeGroups.length + 5);
  });

  // lib/entries.ts is the one list of the stack's functions and their entry files: the stack
  // bundles from it, `npm run bench` section 4 (bench/bundles.ts) measures it, the bundle tests
  // and knip read it. This holds it to the stack: a function added to lib/agent-state.ts some
  // other way than from an entry of that list fails here.
  it('names every function the stack deploys in lib/entries.ts, each with an entry of its own', () => {
    const functions = reader.ofType('AWS::Lambda::Function');

    // As many rows as functions, and no two rows measure one entry (each function of the stack
    // has an entry of its own: functions/http/<group>.ts, functions/streams/<hook>.ts).
    expect(deployedEntries.length, 'every function of lib/agent-state.ts has its row in lib/entries.ts').toBe(functions.length);
    expect(new Set(deployedEntries.map((fn) => fn.file)).size).toBe(deployedEntries.length);
  });

  it('runs every function on nodejs22.x, arm64, logging JSON to its own log group; API functions within API Gateway’s 30 s', () => {
    const streamConsumers = [logicalId(stack.agentState.changeHook), logicalId(stack.agentState.webhookHook)];
    for (const [id, fn] of reader.ofType('AWS::Lambda::Function')) {
      expect(fn.Properties, id).toMatchObject({
        Runtime: 'nodejs22.x',
        Architectures: ['arm64'],
        MemorySize: 512,
        LoggingConfig: { LogFormat: 'JSON', LogGroup: { Ref: expect.any(String) } },
        TracingConfig: { Mode: 'Active' },
      });
      // The stream's consumers and the delivery hook are no API's integration: the delivery
      // hook waits out one delivery's 3 attempts of 5 s.
      if (streamConsumers.includes(id)) expect(fn.Properties?.Timeout, id).toBe(60);
      else if (id === logicalId(stack.agentState.deliveryHook)) expect(fn.Properties?.Timeout, id).toBe(30);
      else expect(fn.Properties?.Timeout as number, id).toBeLessThan(30);
    }
  });

  it("gives decide 29 s, time for a worker's 25 s, and every other route function 20 s", () => {
    for (const group of routeGroups) {
      const fn = reader.get(logicalId(stack.agentState.functions[group] as IConstruct));
      expect(fn.Properties?.Timeout, group).toBe(workerCallingGroups.includes(group) ? 29 : 20);
    }
  });

  it.each([...routeGroups])('gives the %s function the table name, source maps, and authorizer-only auth', (group) => {
    const fn = reader.get(logicalId(stack.agentState.functions[group] as IConstruct));
    const knowsWorkers = workerCallingGroups.includes(group) || workerCheckingGroups.includes(group);
    expect(fn.Properties?.Environment).toEqual({
      Variables: {
        AGENTSTATE_TABLE: { Ref: logicalId(stack.agentState.table) },
        NODE_OPTIONS: '--enable-source-maps',
        AGENTSTATE_AUTH: 'authorizer',
        ...POWERTOOLS,
        ...(knowsWorkers ? { AGENTSTATE_ALLOWED_WORKER_ARNS: '' } : {}),
        ...(group !== 'health' && group !== 'inspector'
          ? { AGENTSTATE_KMS_KEY_ID: { 'Fn::GetAtt': [logicalId(stack.agentState.sealingKey), 'Arn'] } }
          : {}),
        ...(group === 'inspector'
          ? { AGENTSTATE_INSPECTOR_DIR: '/var/task/inspector', AGENTSTATE_WEBSOCKET_URL: stack.resolve(stack.agentState.webSocketUrl) }
          : {}),
        // The OpenAPI document is a file beside the health bundle, not in it.
        ...(group === 'health' ? { AGENTSTATE_OPENAPI_FILE: '/var/task/openapi.json' } : {}),
      },
    });
  });

  it('keeps logs for a month', () => {
    for (const [id, logGroup] of reader.ofType('AWS::Logs::LogGroup')) {
      expect(logGroup.Properties?.RetentionInDays, id).toBe(30);
    }
  });
});

describe('least privilege', () => {
  const tableArn = () => ({ 'Fn::GetAtt': [logicalId(stack.agentState.table), 'Arn'] });

  it.each([...routeGroups])('grants the %s function exactly the DynamoDB actions of lib/permissions.ts', (group) => {
    const access = routeGroupAccess[group];
    const functionId = logicalId(stack.agentState.functions[group] as IConstruct);
    const expected = [...new Set([...access.table, ...access.sessionsIndex])].sort();
    expect(reader.actionsOf(functionId, 'dynamodb')).toEqual(expected);
  });

  it.each<RouteGroup>(['health', 'inspector'])('gives the %s function no DynamoDB access at all', (group) => {
    const functionId = logicalId(stack.agentState.functions[group] as IConstruct);
    expect(reader.actionsOf(functionId, 'dynamodb')).toEqual([]);
    // Its own log group, and X-Ray's trace upload (active tracing), nothing else.
    expect(reader.actionsOf(functionId)).toEqual([
      'logs:CreateLogStream',
      'logs:PutLogEvents',
      'xray:PutTelemetryRecords',
      'xray:PutTraceSegments',
    ]);
  });

  it('lets the authorizer read key items only (GetItem)', () => {
    expect(reader.actionsOf(logicalId(stack.agentState.authorizerFunction), 'dynamodb')).toEqual(authorizerAccess.table);
  });

  it('scopes table actions to the table, index actions to the one index, and stream actions to the stream', () => {
    const indexArn = { 'Fn::Join': ['', [tableArn(), `/index/${tableKeys.sessionsIndex.name}`]] };
    const memoryIndexArn = { 'Fn::Join': ['', [tableArn(), `/index/${tableKeys.memoryIndex.name}`]] };
    const pruneDueIndexArn = { 'Fn::Join': ['', [tableArn(), `/index/${tableKeys.pruneDueIndex.name}`]] };
    const streamArn = { 'Fn::GetAtt': [logicalId(stack.agentState.table), 'StreamArn'] };
    const streamActions = ['dynamodb:DescribeStream', 'dynamodb:GetRecords', 'dynamodb:GetShardIterator', 'dynamodb:ListStreams'];
    for (const [id] of reader.ofType('AWS::IAM::Role')) {
      for (const statement of reader.statementsOf(id)) {
        const actions = [statement.Action].flat();
        if (!actions.some((action) => action.startsWith('dynamodb:'))) continue;
        if (actions.every((action) => streamActions.includes(action))) expect(statement.Resource, id).toEqual(streamArn);
        // (Statements with the same actions on several of them are merged into one, with a list.)
        else
          for (const resource of [statement.Resource].flat())
            expect([tableArn(), indexArn, memoryIndexArn, pruneDueIndexArn], id).toContainEqual(resource);
      }
    }
  });

  it('lets only the two stream consumers read the stream', () => {
    const readers = reader
      .ofType('AWS::Lambda::Function')
      .map(([id]) => id)
      .filter((id) => reader.actionsOf(id, 'dynamodb').includes('dynamodb:GetRecords'));
    expect(readers.sort()).toEqual([logicalId(stack.agentState.changeHook), logicalId(stack.agentState.webhookHook)].sort());
  });

  it('invokes the change hook every minute for retention that falls due without a write, and grants it Query on that index alone', () => {
    // The schedule: one rule, rate(1 minute), whose one target is the change hook.
    const rules = reader.ofType('AWS::Events::Rule').filter(([, rule]) => rule.Properties?.ScheduleExpression !== undefined);
    expect(rules.map(([, rule]) => rule.Properties.ScheduleExpression)).toEqual(['rate(1 minute)']);
    const ruleTargets = rules[0]?.[1].Properties.Targets as Array<{ Arn: unknown }>;
    expect(ruleTargets.map((target) => target.Arn)).toEqual([{ 'Fn::GetAtt': [logicalId(stack.agentState.changeHook), 'Arn'] }]);
    reader.template.hasResourceProperties('AWS::Lambda::Permission', {
      Action: 'lambda:InvokeFunction',
      Principal: 'events.amazonaws.com',
      FunctionName: { 'Fn::GetAtt': [logicalId(stack.agentState.changeHook), 'Arn'] },
    });
    // Its index: the change hook's role only, Query only.
    const dueIndexArn = { 'Fn::Join': ['', [tableArn(), `/index/${tableKeys.pruneDueIndex.name}`]] };
    const granted = reader
      .ofType('AWS::IAM::Role')
      .flatMap(([id]) => reader.statementsOf(id).map((statement) => ({ id, statement })))
      .filter(({ statement }) => [statement.Resource].flat().some((resource) => JSON.stringify(resource) === JSON.stringify(dueIndexArn)));
    expect(granted.map(({ id, statement }) => [id, statement.Action])).toEqual([
      [reader.roleOf(logicalId(stack.agentState.changeHook)), 'dynamodb:Query'],
    ]);
  });

  it('grants the stream consumers and the WebSocket function exactly their DynamoDB actions of lib/permissions.ts', () => {
    const streamRead = ['dynamodb:DescribeStream', 'dynamodb:GetRecords', 'dynamodb:GetShardIterator', 'dynamodb:ListStreams'];
    expect(reader.actionsOf(logicalId(stack.agentState.changeHook), 'dynamodb')).toEqual([...liveHookAccess.table, ...streamRead].sort());
    expect(reader.actionsOf(logicalId(stack.agentState.webhookHook), 'dynamodb')).toEqual(
      [...webhookHookAccess.table, ...streamRead].sort(),
    );
    expect(reader.actionsOf(logicalId(stack.agentState.webSocketFunction), 'dynamodb')).toEqual([...webSocketAccess.table].sort());
    expect(reader.actionsOf(logicalId(stack.agentState.deliveryHook), 'dynamodb')).toEqual([...deliveryHookAccess.table].sort());
  });

  it('never grants dynamodb:*, Scan, or any wildcard action', () => {
    const actions = reader
      .ofType('AWS::IAM::Policy')
      .flatMap(([, policy]) => (policy.Properties.PolicyDocument as { Statement: Array<{ Action: string | string[] }> }).Statement)
      .flatMap((statement) => [statement.Action].flat());
    expect(actions.filter((action) => action.includes('*'))).toEqual([]);
    expect(actions).not.toContain('dynamodb:Scan');
  });

  it('uses no AWS managed policies', () => {
    for (const [id, role] of reader.ofType('AWS::IAM::Role')) {
      expect(role.Properties?.ManagedPolicyArns, id).toBeUndefined();
    }
  });
  // That each function's grants are exactly what its code sends, on every path, is proven on the
  // synthesized stack itself: test/deployed/least-privilege.test.ts.
});

describe('secrets at rest (functions/store/access/key-ring.ts)', () => {
  const keyArn = () => ({ 'Fn::GetAtt': [logicalId(stack.agentState.sealingKey), 'Arn'] });
  const kmsStatements = (functionId: string) =>
    reader
      .statementsOf(reader.roleOf(functionId))
      .filter((statement) => [statement.Action].flat().some((action) => action.startsWith('kms:')));

  it('has a KMS key of its own, rotated yearly, kept with the table', () => {
    const keys = reader.ofType('AWS::KMS::Key');
    expect(keys).toHaveLength(1);
    expect(keys[0]?.[1].Properties.EnableKeyRotation).toBe(true);
    expect(keys[0]?.[1].DeletionPolicy).toBe('Retain');
  });

  it.each(routeGroups.filter((group) => group !== 'health' && group !== 'inspector'))(
    "lets the %s function unwrap (or make) the data key with the stack's own key only",
    (group) => {
      const functionId = logicalId(stack.agentState.functions[group] as IConstruct);
      const environment = (reader.get(functionId).Properties.Environment as { Variables: Record<string, unknown> }).Variables;
      expect(environment.AGENTSTATE_KMS_KEY_ID).toEqual(keyArn());
      expect(kmsStatements(functionId)).toEqual([
        expect.objectContaining({
          Action: ['kms:Decrypt', 'kms:GenerateDataKey'],
          Resource: keyArn(),
        }),
      ]);
    },
  );

  it('lets the webhook and delivery hooks only decrypt, and nothing else use the key', () => {
    expect(kmsStatements(logicalId(stack.agentState.webhookHook)).map((statement) => statement.Action)).toEqual(['kms:Decrypt']);
    expect(kmsStatements(logicalId(stack.agentState.deliveryHook)).map((statement) => statement.Action)).toEqual(['kms:Decrypt']);
    const others = [
      stack.agentState.authorizerFunction,
      stack.agentState.webSocketFunction,
      stack.agentState.changeHook,
      stack.agentState.functions.health,
    ];
    for (const fn of others) {
      expect(kmsStatements(logicalId(fn as IConstruct))).toEqual([]);
    }
  });
});

describe('workers (decide)', () => {
  it('declares decide as the group that calls workers', () => {
    expect(workerCallingGroups).toEqual(['decide']);
  });

  it('lets decide, and only decide, invoke exactly the allowed worker functions', () => {
    // Prepare
    const workerArn = 'arn:aws:lambda:us-east-1:123456789012:function:worker';
    const { stack: withWorkers, template } = synthesize({ allowedWorkerFunctionArns: [workerArn] });
    const reader = new TemplateReader(template);
    const decideId = logicalId(withWorkers.agentState.functions.decide as IConstruct);

    // Act
    const byFunction = reader
      .ofType('AWS::Lambda::Function')
      .map(([id]) => [id, reader.actionsOf(id, 'lambda')] as const)
      .filter(([, actions]) => actions.length > 0);

    // Assess
    expect(byFunction).toEqual([[decideId, ['lambda:InvokeFunction']]]);
    const allowedArnsOf = (id: string) =>
      (reader.get(id).Properties?.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables
        ?.AGENTSTATE_ALLOWED_WORKER_ARNS;
    expect(allowedArnsOf(decideId)).toBe(workerArn);
    expect(allowedArnsOf(logicalId(withWorkers.agentState.functions.agents as IConstruct))).toBe(workerArn);
    expect(JSON.stringify(template.toJSON())).toContain(workerArn);
  });
});

describe('table', () => {
  it('is on-demand, with point-in-time recovery, a NEW_AND_OLD_IMAGES stream, TTL and deletion protection', () => {
    reader.template.hasResource('AWS::DynamoDB::GlobalTable', {
      DeletionPolicy: 'Retain',
      UpdateReplacePolicy: 'Retain',
      Properties: Match.objectLike({
        BillingMode: 'PAY_PER_REQUEST',
        StreamSpecification: { StreamViewType: 'NEW_AND_OLD_IMAGES' },
        TimeToLiveSpecification: { AttributeName: tableKeys.timeToLive, Enabled: true },
        Replicas: [
          Match.objectLike({
            DeletionProtectionEnabled: true,
            PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
          }),
        ],
      }),
    });
  });

  it('has the keys and index of functions/store/table/table.ts', () => {
    const { partitionKey, sortKey, sessionsIndex, keysIndex, memoryIndex, pruneDueIndex } = tableKeys;
    reader.template.hasResourceProperties('AWS::DynamoDB::GlobalTable', {
      KeySchema: [
        { AttributeName: partitionKey, KeyType: 'HASH' },
        { AttributeName: sortKey, KeyType: 'RANGE' },
      ],
      GlobalSecondaryIndexes: [
        {
          IndexName: keysIndex.name,
          KeySchema: [
            { AttributeName: keysIndex.partitionKey, KeyType: 'HASH' },
            { AttributeName: keysIndex.sortKey, KeyType: 'RANGE' },
          ],
          Projection: { ProjectionType: 'ALL' },
        },
        {
          IndexName: sessionsIndex.name,
          KeySchema: [
            { AttributeName: sessionsIndex.partitionKey, KeyType: 'HASH' },
            { AttributeName: sessionsIndex.sortKey, KeyType: 'RANGE' },
          ],
          Projection: { ProjectionType: 'INCLUDE', NonKeyAttributes: [...sessionsIndex.projected] },
        },
        {
          IndexName: pruneDueIndex.name,
          KeySchema: [
            { AttributeName: pruneDueIndex.partitionKey, KeyType: 'HASH' },
            { AttributeName: pruneDueIndex.sortKey, KeyType: 'RANGE' },
          ],
          Projection: { ProjectionType: 'KEYS_ONLY' },
        },
      ],
      // A memory search reads it consistently: a local index, as the local table has (table.ts).
      LocalSecondaryIndexes: [
        {
          IndexName: memoryIndex.name,
          KeySchema: [
            { AttributeName: memoryIndex.partitionKey, KeyType: 'HASH' },
            { AttributeName: memoryIndex.sortKey, KeyType: 'RANGE' },
          ],
          Projection: { ProjectionType: 'INCLUDE', NonKeyAttributes: [...memoryIndex.projected] },
        },
      ],
    });
  });

  it('takes the safety settings from props when asked (e.g. a throwaway dev stack)', () => {
    const { template } = synthesize({
      removalPolicy: RemovalPolicy.DESTROY,
      deletionProtection: false,
      authorizerCacheTtl: Duration.seconds(0),
      throttle: { rateLimit: 10, burstLimit: 20 },
    });
    template.hasResource('AWS::DynamoDB::GlobalTable', {
      DeletionPolicy: 'Delete',
      Properties: Match.objectLike({ Replicas: [Match.objectLike({ DeletionProtectionEnabled: false })] }),
    });
    template.hasResourceProperties('AWS::ApiGatewayV2::Authorizer', { AuthorizerResultTtlInSeconds: 0 });
    template.hasResourceProperties('AWS::ApiGatewayV2::Stage', {
      DefaultRouteSettings: { ThrottlingRateLimit: 10, ThrottlingBurstLimit: 20 },
    });
  });
});

describe('the table at scale', () => {
  it('takes a cost guard and warm throughput for the table and each index (API.md section 14)', () => {
    const { template } = synthesize({
      maxReadRequestUnits: 40_000,
      maxWriteRequestUnits: 12_000,
      warmThroughput: { readUnitsPerSecond: 15_000, writeUnitsPerSecond: 5_000 },
    });
    const [, table] = new TemplateReader(template).ofType('AWS::DynamoDB::GlobalTable')[0] ?? [];
    const properties = table?.Properties as {
      WriteOnDemandThroughputSettings?: unknown;
      WarmThroughput?: unknown;
      Replicas: Array<{ ReadOnDemandThroughputSettings?: unknown }>;
      GlobalSecondaryIndexes: Array<{ WriteOnDemandThroughputSettings?: unknown; WarmThroughput?: unknown }>;
    };
    expect(properties.WriteOnDemandThroughputSettings).toEqual({ MaxWriteRequestUnits: 12_000 });
    expect(properties.Replicas[0]?.ReadOnDemandThroughputSettings).toEqual({ MaxReadRequestUnits: 40_000 });
    expect(properties.WarmThroughput).toEqual({ ReadUnitsPerSecond: 15_000, WriteUnitsPerSecond: 5_000 });
    for (const index of properties.GlobalSecondaryIndexes) {
      expect(index.WriteOnDemandThroughputSettings).toEqual({ MaxWriteRequestUnits: 12_000 });
      expect(index.WarmThroughput).toEqual({ ReadUnitsPerSecond: 15_000, WriteUnitsPerSecond: 5_000 });
    }
  });
});

describe('operations', () => {
  it.each([...routeGroups, 'authorizer'])('alarms on errors and throttles of the %s function', (name) => {
    const fn = name === 'authorizer' ? stack.agentState.authorizerFunction : stack.agentState.functions[name as RouteGroup];
    for (const metricName of ['Errors', 'Throttles']) {
      reader.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        Namespace: 'AWS/Lambda',
        MetricName: metricName,
        Dimensions: [{ Name: 'FunctionName', Value: { Ref: logicalId(fn) } }],
        Threshold: 1,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        TreatMissingData: 'notBreaching',
      });
    }
  });

  it('alarms on table system errors and throttles, and API 5xx', () => {
    const alarms = reader.ofType('AWS::CloudWatch::Alarm').map(([, alarm]) => JSON.stringify(alarm.Properties));
    expect(alarms.filter((alarm) => alarm.includes('"MetricName":"SystemErrors"'))).toHaveLength(1);
    expect(alarms.filter((alarm) => alarm.includes('"MetricName":"ThrottledRequests"'))).toHaveLength(1);
    reader.template.hasResourceProperties('AWS::CloudWatch::Alarm', { Namespace: 'AWS/ApiGateway', MetricName: '5xx' });
    // Errors and throttles of every function (route groups, authorizer, WebSocket, change,
    // webhook and delivery hooks), the three above, both hooks' iterator age, the on-failure
    // queue and the webhook queue's dead-letter queue.
    expect(stack.agentState.monitoring.alarms).toHaveLength(2 * (routeGroups.length + 5) + 3 + 4);
  });

  it('sends every alarm, when it fires and when it recovers, to the alarm topic', () => {
    const topic = { Ref: logicalId(stack.agentState.alarmTopic as unknown as IConstruct) };
    const alarms = reader.ofType('AWS::CloudWatch::Alarm');
    expect(alarms.length).toBe(stack.agentState.monitoring.alarms.length);
    for (const [id, alarm] of alarms) {
      expect(alarm.Properties.AlarmActions, id).toEqual([topic]);
      expect(alarm.Properties.OKActions, id).toEqual([topic]);
    }
    reader.template.hasResourceProperties('AWS::SNS::TopicPolicy', {
      PolicyDocument: Match.objectLike({
        Statement: Match.arrayWith([Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } })]),
      }),
    });
    reader.template.resourceCountIs('AWS::SNS::Subscription', 0);
    reader.template.hasOutput('AlarmTopicArn', { Value: topic });
  });

  it('subscribes alarmEmail to the alarm topic', () => {
    const { template } = synthesize({ alarmEmail: 'oncall@example.com' });
    template.hasResourceProperties('AWS::SNS::Subscription', { Protocol: 'email', Endpoint: 'oncall@example.com' });
    const [topicId] = Object.keys(template.findResources('AWS::SNS::Topic'));
    for (const alarm of Object.values(template.findResources('AWS::CloudWatch::Alarm'))) {
      expect(alarm.Properties.AlarmActions).toEqual([{ Ref: topicId }]);
    }
  });

  it('sends alarms to the topic of alarmTopicArn instead of its own, with the email subscribed there', () => {
    const arn = 'arn:aws:sns:eu-west-1:123456789012:pager';
    const { template } = synthesize({ alarmTopicArn: arn, alarmEmail: 'oncall@example.com' });
    template.resourceCountIs('AWS::SNS::Topic', 0);
    template.hasResourceProperties('AWS::SNS::Subscription', { TopicArn: arn, Protocol: 'email' });
    for (const alarm of Object.values(template.findResources('AWS::CloudWatch::Alarm'))) {
      expect(alarm.Properties.AlarmActions).toEqual([arn]);
      expect(alarm.Properties.OKActions).toEqual([arn]);
    }
    template.hasOutput('AlarmTopicArn', { Value: arn });
  });

  it('has no CORS configuration by default', () => {
    const [, api] = reader.ofType('AWS::ApiGatewayV2::Api').find(([, resource]) => resource.Properties.ProtocolType === 'HTTP') ?? [];
    expect(api?.Properties.CorsConfiguration).toBeUndefined();
  });

  it('lets API Gateway answer preflights for corsOrigins, with the policy the local server applies', () => {
    const { template } = synthesize({ corsOrigins: ['https://app.example.com'] });
    template.hasResourceProperties('AWS::ApiGatewayV2::Api', {
      ProtocolType: 'HTTP',
      CorsConfiguration: {
        AllowOrigins: ['https://app.example.com'],
        AllowMethods: [...corsPolicy.allowMethods],
        AllowHeaders: [...corsPolicy.allowHeaders],
        ExposeHeaders: [...corsPolicy.exposeHeaders],
        MaxAge: corsPolicy.maxAgeSeconds,
      },
    });
    expect(() => synthesize({ corsOrigins: ['app.example.com'] })).toThrow(/is not an origin/);
  });

  it('hands sessionDefaults (an idle expiry, a retention) to the functions as the local server reads them, and refuses bad ones', () => {
    const { template } = synthesize({ sessionDefaults: { ttlSeconds: 86_400, retention: { keepVersions: 100, keepDays: 7 } } });
    const functions = Object.values(template.findResources('AWS::Lambda::Function')) as Array<{
      Properties: { Environment?: { Variables?: Record<string, unknown> } };
    }>;
    const withDefaults = functions.filter((fn) => fn.Properties.Environment?.Variables?.AGENTSTATE_RETENTION !== undefined);
    expect(withDefaults.length).toBeGreaterThan(0);
    for (const fn of withDefaults) {
      expect(fn.Properties.Environment?.Variables).toMatchObject({
        AGENTSTATE_SESSION_TTL_DAYS: '1',
        AGENTSTATE_RETENTION: 'keepVersions=100,keepDays=7',
      });
    }
    expect(() => synthesize({ sessionDefaults: { retention: { keepVersions: 0 } } })).toThrow(/retention.keepVersions/);
  });

  it('has a dashboard', () => {
    reader.template.resourceCountIs('AWS::CloudWatch::Dashboard', 1);
  });

  it('outputs ApiUrl, InspectorUrl and TableName', () => {
    const apiEndpoint = { 'Fn::GetAtt': [logicalId(stack.agentState.api), 'ApiEndpoint'] };
    reader.template.hasOutput('ApiUrl', { Value: apiEndpoint });
    reader.template.hasOutput('InspectorUrl', { Value: { 'Fn::Join': ['', [apiEndpoint, '/']] } });
    reader.template.hasOutput('TableName', { Value: { Ref: logicalId(stack.agentState.table) } });
  });
});

describe('cdk-nag AwsSolutions', () => {
  it('finds nothing that is not acknowledged', () => {
    // Act
    const report = new AwsSolutionsChecks().validateScope(stack);

    // Assess
    const findings = report.violations.map(
      (v) => `${v.severity} ${v.ruleName} ${v.violatingResources.map((r) => r.constructPath).join(', ')}: ${v.description}`,
    );
    expect(findings).toEqual([]);
  });

  it('gives every acknowledgement a written reason', () => {
    const acknowledgements = stack.node
      .findAll()
      .flatMap((construct) => construct.node.metadata)
      .filter((entry) => entry.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
      .flatMap((entry) => Object.entries(entry.data as Record<string, string>));
    expect(acknowledgements.length).toBeGreaterThan(0);
    for (const [rule, reason] of acknowledgements) {
      expect(reason.length, rule).toBeGreaterThan(40);
    }
  });

  it('reports no error annotations at synth', () => {
    expect(Annotations.fromStack(stack).findError('*', Match.anyValue())).toEqual([]);
  });
});
