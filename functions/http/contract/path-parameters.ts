/** The path parameters of the routes (routes.ts), for the OpenAPI document (document.ts). */

/** What each path parameter is. */
export const pathParameters: Record<string, { description: string; type: 'string' | 'integer'; greedy?: true }> = {
  sid: { description: 'The session id.', type: 'string' },
  nid: { description: 'The node id.', type: 'string' },
  key: { description: "The note's key (an id).", type: 'string' },
  v: { description: 'The version number.', type: 'integer' },
  agentId: { description: 'The agent id.', type: 'string' },
  runId: { description: 'The run id.', type: 'string' },
  userId: { description: 'The user id.', type: 'string' },
  webhookId: { description: 'The webhook id.', type: 'string' },
  erasureId: { description: 'The erasure id (from `DELETE /v1/users/{userId}`).', type: 'string' },
  file: { description: 'A file name of the page (flat, no directories).', type: 'string' },
  path: {
    description: 'A memory item: its namespace (1–8 ids) and its key, joined by `/`, e.g. `users/u1/facts/diet`.',
    type: 'string',
    greedy: true,
  },
};
