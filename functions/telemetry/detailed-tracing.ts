import { Tracer } from '@aws-lambda-powertools/tracer';

/**
 * The `detailed` tracing level (functions/telemetry/tracing-level.ts): Powertools' Tracer,
 * which loads the X-Ray SDK. functions/telemetry/telemetry.ts imports this module at INIT, and
 * only at that level, so with code splitting it is a chunk of its own that a function at the
 * default level never reads.
 */

let tracer: Tracer | undefined;

// Made on first use, in the invocation's environment, as the Tracer reads it.
function theTracer(): Tracer {
  tracer ??= new Tracer({ serviceName: 'agentstate' });
  return tracer;
}

/** `client` with each of its calls an X-Ray subsegment. */
export function captureClient<T>(client: T): T {
  return theTracer().captureAWSv3Client(client);
}

/** A subsegment of the invocation's segment, named `## <name>`, open until `close`. */
export interface HandlerTrace {
  annotate(key: string, value: string | number | boolean): void;
  close(): void;
}

/**
 * Opens the handler's subsegment (with the cold start and service annotations) and makes it
 * the current one, so the SDK calls inside it are its children; `undefined` when this
 * invocation is not traced.
 */
export function traceHandler(name: string): HandlerTrace | undefined {
  const tracer = theTracer();
  if (!tracer.isTracingEnabled()) return undefined;
  const segment = tracer.getSegment();
  const subsegment = segment?.addNewSubsegment(`## ${name}`);
  if (!segment || !subsegment) return undefined;
  tracer.setSegment(subsegment);
  tracer.annotateColdStart();
  tracer.addServiceNameAnnotation();
  return {
    annotate: (key, value) => tracer.putAnnotation(key, value),
    close: () => {
      subsegment.close();
      tracer.setSegment(segment);
    },
  };
}
