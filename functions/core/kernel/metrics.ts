/**
 * What the core measures, for whoever records it: in a Lambda, CloudWatch metrics in the
 * embedded metric format (functions/telemetry/telemetry.ts); locally, nothing. A port like the
 * others, so the core stays free of any metrics library.
 *
 * | metric                | unit         | counted when                                              |
 * |-----------------------|--------------|-----------------------------------------------------------|
 * | `VersionRacesRetried` | Count        | a write lost the race for its version slot and is retried |
 * | `WebhookDeadLetters`  | Count        | a webhook delivery gave up and became a dead letter       |
 */
export type CoreMetric = 'VersionRacesRetried' | 'WebhookDeadLetters';

export type MetricSink = (name: CoreMetric, value: number) => void;

let sink: MetricSink = () => {};

/** Where the core's measurements go from now on (the Lambda handlers set this once). */
export function useMetricSink(next: MetricSink): void {
  sink = next;
}

export function countMetric(name: CoreMetric, value = 1): void {
  sink(name, value);
}
