import * as z from 'zod/mini';
import { isJsonNumber, type JsonNumber } from '../../core/json/json.js';
import { AgentStateError } from '../../core/kernel/errors.js';
import {
  MAX_TTL_SECONDS,
  MEMORY_VALUE_LIMIT_BYTES,
  type MemoryItem,
  type MemoryPrecondition,
  namespaceRoots,
  requireMemoryKey,
  requireNamespace,
} from '../../core/memory/memory.js';
import { createHttpHandler, type RouteInput } from '../api.js';
import { bodyAsSent, ifMatch, pagination } from '../edge/request.js';
import { json, noContent } from '../edge/responses.js';
import { memory } from '../parts/memory.js';

/**
 * An embedding's numbers as sent: memory-vector.ts checks them (1–4,096 finite numbers, not all
 * zero), taking a number kept as its text (`1.0`) by its value.
 */
export const embeddingNumber = z.custom<number | JsonNumber>((value) => typeof value === 'number' || isJsonNumber(value), {
  message: 'must be a number',
});
const embeddingNumbers = z.array(embeddingNumber);

export const putMemoryBody = z.strictObject({
  value: z.unknown().check(z.refine((value) => value !== undefined, 'is required')),
  ttlSeconds: z.optional(z.number().check(z.int(), z.minimum(1), z.maximum(MAX_TTL_SECONDS))),
  embedding: z.optional(embeddingNumbers),
});

export const searchMemoryBody = z.strictObject({
  namespacePrefix: z.optional(z.array(z.string())),
  filter: z.optional(z.record(z.string(), z.unknown())),
  limit: z.optional(z.number().check(z.int(), z.minimum(1), z.maximum(500))),
  cursor: z.optional(z.string().check(z.minLength(1), z.maxLength(4096))),
  vector: z.optional(embeddingNumbers),
  includeEmbedding: z.optional(z.boolean()),
});

/** `?includeEmbedding=true` (or `1`); `false`, `0` or absent leaves the embedding out. */
function includeEmbedding(input: RouteInput): boolean {
  const raw = input.query('includeEmbedding');
  if (raw === undefined || raw === 'false' || raw === '0') return false;
  if (raw === 'true' || raw === '1') return true;
  throw new AgentStateError('invalid_request', 'includeEmbedding must be true or false', { field: 'includeEmbedding' });
}

/** `/v1/memory/users/u1/facts/k1`: the namespace (1–8 ids) and the key, from the path's last segments. */
function itemPath(input: RouteInput): { namespace: string[]; key: string } {
  const segments = input.path('path').split('/');
  if (segments.length < 2) {
    throw new AgentStateError('invalid_request', 'an item is addressed as /v1/memory/<namespace…>/<key>, with 1 to 8 namespace ids', {
      field: 'namespace',
    });
  }
  const key = requireMemoryKey(segments[segments.length - 1]);
  return { namespace: requireNamespace(segments.slice(0, -1), 'namespace'), key };
}

/** `users/u1` of a query parameter as a namespace; absent or empty: the root. */
function queryNamespace(input: RouteInput, name: string, options: { minDepth: number }): string[] {
  const raw = input.query(name);
  if (raw === undefined || raw === '') return requireNamespace([], name, options);
  return requireNamespace(raw.split('/'), name, options);
}

/** `If-Match: "7"` (the live item is at version 7), `If-Match: *` (it exists), `If-None-Match: *` (it does not). */
function precondition(input: RouteInput): MemoryPrecondition {
  const match = input.header('if-match');
  const noneMatch = input.header('if-none-match');
  if (match !== undefined && noneMatch !== undefined) {
    throw new AgentStateError('invalid_request', 'send If-Match or If-None-Match, not both', { field: 'If-None-Match' });
  }
  if (noneMatch !== undefined) {
    if (noneMatch.trim() !== '*') {
      throw new AgentStateError('invalid_request', 'If-None-Match takes only * (create the item only if it does not exist)', {
        field: 'If-None-Match',
      });
    }
    return { kind: 'absent' };
  }
  const expected = ifMatch(input);
  if (expected === undefined) return { kind: 'none' };
  if (expected === '*') return { kind: 'exists' };
  return { kind: 'version', versions: typeof expected === 'number' ? [expected] : expected };
}

function itemLocation(item: MemoryItem): string {
  return `/v1/memory/${[...item.namespace, item.key].map(encodeURIComponent).join('/')}`;
}

function itemResponse(item: MemoryItem, status = 200, headers: Record<string, string> = {}) {
  return json(status, item, { etag: `"${item.version}"`, ...headers });
}

/** Memory items: put, get, delete, search, namespaces, versions (API.md section 10, docs/api.md "Memory"). */
export const handler = createHttpHandler(
  { memory },
  {
    'GET /v1/memory': async (input) => {
      const prefix = queryNamespace(input, 'prefix', { minDepth: 0 });
      const rawDepth = input.query('maxDepth');
      let maxDepth: number | undefined;
      if (rawDepth !== undefined) {
        maxDepth = Number(rawDepth);
        if (!/^\d$/.test(rawDepth) || maxDepth < 1 || maxDepth > 8) {
          throw new AgentStateError('invalid_request', 'maxDepth must be an integer from 1 to 8', { field: 'maxDepth' });
        }
      }
      const page = await input.deps.memory.listNamespaces(input.tenant, namespaceRoots(input.allowedAgents), {
        prefix,
        ...pagination(input),
        ...(maxDepth === undefined ? {} : { maxDepth }),
      });
      return json(200, { namespaces: page.items, ...(page.next ? { next: page.next } : {}) });
    },

    'POST /v1/memory/search': async (input) => {
      const request = bodyAsSent(input, searchMemoryBody);
      const namespacePrefix = requireNamespace(request.namespacePrefix ?? [], 'namespacePrefix', { minDepth: 0 });
      const page = await input.deps.memory.search(input.tenant, namespaceRoots(input.allowedAgents), {
        namespacePrefix,
        limit: request.limit ?? 50,
        ...(request.filter === undefined ? {} : { filter: request.filter }),
        ...(request.cursor === undefined ? {} : { cursor: request.cursor }),
        ...(request.vector === undefined ? {} : { vector: request.vector }),
        ...(request.includeEmbedding === undefined ? {} : { includeEmbedding: request.includeEmbedding }),
      });
      return json(200, { items: page.items, ...(page.next ? { next: page.next } : {}) });
    },

    'GET /v1/memory/versions': async (input) => {
      const namespace = queryNamespace(input, 'namespace', { minDepth: 1 });
      const key = requireMemoryKey(input.query('key'));
      const page = await input.deps.memory.history(
        input.tenant,
        namespaceRoots(input.allowedAgents),
        { namespace, key },
        pagination(input),
      );
      return json(200, { versions: page.items, ...(page.next ? { next: page.next } : {}) });
    },

    'GET /v1/memory/{path+}': async (input) => {
      const { namespace, key } = itemPath(input);
      const withEmbedding = includeEmbedding(input);
      return itemResponse(
        await input.deps.memory.get(input.tenant, namespaceRoots(input.allowedAgents), namespace, key, { withEmbedding }),
      );
    },

    'PUT /v1/memory/{path+}': async (input) => {
      const target = itemPath(input);
      const condition = precondition(input);
      const request = bodyAsSent(input, putMemoryBody, { required: 'send {"value": {...}} (and optionally "ttlSeconds")' });
      const { item, created } = await input.deps.memory.put(
        input.tenant,
        namespaceRoots(input.allowedAgents),
        target,
        {
          value: request.value,
          ...(request.ttlSeconds === undefined ? {} : { ttlSeconds: request.ttlSeconds }),
          ...(request.embedding === undefined ? {} : { embedding: request.embedding }),
        },
        { condition, author: input.caller },
      );
      return created ? itemResponse(item, 201, { location: itemLocation(item) }) : itemResponse(item);
    },

    'DELETE /v1/memory/{path+}': async (input) => {
      const target = itemPath(input);
      const condition = precondition(input);
      if (condition.kind === 'absent') {
        throw new AgentStateError('invalid_request', 'If-None-Match applies to a put, not a delete', { field: 'If-None-Match' });
      }
      await input.deps.memory.delete(input.tenant, namespaceRoots(input.allowedAgents), target, { condition, author: input.caller });
      return noContent();
    },
  },
  // A value may be 256 KiB (memory-service.ts names that limit); the JSON text of a body may be
  // longer than the value it encodes, so the body's own limit is 1 MiB, and named as such.
  { bodyLimitBytes: 4 * MEMORY_VALUE_LIMIT_BYTES, tooLarge: 'payload_too_large' },
);
