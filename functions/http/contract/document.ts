import * as z from 'zod';
import { type ErrorCode, errorStatus } from '../../core/kernel/errors.js';
import { ID_PATTERN } from '../../core/kernel/ids.js';
import { jsonObject } from '../edge/request.js';
import { embeddingNumber } from '../handlers/memory.js';
import { answerExamples, problemExample } from './examples.js';
import type { Operation, Tag } from './operation-types.js';
import { operations } from './operations.js';
import { pathParameters } from './path-parameters.js';
import { type RouteKey, routes } from './routes.js';
import { type ComponentName, components } from './schemas.js';

/**
 * The OpenAPI 3.1 document of the HTTP API, built from the route table (routes.ts), what each
 * route is (operations.ts), the zod schemas the handlers parse bodies with, and the schemas of
 * what they answer (schemas.ts). `npm run openapi` writes it to docs/openapi.json, which
 * `GET /v1/openapi.json` serves; test/unit/openapi.test.ts fails when the two differ.
 */

type JsonSchema = { [key: string]: unknown };

const COMPONENT_PREFIX = '#/components/schemas/';
const componentOf = new Map<z.core.$ZodType, string>(Object.entries(components).map(([name, schema]) => [schema as z.core.$ZodType, name]));

/**
 * One zod schema as a JSON Schema (draft 2020-12, the dialect of OpenAPI 3.1): schemas that are
 * components become `$ref`s, the free-form JSON values of bodies (request.ts `jsonValue`) among
 * them, and so would a `z.json()` (recursive: zod writes it as local `$defs`, which mean nothing
 * inside an OpenAPI document).
 */
function jsonSchemaOf(root: z.core.$ZodType, io: 'input' | 'output'): JsonSchema {
  const generated = z.toJSONSchema(root, {
    target: 'draft-2020-12',
    io,
    reused: 'inline',
    cycles: 'ref',
    unrepresentable: 'any',
    override: (context) => {
      const schema = context.zodSchema as unknown as z.core.$ZodType;
      // zod writes a timestamp as both `format: date-time` and a page-long regex: the format says it.
      if (context.jsonSchema.format === 'date-time') delete context.jsonSchema.pattern;
      // A body's JSON object is a zod custom check (request.ts, to keep zod's record schema out of
      // the bundles), which zod cannot write out: say what it checks, as a record would.
      if (schema === jsonObject) {
        for (const key of Object.keys(context.jsonSchema)) delete (context.jsonSchema as JsonSchema)[key];
        Object.assign(context.jsonSchema, {
          type: 'object',
          propertyNames: { type: 'string' },
          additionalProperties: { $ref: `${COMPONENT_PREFIX}Json` },
        });
        return;
      }
      // An embedding's number is a custom check too (a number kept as its text counts): a number.
      if (schema === embeddingNumber) {
        for (const key of Object.keys(context.jsonSchema)) delete (context.jsonSchema as JsonSchema)[key];
        Object.assign(context.jsonSchema, { type: 'number' });
        return;
      }
      const name = schema === root ? undefined : (componentOf.get(schema) ?? (schema._zod.def.type === 'lazy' ? 'Json' : undefined));
      if (name === undefined) return;
      for (const key of Object.keys(context.jsonSchema)) delete (context.jsonSchema as JsonSchema)[key];
      (context.jsonSchema as JsonSchema).$ref = `${COMPONENT_PREFIX}${name}`;
    },
  }) as JsonSchema;
  const { $schema: _dialect, $defs: defs = {}, ...schema } = generated;
  return inlineDefinitions(schema, defs as Record<string, JsonSchema>) as JsonSchema;
}

/** A request body's schema: a component by reference (a state is any JSON value), else written out. */
function bodySchemaOf(schema: z.core.$ZodType): JsonSchema {
  const name = componentOf.get(schema);
  return name === undefined ? jsonSchemaOf(schema, 'input') : { $ref: `${COMPONENT_PREFIX}${name}` };
}

/** Replaces each `#/$defs/x` by what it stands for: here always a `$ref` to a component. */
function inlineDefinitions(value: unknown, defs: Record<string, JsonSchema>): unknown {
  if (Array.isArray(value)) return value.map((item) => inlineDefinitions(item, defs));
  if (typeof value !== 'object' || value === null) return value;
  const ref = (value as JsonSchema).$ref;
  if (typeof ref === 'string' && ref.startsWith('#/$defs/')) {
    const target = defs[ref.slice('#/$defs/'.length)];
    if (!target || typeof target.$ref !== 'string') throw new Error(`a schema refers to ${ref}, which the document cannot hold`);
    return target;
  }
  return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, inlineDefinitions(item, defs)]));
}

const tags: Record<Tag, string> = {
  health: 'The service itself: health and this document. No key needed.',
  sessions: 'A session is one conversation: its message tree, state versions and agent config.',
  tree: 'Messages form a tree; editing or regenerating a message makes a branch.',
  state: 'State at any node of the tree, its writes (merge patch, replace) and history.',
  agents: 'The agent registry: workers, initial config, hierarchy, typed fields.',
  decide: 'One decision of an agent engine, with state riding it.',
  commits: 'Keyed commands over the thread, a run, a user profile and the shared document.',
  webhooks: 'Change events delivered to your endpoints, and their dead letters.',
  memory: 'Memory items: JSON objects under namespaces, searched across sessions.',
  inspector: 'The inspector web page (HTML and static files). No key needed.',
};

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH']);

/** The codes a route answers besides its own: the middleware's, the store's, the write path's. */
function commonProblems(method: string, operation: Operation): ErrorCode[] {
  if (operation.public) return ['internal'];
  const codes: ErrorCode[] = ['unauthorized', 'invalid_id', 'forbidden', 'throttled', 'internal', 'unavailable'];
  // A read whose answer would not fit Lambda's payload (edge/lambda-payload.ts).
  if (method === 'GET') codes.push('payload_too_large');
  if (WRITE_METHODS.has(method)) {
    codes.push('invalid_json', 'invalid_request', 'unsupported_media_type', operation.tooLarge ?? 'payload_too_large');
    codes.push('idempotency_key_reused', 'conflict');
  }
  return codes;
}

/** The error answers of a route, one per status, each naming its codes. */
function problemResponses(method: string, operation: Operation): Record<string, unknown> {
  const byStatus = new Map<number, Set<ErrorCode>>();
  for (const code of [...commonProblems(method, operation), ...operation.problems]) {
    const status = errorStatus[code];
    byStatus.set(status, (byStatus.get(status) ?? new Set()).add(code));
  }
  const responses: Record<string, unknown> = {};
  for (const [status, codes] of [...byStatus].sort(([a], [b]) => a - b)) {
    const list = [...codes].sort();
    responses[String(status)] = {
      description: `A problem: ${list.map((code) => `\`${code}\``).join(', ')}.`,
      // DynamoDB's throttling answers with how long to wait (API.md section 14, middleware.ts).
      ...(status === 429
        ? {
            headers: {
              'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer', minimum: 0 } },
            },
          }
        : {}),
      content: {
        'application/problem+json': {
          schema: { allOf: [{ $ref: `${COMPONENT_PREFIX}Problem` }, { properties: { code: { enum: list } } }] },
          examples: Object.fromEntries(list.map((code) => [code, { $ref: `#/components/examples/${code}` }])),
        },
      },
    };
  }
  return responses;
}

/** `getV1SessionsBySidState`: the method and the path, so every id is stable and unique. */
function operationId(method: string, path: string): string {
  const words = path
    .split('/')
    .filter(Boolean)
    .map((segment) => segment.replace(/^\{(.+)\}$/, 'by-$1').replace(/\.json$/, '-json'));
  const camel = [method.toLowerCase(), ...words.flatMap((word) => word.split(/[-_.]/))].map((word, index) =>
    index === 0 ? word : word.charAt(0).toUpperCase() + word.slice(1),
  );
  return camel.join('') || method.toLowerCase();
}

function parametersOf(method: string, path: string, operation: Operation): unknown[] {
  const parameters: unknown[] = [...path.matchAll(/\{(\w+)\+?\}/g)].map(([, name = '']) => {
    const known = pathParameters[name];
    if (!known) throw new Error(`path parameter {${name}} of ${path} has no description in operations.ts (pathParameters)`);
    return {
      name,
      in: 'path',
      required: true,
      description: known.description,
      ...(known.greedy ? { 'x-greedy': true } : {}),
      schema:
        known.type === 'integer'
          ? { type: 'integer', minimum: 0 }
          : { type: 'string', pattern: known.greedy ? greedyPatternSource : idPatternSource },
    };
  });
  for (const query of operation.query ?? [])
    parameters.push({ name: query.name, in: 'query', description: query.description, schema: query.schema });
  if (!operation.public) parameters.push({ $ref: '#/components/parameters/AgentId' });
  if (!operation.public && WRITE_METHODS.has(method)) parameters.push({ $ref: '#/components/parameters/IdempotencyKey' });
  if (operation.tooLarge) parameters.push({ $ref: '#/components/parameters/IfMatch' });
  return parameters;
}

const idPatternSource = ID_PATTERN.source;
/** A greedy parameter: ids joined by `/` (a namespace of 1–8 ids and a key). */
const greedyPatternSource = `^${ID_PATTERN.source.slice(1, -1)}(?:/${ID_PATTERN.source.slice(1, -1)}){1,8}$`;

/**
 * A route's path as OpenAPI writes it: a greedy `{path+}` (API Gateway's, several segments)
 * becomes `{path}`, marked `x-greedy` on its parameter, since OpenAPI has no greedy syntax.
 */
function documentPath(path: string): string {
  return path.replace(/\{(\w+)\+\}/g, '{$1}');
}

/** The example an answer of `schema` shows: examples.ts holds one per answer schema. */
function exampleOf(schema: ComponentName, path: string): unknown {
  const example = (answerExamples as Partial<Record<ComponentName, unknown>>)[schema];
  if (example === undefined) throw new Error(`${schema}, an answer of ${path}, has no example in examples.ts (answerExamples)`);
  return example;
}

function operationObject(method: string, path: string, operation: Operation): Record<string, unknown> {
  const responses: Record<string, unknown> = {};
  for (const [status, answer] of Object.entries(operation.responses)) {
    const headers = Object.fromEntries((answer.headers ?? []).map((header) => [header, { $ref: `#/components/headers/${header}` }]));
    const content = answer.schema
      ? {
          'application/json': { schema: { $ref: `${COMPONENT_PREFIX}${answer.schema}` }, example: exampleOf(answer.schema, path) },
        }
      : answer.contentType
        ? { [answer.contentType]: { schema: { type: 'string' } } }
        : status === '204'
          ? undefined
          : { 'application/json': { schema: { type: 'object' } } };
    responses[status] = {
      description: answer.description,
      ...(Object.keys(headers).length ? { headers } : {}),
      ...(content ? { content } : {}),
    };
  }
  Object.assign(responses, problemResponses(method, operation));
  const body = operation.body;
  return {
    operationId: operationId(method, path),
    tags: [operation.tag],
    summary: operation.summary,
    ...(operation.description ? { description: operation.description } : {}),
    ...(operation.public ? { security: [] } : {}),
    parameters: parametersOf(method, path, operation),
    ...(body
      ? {
          requestBody: {
            required: !body.optional,
            content: Object.fromEntries(
              (body.contentTypes ?? ['application/json']).map((type) => [
                type,
                { schema: bodySchemaOf(body.schema), example: body.exampleOf?.[type] ?? body.example },
              ]),
            ),
          },
        }
      : {}),
    responses,
  };
}

export function openApiDocument(): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const key = `${route.method} ${route.path}` as RouteKey;
    const path = documentPath(route.path);
    paths[path] ??= {};
    (paths[path] as Record<string, unknown>)[route.method.toLowerCase()] = operationObject(route.method, route.path, operations[key]);
  }
  const schemas = Object.fromEntries(
    Object.entries(components).map(([name, schema]) =>
      name === 'Json' ? [name, { description: 'Any JSON value, stored verbatim.' }] : [name, jsonSchemaOf(schema, 'output')],
    ),
  );
  return {
    openapi: '3.1.1',
    info: {
      title: 'agentstate HTTP API',
      version: '1',
      summary: 'Durable, versioned, branch-aware memory for stateless AI-agent workers.',
      description:
        'The same routes locally (`npm start`) and in AWS (`cdk deploy`). Errors are RFC 9457 problem documents with a stable `code`. Live changes: the WebSocket API (`/v1/ws?token=<key>` locally, the stack output `WebSocketUrl` in AWS), described in docs/api.md.',
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    servers: [
      {
        url: '{baseUrl}',
        description: 'npm start, or the stack output ApiUrl of cdk deploy',
        variables: { baseUrl: { default: 'http://localhost:4000' } },
      },
    ],
    security: [{ apiKey: [] }],
    tags: Object.entries(tags).map(([name, description]) => ({ name, description })),
    paths,
    components: {
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'An API key: `Authorization: Bearer <key>`. A key belongs to one tenant.' },
      },
      parameters: {
        AgentId: {
          name: 'X-Agent-Id',
          in: 'header',
          description: "The agent the caller acts as (required for a key limited to agents); recorded as a version's `author`.",
          schema: { type: 'string', pattern: idPatternSource },
        },
        IdempotencyKey: {
          name: 'Idempotency-Key',
          in: 'header',
          description: 'A retry with the same key within 24 h answers the first response and writes nothing.',
          schema: { type: 'string', minLength: 1, maxLength: 255 },
        },
        IfMatch: {
          name: 'If-Match',
          in: 'header',
          description: 'Write only if the node is still at this version (`"7"`), else `412 version_mismatch`.',
          schema: { type: 'string' },
        },
      },
      headers: {
        ETag: { description: 'The version answered, `"<version>"`.', schema: { type: 'string' } },
        Location: { description: 'Where the created resource is.', schema: { type: 'string' } },
      },
      schemas,
      examples: Object.fromEntries(
        Object.keys(errorStatus).map((code) => [
          code,
          { summary: `${errorStatus[code as ErrorCode]} ${code}`, value: problemExample(code as ErrorCode) },
        ]),
      ),
    },
  };
}

/** The document as docs/openapi.json holds it: two-space indents and a final newline. */
export function openApiText(document: Record<string, unknown>): string {
  return `${JSON.stringify(document, null, 2)}\n`;
}
