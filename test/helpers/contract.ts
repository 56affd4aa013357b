import { readFileSync } from 'node:fs';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

/**
 * The OpenAPI document (docs/openapi.json) as a check on real traffic: every request the tests
 * make and every answer the server gives is held to it by the proxy in contract-proxy.ts. A
 * route the document does not describe, a status it does not list, an answer that does not fit
 * its schema, a problem `code` it does not name for that route, or a body the server accepted
 * although the document calls it invalid — each is a violation that fails the test.
 */

type JsonObject = { [key: string]: unknown };

export interface Exchange {
  method: string;
  /** Path and query, as sent. */
  url: string;
  requestContentType: string | undefined;
  requestBody: string;
  status: number;
  responseContentType: string | undefined;
  responseBody: string;
}

const documentPath = new URL('../../docs/openapi.json', import.meta.url);
const document = JSON.parse(readFileSync(documentPath, 'utf8')) as JsonObject & { paths: Record<string, Record<string, JsonObject>> };

const ajv = new Ajv2020({ strict: false, allErrors: false, validateFormats: true });
addFormats.default(ajv);
ajv.addSchema(document, 'openapi');

/** Compiled once per JSON pointer into the document. */
const validators = new Map<string, ValidateFunction>();
function validatorAt(pointer: string): ValidateFunction {
  let validate = validators.get(pointer);
  if (!validate) {
    validate = ajv.compile({ $ref: `openapi#${pointer}` });
    validators.set(pointer, validate);
  }
  return validate;
}

const pointerSegment = (segment: string) => segment.replaceAll('~', '~0').replaceAll('/', '~1');

/** The path parameters marked `x-greedy` (a namespace and a key): they span several segments. */
function greedyParameters(template: string): Set<string> {
  const operations = Object.values(document.paths[template] ?? {}) as Array<{ parameters?: JsonObject[] }>;
  return new Set(operations.flatMap((operation) => (operation.parameters ?? []).filter((p) => p['x-greedy']).map((p) => String(p.name))));
}

const templates = Object.keys(document.paths).map((template) => {
  const greedy = greedyParameters(template);
  const escaped = template.replace(/[.*+?^$()|[\]\\]/g, '\\$&');
  const pattern = escaped.replace(/\\?\{(\w+)\\?\}/g, (_match, name: string) => (greedy.has(name) ? '[^/]+(?:/[^/]+)*' : '[^/]+'));
  return { template, pattern: new RegExp(`^${pattern}$`), literal: !template.includes('{') };
});

/** The documented path a request path falls under (a literal path before a templated one). */
function templateOf(pathname: string): string | undefined {
  const matches = templates.filter((entry) => entry.pattern.test(pathname));
  return (matches.find((entry) => entry.literal) ?? matches[0])?.template;
}

const mediaType = (contentType: string | undefined) => contentType?.split(';')[0]?.trim().toLowerCase();

function parse(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

function schemaErrors(validate: ValidateFunction): string {
  return (validate.errors ?? [])
    .slice(0, 3)
    .map((error) => `${error.instancePath || '(root)'} ${error.message}${error.params ? ` ${JSON.stringify(error.params)}` : ''}`)
    .join('; ');
}

/** What is wrong with one request and its answer, by the document; empty when nothing. */
export function contractViolations(exchange: Exchange): string[] {
  const url = new URL(exchange.url, 'http://contract.invalid');
  const method = exchange.method.toLowerCase();
  const where = `${exchange.method} ${url.pathname} → ${exchange.status}`;
  const template = templateOf(url.pathname);
  const operation = template ? document.paths[template]?.[method] : undefined;
  if (!template || !operation) {
    // A route that does not exist may say so; a route that answers must be in the document.
    const body = parse(exchange.responseBody);
    const notFound = exchange.status === 404 && body.ok && (body.value as JsonObject)?.code === 'not_found';
    return notFound
      ? []
      : [`${where}: the route is not in docs/openapi.json — describe it in functions/http/contract/operations.ts and run npm run openapi`];
  }
  const pointer = `/paths/${pointerSegment(template)}/${method}`;
  const violations: string[] = [];

  const responses = operation.responses as Record<string, JsonObject>;
  const response = responses[String(exchange.status)];
  if (!response) {
    return [`${where}: status ${exchange.status} is not documented for this route (documented: ${Object.keys(responses).join(', ')})`];
  }

  // A request the server accepted must be one the document calls valid.
  const requestBody = operation.requestBody as { content: Record<string, unknown> } | undefined;
  if (exchange.status < 300 && requestBody && exchange.requestBody.length > 0) {
    const type = mediaType(exchange.requestContentType) ?? '';
    if (!(type in requestBody.content)) {
      violations.push(`${where}: the server accepted a body of type ${type}, which the document does not list`);
    } else {
      const body = parse(exchange.requestBody);
      const validate = validatorAt(`${pointer}/requestBody/content/${pointerSegment(type)}/schema`);
      if (body.ok && !validate(body.value)) {
        violations.push(`${where}: the server accepted a request body the document calls invalid: ${schemaErrors(validate)}`);
      }
    }
  }

  const content = response.content as Record<string, unknown> | undefined;
  if (!content) {
    if (exchange.responseBody.length > 0) violations.push(`${where}: the answer has a body, the document says none`);
    return violations;
  }
  const type = mediaType(exchange.responseContentType) ?? '';
  const documented = type in content ? type : '*/*' in content ? '*/*' : undefined;
  if (!documented) return [...violations, `${where}: answered ${type}, the document says ${Object.keys(content).join(', ')}`];
  if (!documented.endsWith('json')) return violations;
  const body = parse(exchange.responseBody);
  if (!body.ok) return [...violations, `${where}: the answer is not JSON`];
  const validate = validatorAt(`${pointer}/responses/${exchange.status}/content/${pointerSegment(documented)}/schema`);
  if (!validate(body.value)) violations.push(`${where}: the answer does not fit the document: ${schemaErrors(validate)}`);
  return violations;
}

/** The schema of each change event type (`#/components/schemas/…`), as the document names them. */
const eventSchemas: Record<string, string> = {
  'state.changed': 'StateChangedEvent',
  'run.changed': 'DocumentChangedEvent',
  'profile.changed': 'DocumentChangedEvent',
  'shared.changed': 'DocumentChangedEvent',
  'memory.changed': 'MemoryChangedEvent',
  'session.expired': 'SessionExpiredEvent',
  'user.erased': 'UserErasedEvent',
};

/**
 * What is wrong with a change event a webhook or a WebSocket delivered, by the document's
 * schemas (OpenAPI has no words for a WebSocket or a webhook, so the event fixtures of
 * test/helpers/events.ts ask here); empty when nothing. An event type the document has no
 * schema for is a violation too: add its schema to functions/http/contract/schemas.ts.
 */
export function eventViolations(event: unknown, channel: string): string[] {
  const type = (event as JsonObject | null)?.type;
  const where = `${channel} event ${JSON.stringify((event as JsonObject | null)?.id ?? null)} (${String(type)})`;
  const schema = typeof type === 'string' ? eventSchemas[type] : undefined;
  if (!schema) return [`${where}: the document has no schema for this event type — add it to functions/http/contract/schemas.ts`];
  const validate = validatorAt(`/components/schemas/${schema}`);
  return validate(event) ? [] : [`${where}: does not fit ${schema}: ${schemaErrors(validate)}`];
}
