import { Duration } from 'aws-cdk-lib';
import type { HttpApi } from 'aws-cdk-lib/aws-apigatewayv2';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';

export interface AgentStateMonitoringProps {
  /** The HTTP API. */
  readonly api: HttpApi;
  /** The table. */
  readonly table: dynamodb.TableV2;
  /** Every function, by a short name used in alarm and widget titles. */
  readonly functions: Readonly<Record<string, lambda.IFunction>>;
  /**
   * The change hook on the table's stream and its on-failure queue: alarms on how far behind
   * the stream it is (iterator age) and on records it gave up on (queue depth).
   * @default - no change-event alarms
   */
  readonly changeEvents?: {
    readonly changeHook: lambda.IFunction;
    /** The stream's webhook consumer, when it has one of its own. */
    readonly webhookHook?: lambda.IFunction;
    readonly deadLetterQueue: sqs.IQueue;
    /** The webhook queue: its depth and oldest message on the dashboard. */
    readonly webhookQueue?: sqs.IQueue;
    /** The webhook queue's dead-letter queue: an alarm on any message. */
    readonly webhookDeliveryFailures?: sqs.IQueue;
  };
  /**
   * Actions of every alarm (on alarm and on OK).
   * @default [] - none
   */
  readonly alarmActions?: readonly cloudwatch.IAlarmAction[];
  /**
   * Whether to create the dashboard.
   * @default true
   */
  readonly dashboard?: boolean;
}

/** The table operations our functions send; a math expression may hold 10 metrics at most. */
const TABLE_OPERATIONS = [
  dynamodb.Operation.GET_ITEM,
  dynamodb.Operation.BATCH_GET_ITEM,
  dynamodb.Operation.QUERY,
  dynamodb.Operation.PUT_ITEM,
  dynamodb.Operation.UPDATE_ITEM,
  dynamodb.Operation.DELETE_ITEM,
  dynamodb.Operation.BATCH_WRITE_ITEM,
  dynamodb.Operation.TRANSACT_WRITE_ITEMS,
];

const PERIOD = Duration.minutes(5);

/**
 * Where the functions send their own metrics (Powertools, embedded metric format): the
 * namespace and service the construct gives every function (POWERTOOLS_* in agent-state.ts).
 */
export const OWN_METRICS = { namespace: 'agentstate', service: 'agentstate' } as const;
/** Change events later than this are late enough to look at. */
const ITERATOR_AGE_LIMIT = Duration.minutes(1);

/**
 * Alarms and a dashboard. A handler answers its own failures with a `500 problem+json`, so
 * Lambda `Errors` count only crashes and timeouts; the API's 5xx alarm catches the rest.
 *
 * | alarm                 | fires when (5 minutes)                                  |
 * |-----------------------|---------------------------------------------------------|
 * | `<fn>Errors`          | a function crashed or timed out at least once            |
 * | `<fn>Throttles`       | Lambda refused to run a function at least once           |
 * | `Api5xx`              | at least 5 responses were 5xx (including 502/504 from workers) |
 * | `TableSystemErrors`   | DynamoDB answered 500 at least once                      |
 * | `TableThrottles`      | DynamoDB throttled at least one request                  |
 * | `ChangeHookIteratorAge` | change events run more than a minute behind the writes  |
 * | `WebhookHookIteratorAge` | webhook deliveries run more than a minute behind the writes |
 * | `ChangeHookDeadLetters` | a stream record the change hook could not process is in its on-failure queue |
 */
export class AgentStateMonitoring extends Construct {
  /** Every alarm, for adding actions or composite alarms. */
  readonly alarms: cloudwatch.Alarm[] = [];
  /** The dashboard, when created. */
  readonly dashboard?: cloudwatch.Dashboard;

  private readonly alarmActions: readonly cloudwatch.IAlarmAction[];

  constructor(scope: Construct, id: string, props: AgentStateMonitoringProps) {
    super(scope, id);
    this.alarmActions = props.alarmActions ?? [];
    const { api, table, functions } = props;

    for (const [name, fn] of Object.entries(functions)) {
      const title = pascal(name);
      this.addAlarm(`${title}Errors`, {
        metric: fn.metricErrors({ period: PERIOD, statistic: 'Sum' }),
        threshold: 1,
        alarmDescription: `agentstate: the ${name} function crashed or timed out (see its log group)`,
      });
      this.addAlarm(`${title}Throttles`, {
        metric: fn.metricThrottles({ period: PERIOD, statistic: 'Sum' }),
        threshold: 1,
        alarmDescription: `agentstate: Lambda throttled the ${name} function (concurrency limit reached)`,
      });
    }
    this.addAlarm('Api5xx', {
      metric: api.metricServerError({ period: PERIOD, statistic: 'Sum' }),
      threshold: 5,
      alarmDescription: 'agentstate: the API answered 5xx (internal errors, worker failures or timeouts); see the access logs',
    });
    this.addAlarm('TableSystemErrors', {
      metric: table.metricSystemErrorsForOperations({ operations: TABLE_OPERATIONS, period: PERIOD }),
      threshold: 1,
      alarmDescription: 'agentstate: DynamoDB answered with internal server errors',
    });
    this.addAlarm('TableThrottles', {
      metric: table.metricThrottledRequestsForOperations({ operations: TABLE_OPERATIONS, period: PERIOD }),
      threshold: 1,
      alarmDescription: 'agentstate: DynamoDB throttled requests (a hot partition, or traffic above twice the previous peak)',
    });

    if (props.changeEvents) {
      const { changeHook, webhookHook, deadLetterQueue, webhookDeliveryFailures } = props.changeEvents;
      this.addAlarm('ChangeHookIteratorAge', {
        metric: changeHook.metric('IteratorAge', { period: PERIOD, statistic: 'Maximum' }),
        threshold: ITERATOR_AGE_LIMIT.toMilliseconds(),
        alarmDescription:
          'agentstate: change events run more than a minute behind the writes (a slow or failing change hook, or webhooks timing out)',
      });
      if (webhookHook) {
        this.addAlarm('WebhookHookIteratorAge', {
          metric: webhookHook.metric('IteratorAge', { period: PERIOD, statistic: 'Maximum' }),
          threshold: ITERATOR_AGE_LIMIT.toMilliseconds(),
          alarmDescription:
            'agentstate: webhook deliveries run more than a minute behind the writes (webhook endpoints timing out or failing)',
        });
      }
      this.addAlarm('ChangeHookDeadLetters', {
        metric: deadLetterQueue.metricApproximateNumberOfMessagesVisible({ period: PERIOD, statistic: 'Maximum' }),
        threshold: 1,
        alarmDescription:
          'agentstate: the change hook gave up on stream records (see the queue messages and the change hook log); their events were not sent',
      });
      if (webhookDeliveryFailures) {
        this.addAlarm('WebhookDeliveryFailures', {
          metric: webhookDeliveryFailures.metricApproximateNumberOfMessagesVisible({ period: PERIOD, statistic: 'Maximum' }),
          threshold: 1,
          alarmDescription:
            'agentstate: the delivery hook failed 5 times on webhook deliveries (it could not record their dead letters); see its log and the queue messages',
        });
      }
    }

    if (props.dashboard ?? true) {
      this.dashboard = this.createDashboard(props);
    }
  }

  /** Adds an alarm (threshold: at least `threshold` in one period) with the common actions. */
  addAlarm(id: string, options: { metric: cloudwatch.IMetric; threshold: number; alarmDescription: string }): cloudwatch.Alarm {
    const alarm = new cloudwatch.Alarm(this, id, {
      metric: options.metric,
      threshold: options.threshold,
      evaluationPeriods: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      alarmDescription: options.alarmDescription,
    });
    alarm.addAlarmAction(...this.alarmActions);
    alarm.addOkAction(...this.alarmActions);
    this.alarms.push(alarm);
    return alarm;
  }

  private createDashboard({ api, table, functions, changeEvents }: AgentStateMonitoringProps): cloudwatch.Dashboard {
    const dashboard = new cloudwatch.Dashboard(this, 'Dashboard', { defaultInterval: Duration.hours(3) });
    const fns = Object.entries(functions);
    const perFunction = (metric: (fn: lambda.IFunction, label: string) => cloudwatch.IMetric) => fns.map(([name, fn]) => metric(fn, name));
    const latency = (operation: string) =>
      table.metricSuccessfulRequestLatency({
        dimensionsMap: { TableName: table.tableName, Operation: operation },
        statistic: 'p99',
        label: `${operation} p99`,
      });

    dashboard.addWidgets(new cloudwatch.AlarmStatusWidget({ title: 'Alarms', alarms: this.alarms, width: 24, height: 4 }));
    dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'API requests and errors',
        left: [api.metricCount({ label: 'requests' })],
        right: [api.metricClientError({ label: '4xx' }), api.metricServerError({ label: '5xx' })],
        width: 12,
      }),
      new cloudwatch.GraphWidget({
        title: 'API latency (ms)',
        left: ['p50', 'p90', 'p99'].map((statistic) => api.metricLatency({ statistic, label: `latency ${statistic}` })),
        right: [api.metricIntegrationLatency({ statistic: 'p99', label: 'integration p99' })],
        width: 12,
      }),
    );
    dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'Lambda invocations',
        left: perFunction((fn, label) => fn.metricInvocations({ label })),
        width: 8,
      }),
      new cloudwatch.GraphWidget({
        title: 'Lambda errors and throttles',
        left: perFunction((fn, label) => fn.metricErrors({ label: `${label} errors` })),
        right: perFunction((fn, label) => fn.metricThrottles({ label: `${label} throttles` })),
        width: 8,
      }),
      new cloudwatch.GraphWidget({
        title: 'Lambda duration p99 (ms)',
        left: perFunction((fn, label) => fn.metricDuration({ statistic: 'p99', label })),
        width: 8,
      }),
    );
    dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'DynamoDB capacity consumed',
        left: [table.metricConsumedReadCapacityUnits({ label: 'RCU' }), table.metricConsumedWriteCapacityUnits({ label: 'WCU' })],
        width: 8,
      }),
      // Each math expression names its metrics by operation, so one per widget.
      new cloudwatch.GraphWidget({
        title: 'DynamoDB system errors',
        left: [table.metricSystemErrorsForOperations({ operations: TABLE_OPERATIONS, label: 'system errors' })],
        width: 8,
      }),
      new cloudwatch.GraphWidget({
        title: 'DynamoDB throttled requests',
        left: [table.metricThrottledRequestsForOperations({ operations: TABLE_OPERATIONS, label: 'throttled' })],
        width: 8,
      }),
    );
    dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        // Expected, not an error: a writer that lost a race re-reads and retries.
        title: 'DynamoDB conditional check failures (lost races, retried)',
        left: [table.metricConditionalCheckFailedRequests({ label: 'condition failed' })],
        width: 12,
      }),
      new cloudwatch.GraphWidget({
        title: 'DynamoDB latency p99 (ms)',
        left: ['GetItem', 'Query', 'PutItem', 'TransactWriteItems'].map(latency),
        width: 12,
      }),
    );
    // Our own metrics (docs/deploy.md, "Metrics"), from the functions' log lines.
    const own = (metricName: string, statistic = 'Sum') =>
      new cloudwatch.Metric({
        namespace: OWN_METRICS.namespace,
        metricName,
        dimensionsMap: { service: OWN_METRICS.service },
        statistic,
        period: PERIOD,
        label: statistic === 'Sum' ? metricName : `${metricName} ${statistic}`,
      });
    dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'Writes, 412 version mismatches, version races retried',
        left: [own('Writes')],
        right: [own('VersionMismatches'), own('VersionRacesRetried')],
        width: 8,
      }),
      new cloudwatch.GraphWidget({
        title: 'Workers: latency (ms) and failures',
        left: [own('WorkerLatency', 'p50'), own('WorkerLatency', 'p99')],
        right: [own('WorkerFailures')],
        width: 8,
      }),
      new cloudwatch.GraphWidget({
        title: 'Change events: delivery lag (ms), failed records, webhook dead letters',
        left: [own('EventDeliveryLag', 'Maximum')],
        right: [own('EventBatchFailures'), own('WebhookDeadLetters')],
        width: 8,
      }),
    );
    if (changeEvents) {
      dashboard.addWidgets(
        new cloudwatch.GraphWidget({
          title: 'Change events: iterator age, max (ms)',
          left: [
            changeEvents.changeHook.metric('IteratorAge', { statistic: 'Maximum', label: 'live' }),
            ...(changeEvents.webhookHook
              ? [changeEvents.webhookHook.metric('IteratorAge', { statistic: 'Maximum', label: 'webhooks' })]
              : []),
          ],
          width: 12,
        }),
        new cloudwatch.GraphWidget({
          title: 'Change hook: records given up (on-failure queue)',
          left: [changeEvents.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ statistic: 'Maximum', label: 'messages' })],
          width: 12,
        }),
      );
      const { webhookQueue, webhookDeliveryFailures } = changeEvents;
      if (webhookQueue && webhookDeliveryFailures) {
        dashboard.addWidgets(
          new cloudwatch.GraphWidget({
            title: 'Webhook queue: deliveries waiting, and given up',
            left: [
              webhookQueue.metricApproximateNumberOfMessagesVisible({ statistic: 'Maximum', label: 'waiting' }),
              webhookDeliveryFailures.metricApproximateNumberOfMessagesVisible({ statistic: 'Maximum', label: 'given up' }),
            ],
            width: 12,
          }),
          new cloudwatch.GraphWidget({
            title: 'Webhook queue: oldest delivery waiting (s)',
            left: [webhookQueue.metricApproximateAgeOfOldestMessage({ statistic: 'Maximum', label: 'oldest' })],
            width: 12,
          }),
        );
      }
    }
    return dashboard;
  }
}

function pascal(name: string): string {
  return name.replace(/(^|[-_])([a-z])/g, (_match, _sep: string, letter: string) => letter.toUpperCase());
}
