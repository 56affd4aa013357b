import { AgentStateError } from '../../core/kernel/errors.js';
import { problemResponse } from './middleware.js';
import type { HttpHandler } from './types.js';

/** Lambda's payload for a synchronous invocation's answer, as the runtime serializes it (JSON). */
const LAMBDA_ANSWER_BYTES = 6 * 1024 * 1024;

/** What the answer's status and headers may take of it. */
const ENVELOPE_BYTES = 16 * 1024;

/** What a body may be and still fit as text however it escapes (each of its bytes at most twice). */
const ALWAYS_FITS_AS_TEXT_BYTES = Math.floor((LAMBDA_ANSWER_BYTES - ENVELOPE_BYTES) / 2);

/**
 * Answers that fit Lambda's payload (6 MB for a synchronous invocation's response). The runtime
 * serializes what a handler returns as JSON, so a JSON body travels escaped inside it: each `"`
 * and `\` of the body counts twice (its compact JSON holds no raw control characters). A state of
 * 4 MiB whose strings hold JSON text (a tool's output, a serialized checkpoint) escapes to more
 * than 6 MB, and Lambda would fail the answer after the read had worked: API Gateway's bare
 * `500` for a valid request. So a large body whose text would not fit goes as base64,
 * which API Gateway decodes before the client sees it: 4 bytes for every 3, so the largest
 * state's answer stays under 5.6 MB. A body that escapes within the bound stays text (most do:
 * prose has few quotes), so that neither side pays for base64. The local server decodes base64
 * the same way (local/http-adapter.ts), and holds its answers to the same bound, so that what fails in AWS
 * fails on a laptop first.
 *
 * A read whose answer does not fit even so (a path of many large messages) answers
 * `413 payload_too_large` with the limit, a problem the client can act on, where Lambda would give
 * the bare `500`. Writes answer what they wrote, which the body limits keep well inside (a 4 MiB
 * state, small records): they are passed on as they are.
 */
export function lambdaSizedAnswers(handler: HttpHandler): HttpHandler {
  return async (event, context) => {
    const response = await handler(event, context);
    const { body } = response;
    // Within the bound as text whatever it holds (a UTF-8 byte is at least one UTF-16 unit).
    if (typeof body !== 'string' || response.isBase64Encoded || body.length <= ALWAYS_FITS_AS_TEXT_BYTES / 3) return response;
    const bytes = Buffer.byteLength(body);
    if (bytes <= ALWAYS_FITS_AS_TEXT_BYTES || escapesWithin(body, LAMBDA_ANSWER_BYTES - ENVELOPE_BYTES - bytes)) return response;
    const encoded = { ...response, body: Buffer.from(body, 'utf8').toString('base64'), isBase64Encoded: true };
    if (encoded.body.length + ENVELOPE_BYTES <= LAMBDA_ANSWER_BYTES || event.requestContext.http.method !== 'GET') return encoded;
    return problemResponse(
      new AgentStateError(
        'payload_too_large',
        `the answer is ${encoded.body.length} bytes encoded, more than one answer of the API may carry (${LAMBDA_ANSWER_BYTES - ENVELOPE_BYTES}); read it in parts`,
        { limitBytes: LAMBDA_ANSWER_BYTES - ENVELOPE_BYTES, sizeBytes: encoded.body.length },
      ),
    );
  };
}

/**
 * Whether the body's escaping adds at most `allowance` bytes: one for each `"` and `\` (its
 * compact JSON holds no raw control characters). Counted with indexOf, which stops at the
 * allowance: a state of prose has few of them and is counted in a few milliseconds, where the
 * whole escaped text would take several times as long.
 */
function escapesWithin(body: string, allowance: number): boolean {
  let escapes = 0;
  for (const character of ['"', '\\']) {
    for (let at = body.indexOf(character); at !== -1; at = body.indexOf(character, at + 1)) {
      if (++escapes > allowance) return false;
    }
  }
  return true;
}
