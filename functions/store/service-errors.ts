import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { AgentStateError } from '../core/errors.js';

const throttlingErrors = new Set(['ProvisionedThroughputExceededException', 'ThrottlingException', 'RequestLimitExceeded']);
const unavailableErrors = new Set(['InternalServerError', 'ServiceUnavailable', 'ServiceUnavailableException']);
const networkCodes = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'TimeoutError']);

/**
 * What is left after the SDK's own retries, told to the client plainly: too much load is
 * `429 throttled`, an unreachable or failing DynamoDB `503 unavailable` (the same mapping as
 * dynamodb-store.ts, for the stores that live beside it).
 */
export function translateServiceError(error: unknown): unknown {
  if (!(error instanceof Error)) return error;
  if (throttlingErrors.has(error.name)) {
    return new AgentStateError('throttled', 'the table is over its request rate; retry with backoff', {}, { cause: error });
  }
  const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  const code = (error as { code?: string }).code ?? '';
  if (unavailableErrors.has(error.name) || (status !== undefined && status >= 500) || networkCodes.has(code) || networkCodes.has(error.name)) {
    return new AgentStateError('unavailable', 'the database is unavailable; retry shortly', {}, { cause: error });
  }
  return error;
}

/** `doc.send` with `translateServiceError` applied to its failures. */
export function sendWithServiceErrors(doc: DynamoDBDocumentClient): DynamoDBDocumentClient['send'] {
  return (async (command: Parameters<DynamoDBDocumentClient['send']>[0]) => {
    try {
      return await doc.send(command);
    } catch (error) {
      throw translateServiceError(error);
    }
  }) as DynamoDBDocumentClient['send'];
}
