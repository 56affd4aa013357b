import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Context } from 'aws-lambda';
import { useMetricSink } from '../core/kernel/metrics.js';
import { TRACING_VARIABLE } from './tracing-level.js';

/**
 * What every function tells its operator, with Powertools for AWS Lambda: one JSON log line
 * per invocation (the request id Lambda gave it, and what the invocation was about: route,
 * tenant, session, status, latency), metrics in CloudWatch's embedded metric format (flushed
 * with that line, so they cost no API call), and, at the `detailed` tracing level
 * (functions/telemetry/tracing-level.ts), an X-Ray subsegment around the handler with every AWS
 * SDK call inside it. At the default level Lambda traces the invocation itself, and nothing
 * here loads the X-Ray SDK.
 *
 * All of it only in a Lambda. Locally the server prints its own access line per request
 * (functions/local/access-log.ts), and an expected error is one line of its own.
 *
 * | metric                | unit         | from                                                        |
 * |-----------------------|--------------|-------------------------------------------------------------|
 * | `Writes`              | Count        | a write request (POST, PUT, PATCH, DELETE) answered below 400 |
 * | `VersionMismatches`   | Count        | a write answered `412 version_mismatch`                     |
 * | `VersionRacesRetried` | Count        | a write that lost its version slot and was retried (core)   |
 * | `WorkerLatency`       | Milliseconds | a worker call, answered or not                              |
 * | `WorkerFailures`      | Count        | a worker call that ended in `502` or `504`                  |
 * | `EventDeliveryLag`    | Milliseconds | the oldest record of a stream batch: its write to its events |
 * | `EventBatchFailures`  | Count        | stream records a batch reported failed (retried)            |
 * | `WebhookDeadLetters`  | Count        | webhook deliveries that became dead letters (core)          |
 */

const SERVICE = 'agentstate';

export type Metric = 'Writes' | 'VersionMismatches' | 'WorkerLatency' | 'WorkerFailures' | 'EventDeliveryLag' | 'EventBatchFailures';

interface Tools {
  logger: Logger;
  metrics: Metrics;
}

/**
 * Powertools' Tracer and the X-Ray SDK, imported here at INIT (a top-level await, so the
 * function's cold start pays for it, not its first request) when the stack says `detailed`,
 * and not at all otherwise: a chunk of its own in the split bundle (lib/bundling.ts).
 */
const detailedTracing = process.env[TRACING_VARIABLE] === 'detailed' ? await import('./detailed-tracing.js') : undefined;

let tools: Tools | undefined;

/** Whether this process is a Lambda function (the runtime sets the function's name). */
function inLambda(): boolean {
  return Boolean(process.env.AWS_LAMBDA_FUNCTION_NAME);
}

function telemetry(): Tools {
  if (!tools) {
    const metrics = new Metrics({ namespace: process.env.POWERTOOLS_METRICS_NAMESPACE ?? SERVICE, serviceName: SERVICE });
    tools = { logger: new Logger({ serviceName: SERVICE }), metrics };
    // Only while in a Lambda, like `recordMetric`: a process that ran a handler as one and goes
    // on outside it (the bench) would otherwise hold the core's counts until Powertools
    // publishes them on its own, as EMF lines among whatever it prints.
    useMetricSink((name, value) => {
      if (inLambda()) metrics.addMetric(name, MetricUnit.Count, value);
    });
  }
  return tools;
}

/** Records a metric of this invocation (in a Lambda; nothing locally). */
export function recordMetric(name: Metric, value: number): void {
  if (!inLambda()) return;
  telemetry().metrics.addMetric(name, name.endsWith('Latency') || name.endsWith('Lag') ? MetricUnit.Milliseconds : MetricUnit.Count, value);
}

/** An AWS SDK v3 client whose calls show as X-Ray subsegments at the `detailed` tracing level. */
export function traced<T>(client: T): T {
  if (!detailedTracing || !inLambda()) return client;
  return detailedTracing.captureClient(client);
}

/** What an invocation's log line says, and the metrics it adds. */
export interface InvocationSummary {
  message: string;
  level: 'info' | 'warn' | 'error';
  fields: Record<string, unknown>;
  metrics?: ReadonlyArray<readonly [Metric, number]>;
  annotations?: Record<string, string | number | boolean>;
}

type Handler<E, R> = (event: E, context: Context) => Promise<R>;

/**
 * `handler` with its invocation's log line, metrics and trace. `summarize` reads the event and
 * the answer (or the error) into the line; it runs after the handler, with the elapsed time.
 * Outside a Lambda the handler runs as it is.
 */
export function instrumented<E, R>(
  name: string,
  handler: Handler<E, R>,
  summarize: (event: E, outcome: { result?: R; error?: unknown; latencyMs: number }) => InvocationSummary,
): Handler<E, R> {
  return async (event, context) => {
    if (!inLambda()) return handler(event, context);
    const { logger, metrics } = telemetry();
    logger.addContext(context);
    const started = performance.now();
    const trace = detailedTracing?.traceHandler(name);
    let outcome: { result?: R; error?: unknown } = {};
    try {
      outcome = { result: await handler(event, context) };
      return outcome.result as R;
    } catch (error) {
      outcome = { error };
      throw error;
    } finally {
      const latencyMs = Math.round((performance.now() - started) * 10) / 10;
      try {
        const summary = summarize(event, { ...outcome, latencyMs });
        logger[summary.level](summary.message, {
          ...summary.fields,
          latencyMs,
          ...(outcome.error ? { error: outcome.error as Error } : {}),
        });
        for (const [metric, value] of summary.metrics ?? []) recordMetric(metric, value);
        for (const [key, value] of Object.entries(summary.annotations ?? {})) trace?.annotate(key, value);
      } catch (error) {
        logger.warn('could not summarize the invocation', { error: error as Error });
      }
      trace?.close();
      if (metrics.hasStoredMetrics()) metrics.publishStoredMetrics();
    }
  };
}
