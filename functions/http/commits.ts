import * as z from 'zod';
import { COMMAND_SCOPES, MERGE_POLICIES, type Command } from '../core/commands.js';
import { AgentStateError } from '../core/errors.js';
import { requireId } from '../core/ids.js';
import { createHttpHandler, json, parseBody, requireIds, sessionScope, type RouteInput } from './api.js';

/** A batch is one transaction: keep it well inside what one request should carry. */
const MAX_COMMANDS = 100;

const command = z
  .object({
    key: z.string().min(1).max(256),
    scope: z.enum(COMMAND_SCOPES),
    merge: z.enum(MERGE_POLICIES),
    set: z.json().optional(),
    remove: z.literal(true).optional(),
  })
  .strict()
  .refine((value) => (value.set !== undefined) !== (value.remove === true), {
    message: 'a command has either set or remove: true',
  });

const commitBody = z
  .object({
    commands: z.array(command).min(1).max(MAX_COMMANDS),
    runId: z.string().optional(),
    expectedVersion: z.number().int().min(0).optional(),
  })
  .strict();

function queryNode(input: RouteInput): string | undefined {
  const node = input.query('node');
  return node === undefined ? undefined : requireId(node, 'node');
}

/** Commits and the documents of their scopes (API.md section 8). */
export const handler = createHttpHandler({
  'POST /v1/sessions/{sid}/commits': async (input) => {
    const scope = sessionScope(input);
    if (input.body === undefined) throw new AgentStateError('invalid_request', 'send {"commands": [...]}');
    requireIds(input.body, ['runId']);
    const request = parseBody(commitBody, input.body);
    // Validated above; the commands are recorded in the version as sent.
    const commands = (input.body as { commands: Command[] }).commands;
    const node = queryNode(input);
    const result = await input.deps.commits.commit(scope, {
      commands,
      ...(request.runId === undefined ? {} : { runId: request.runId }),
      ...(request.expectedVersion === undefined ? {} : { expectedVersion: request.expectedVersion }),
      ...(node === undefined ? {} : { node }),
      caller: input.caller,
    });
    return json(200, result, { etag: `"${result.version}"` });
  },

  'GET /v1/sessions/{sid}/runs/{runId}/state': async (input) => {
    const scope = sessionScope(input);
    const runId = requireId(input.path('runId'), 'runId');
    const view = await input.deps.commits.readDocument({ kind: 'run', scope, id: runId });
    return json(200, { sessionId: scope.sessionId, runId, ...view }, { etag: `"${view.version}"` });
  },

  'GET /v1/profiles/{userId}/state': async (input) => {
    const userId = requireId(input.path('userId'), 'userId');
    const view = await input.deps.commits.readDocument({ kind: 'profile', tenant: input.tenant, id: userId });
    return json(200, { userId, ...view }, { etag: `"${view.version}"` });
  },

  'GET /v1/shared/state': async (input) => {
    const view = await input.deps.commits.readDocument({ kind: 'shared', tenant: input.tenant });
    return json(200, view, { etag: `"${view.version}"` });
  },
});

