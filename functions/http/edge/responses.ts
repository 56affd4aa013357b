import type { APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { stringifyJson } from '../../core/json/json.js';

export function json(statusCode: number, body: unknown, headers: Record<string, string> = {}): APIGatewayProxyStructuredResultV2 {
  return { statusCode, headers: { 'content-type': 'application/json', ...headers }, body: stringifyJson(body) };
}

export function noContent(): APIGatewayProxyStructuredResultV2 {
  return { statusCode: 204, headers: {} };
}

/** The ETag of a version: `"7"` (API.md section 1); `If-Match` sends it back (request.ts). */
function etag(version: number): string {
  return `"${version}"`;
}

/** `200` with a state or document and its version's ETag: what every read and write of one answers. */
export function versionedJson<Body extends { version: number }>(body: Body): APIGatewayProxyStructuredResultV2 {
  return json(200, body, { etag: etag(body.version) });
}
