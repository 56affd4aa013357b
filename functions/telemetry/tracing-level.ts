/**
 * How much of a request X-Ray shows, a deploy setting (docs/deploy.md, "Tracing"):
 *
 * - `lambda` (the default): Lambda's own active tracing. X-Ray records every sampled
 *   invocation's segment, its initialization and its duration, from Lambda itself; the
 *   function loads no X-Ray SDK, and its cold start reads none of it.
 * - `detailed`: Powertools' Tracer as well (functions/telemetry/detailed-tracing.ts, imported
 *   at INIT): a subsegment around the handler with its annotations, and one per AWS SDK call
 *   and outbound HTTPS request. The X-Ray SDK it loads is ~116 KiB of every bundle's cold start.
 * - `off`: no tracing, and no X-Ray permission on any role.
 */
export const tracingLevels = ['lambda', 'detailed', 'off'] as const;

export type TracingLevel = (typeof tracingLevels)[number];

/** The environment variable through which the stack tells each function its level. */
export const TRACING_VARIABLE = 'AGENTSTATE_TRACING';

/** `value` as a level (`undefined` or empty is the default); anything else is a mistake to fail on. */
export function parseTracingLevel(value: string | undefined): TracingLevel {
  if (value === undefined || value === '') return 'lambda';
  const level = tracingLevels.find((candidate) => candidate === value);
  if (!level) throw new Error(`agentstate: tracing must be one of ${tracingLevels.join(', ')} (got ${JSON.stringify(value)})`);
  return level;
}
