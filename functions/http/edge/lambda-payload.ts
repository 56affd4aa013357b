import type { APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { AgentStateError } from '../../core/kernel/errors.js';
import { problemResponse } from './middleware.js';
import type { HttpHandler } from './types.js';

/** Lambda's payload for a synchronous invocation's answer, as the runtime serializes it (JSON). */
const LAMBDA_ANSWER_BYTES = 6 * 1024 * 1024;

/** What the answer's status and headers may take of it. */
const ENVELOPE_BYTES = 16 * 1024;

/** Below this, an answer fits Lambda's payload however its text escapes (at most twice its size). */
const ESCAPING_MATTERS_BYTES = 1024 * 1024;

/**
 * Answers that fit Lambda's payload (6 MB for a synchronous invocation's response). The runtime
 * serializes what a handler returns as JSON, so a JSON body travels escaped inside it: each `"`
 * and `\` of the body counts twice. A state of 4 MiB whose strings hold JSON text (a tool's
 * output, a serialized checkpoint) escapes to more than 6 MB, and Lambda would fail the answer
 * after the read had worked: API Gateway's bare `500` for a valid request. Base64 costs 4 bytes
 * for every 3 whatever the text, and API Gateway decodes it before the client sees it, so a large
 * answer goes in whichever form is smaller: the largest state's answer stays under 5.6 MB. The
 * local server decodes it the same way (local/http-adapter.ts), and holds its answers to the
 * same bound, so that what fails in AWS fails on a laptop first.
 *
 * A read whose answer fits in neither form (a path of many large messages, a node's notes past
 * 6 MB) answers `413 payload_too_large` with the limit, a problem the client can act on, where
 * Lambda would give the bare `500`. Writes answer what they wrote, which the body limits keep
 * well inside (a 4 MiB state, small records): they are passed on as they are.
 */
export function lambdaSizedAnswers(handler: HttpHandler): HttpHandler {
  return async (event, context) => {
    const response = smallerEncoding(await handler(event, context));
    const bytes = bodyBytes(response);
    if (bytes + ENVELOPE_BYTES <= LAMBDA_ANSWER_BYTES || event.requestContext.http.method !== 'GET') return response;
    return problemResponse(
      new AgentStateError(
        'payload_too_large',
        `the answer is ${bytes} bytes encoded, more than one answer of the API may carry (${LAMBDA_ANSWER_BYTES - ENVELOPE_BYTES}); read it in parts`,
        { limitBytes: LAMBDA_ANSWER_BYTES - ENVELOPE_BYTES, sizeBytes: bytes },
      ),
    );
  };
}

function smallerEncoding(response: APIGatewayProxyStructuredResultV2): APIGatewayProxyStructuredResultV2 {
  const { body } = response;
  if (typeof body !== 'string' || response.isBase64Encoded || body.length < ESCAPING_MATTERS_BYTES / 2) return response;
  const bytes = Buffer.byteLength(body);
  if (bytes < ESCAPING_MATTERS_BYTES) return response;
  const base64Bytes = Math.ceil(bytes / 3) * 4;
  if (Buffer.byteLength(JSON.stringify(body)) <= base64Bytes) return response;
  return { ...response, body: Buffer.from(body, 'utf8').toString('base64'), isBase64Encoded: true };
}

/** The body's size as it travels inside Lambda's answer: escaped text, or base64 as it is. */
function bodyBytes(response: APIGatewayProxyStructuredResultV2): number {
  const { body } = response;
  if (typeof body !== 'string' || body.length < ESCAPING_MATTERS_BYTES / 2) return 0;
  return response.isBase64Encoded ? body.length : Buffer.byteLength(JSON.stringify(body));
}
