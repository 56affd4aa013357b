/**
 * How a handler reports an error it caught, without loading Powertools (the public handlers
 * use it too, and stay a few kilobytes):
 *
 * - an error nobody expected (a bug, a broken dependency) goes to the log with its stack: in
 *   a Lambda that is one JSON line of the runtime's log format, with the request id and the
 *   stack as a list;
 * - an error the service answers by design (a worker that failed, the table unavailable) is
 *   one line locally, and nothing more in a Lambda, whose request log line carries its code
 *   and detail (functions/http/edge/request-log.ts).
 */
export function reportUnexpected(message: string, error: unknown): void {
  console.error(`agentstate: ${message}`, error);
}

export function reportExpected(message: string): void {
  if (!process.env.AWS_LAMBDA_FUNCTION_NAME) console.warn(`agentstate: ${message}`);
}
