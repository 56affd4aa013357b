/**
 * Every route of the HTTP API and the handler group that serves it. API Gateway (lib/) and
 * the local server (bin/start.ts) are both built from this list, so they cannot drift apart.
 */
export const routeGroups = [
  'health',
  'sessions',
  'tree',
  'state',
  'agents',
  'decide',
  'commits',
  'webhooks',
  'memory',
  'inspector',
] as const;
export type RouteGroup = (typeof routeGroups)[number];

/**
 * The route functions' timeout in AWS (lib/agent-state.ts), below API Gateway's 30 s
 * integration limit; a request that must stop in time (a `DELETE`'s erase) counts from it when
 * its function has no Lambda context to ask.
 */
export const ROUTE_TIMEOUT_MS = 20_000;

export interface Route {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /**
   * API Gateway path syntax: `{name}` marks a path parameter, a last `{name+}` a greedy one
   * (one or more segments, `users/u1/facts/k1`).
   */
  path: string;
  group: RouteGroup;
}

export const routes = [
  { method: 'GET', path: '/health', group: 'health' },
  // This API as an OpenAPI 3.1 document (contract/, docs/openapi.json): public, like /health.
  { method: 'GET', path: '/v1/openapi.json', group: 'health' },

  { method: 'POST', path: '/v1/sessions', group: 'sessions' },
  { method: 'GET', path: '/v1/sessions', group: 'sessions' },
  { method: 'GET', path: '/v1/sessions/{sid}', group: 'sessions' },
  { method: 'PATCH', path: '/v1/sessions/{sid}', group: 'sessions' },
  { method: 'DELETE', path: '/v1/sessions/{sid}', group: 'sessions' },
  // Erasure of a user (API.md section 12): their sessions, profile and memory.
  { method: 'DELETE', path: '/v1/users/{userId}', group: 'sessions' },
  { method: 'GET', path: '/v1/erasures/{erasureId}', group: 'sessions' },

  { method: 'POST', path: '/v1/sessions/{sid}/messages', group: 'tree' },
  { method: 'GET', path: '/v1/sessions/{sid}/messages', group: 'tree' },
  { method: 'GET', path: '/v1/sessions/{sid}/nodes', group: 'tree' },
  { method: 'GET', path: '/v1/sessions/{sid}/nodes/{nid}', group: 'tree' },
  { method: 'PUT', path: '/v1/sessions/{sid}/nodes/{nid}/notes/{key}', group: 'tree' },
  { method: 'GET', path: '/v1/sessions/{sid}/tree', group: 'tree' },
  { method: 'GET', path: '/v1/sessions/{sid}/notes', group: 'tree' },
  { method: 'PUT', path: '/v1/sessions/{sid}/head', group: 'tree' },
  { method: 'POST', path: '/v1/sessions/{sid}/copy', group: 'tree' },

  { method: 'GET', path: '/v1/sessions/{sid}/state', group: 'state' },
  { method: 'PATCH', path: '/v1/sessions/{sid}/state', group: 'state' },
  { method: 'PUT', path: '/v1/sessions/{sid}/state', group: 'state' },
  { method: 'GET', path: '/v1/sessions/{sid}/versions', group: 'state' },
  { method: 'GET', path: '/v1/sessions/{sid}/versions/{v}', group: 'state' },
  { method: 'GET', path: '/v1/sessions/{sid}/decisions', group: 'state' },

  { method: 'PUT', path: '/v1/agents/{agentId}', group: 'agents' },
  { method: 'GET', path: '/v1/agents/{agentId}', group: 'agents' },
  { method: 'GET', path: '/v1/agents', group: 'agents' },

  { method: 'POST', path: '/v1/sessions/{sid}/decide', group: 'decide' },

  { method: 'POST', path: '/v1/sessions/{sid}/commits', group: 'commits' },
  { method: 'GET', path: '/v1/sessions/{sid}/runs/{runId}/state', group: 'commits' },
  { method: 'GET', path: '/v1/profiles/{userId}/state', group: 'commits' },
  { method: 'GET', path: '/v1/shared/state', group: 'commits' },

  { method: 'POST', path: '/v1/webhooks', group: 'webhooks' },
  { method: 'GET', path: '/v1/webhooks', group: 'webhooks' },
  { method: 'GET', path: '/v1/webhooks/{webhookId}', group: 'webhooks' },
  { method: 'DELETE', path: '/v1/webhooks/{webhookId}', group: 'webhooks' },
  { method: 'GET', path: '/v1/webhooks/{webhookId}/dead-letters', group: 'webhooks' },
  { method: 'POST', path: '/v1/webhooks/{webhookId}/dead-letters/replay', group: 'webhooks' },

  // Memory items (API.md section 10). Literal routes win over the greedy `{path+}`, and an
  // item path has at least two segments (a namespace id and the key), so neither shadows one.
  { method: 'GET', path: '/v1/memory', group: 'memory' },
  { method: 'POST', path: '/v1/memory/search', group: 'memory' },
  { method: 'GET', path: '/v1/memory/versions', group: 'memory' },
  { method: 'GET', path: '/v1/memory/{path+}', group: 'memory' },
  { method: 'PUT', path: '/v1/memory/{path+}', group: 'memory' },
  { method: 'DELETE', path: '/v1/memory/{path+}', group: 'memory' },

  // The inspector page (docs/inspector.md): static files, no key; the page asks for one and
  // calls the routes above with it. Its files are flat under /inspector/ (no nested paths).
  { method: 'GET', path: '/', group: 'inspector' },
  { method: 'GET', path: '/inspector/{file}', group: 'inspector' },
] as const satisfies readonly Route[];

/**
 * Every route key, `'PATCH /v1/sessions/{sid}/state' | …`: the OpenAPI document
 * (contract/operations.ts) must describe each one, so a route added here without its
 * description fails the type check.
 */
type KeyOf<R> = R extends { method: infer M extends string; path: infer P extends string } ? `${M} ${P}` : never;
export type RouteKey = KeyOf<(typeof routes)[number]>;

/** The API Gateway route key of a route, e.g. `PATCH /v1/sessions/{sid}/state`. */
export const routeKey = (route: Pick<Route, 'method' | 'path'>) => `${route.method} ${route.path}`;
