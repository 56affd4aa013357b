import * as z from 'zod/mini';
import { COMMAND_SCOPES, type Command, MERGE_POLICIES } from '../../core/commits/commands.js';
import { requireId } from '../../core/kernel/ids.js';
import { STATE_BODY_LIMIT_BYTES } from '../../core/model/model.js';
import { createHttpHandler } from '../api.js';
import { bodyAsSent, jsonValue, queryNode, sessionScope } from '../edge/request.js';
import { versionedJson } from '../edge/responses.js';
import { commits } from '../parts/commits.js';

/** A batch is one transaction: keep it well inside what one request should carry. */
const MAX_COMMANDS = 100;

/** Exactly one of `set` and `remove: true`: what makes a command's shape a `Command`. */
function setOrRemove<T extends { set?: unknown; remove?: true }>(value: T): value is T & Command {
  return (value.set !== undefined) !== (value.remove === true);
}

/**
 * A command as sent: its shape, and exactly one of `set` and `remove: true` (the refinement,
 * which zod/mini's checks hold without narrowing the type, so the schema names its output).
 */
const commandShape = z.strictObject({
  key: z.string().check(z.minLength(1), z.maxLength(256)),
  scope: z.enum(COMMAND_SCOPES),
  merge: z.enum(MERGE_POLICIES),
  set: z.optional(jsonValue),
  remove: z.optional(z.literal(true)),
});
const command = commandShape.check(z.refine(setOrRemove, { message: 'a command has either set or remove: true' })) as z.ZodMiniType<
  Command,
  z.input<typeof commandShape>
>;

export const commitBody = z.strictObject({
  commands: z.array(command).check(z.minLength(1), z.maxLength(MAX_COMMANDS)),
  runId: z.optional(z.string()),
  expectedVersion: z.optional(z.number().check(z.int(), z.minimum(0))),
});

/** Commits and the documents of their scopes (API.md section 8). */
export const handler = createHttpHandler(
  { commits },
  {
    'POST /v1/sessions/{sid}/commits': async (input) => {
      const scope = sessionScope(input);
      // As sent: the commands are recorded in the version as they came.
      const { commands, runId, expectedVersion } = bodyAsSent(input, commitBody, { required: 'send {"commands": [...]}', ids: ['runId'] });
      const node = queryNode(input);
      const result = await input.deps.commits.commit(scope, {
        commands,
        ...(runId === undefined ? {} : { runId }),
        ...(expectedVersion === undefined ? {} : { expectedVersion }),
        ...(node === undefined ? {} : { node }),
        caller: input.caller,
        allowed: input.allowedAgents,
      });
      return versionedJson(result);
    },

    'GET /v1/sessions/{sid}/runs/{runId}/state': async (input) => {
      const scope = sessionScope(input);
      const runId = requireId(input.path('runId'), 'runId');
      const view = await input.deps.commits.readDocument({ kind: 'run', scope, id: runId });
      return versionedJson({ sessionId: scope.sessionId, runId, ...view });
    },

    'GET /v1/profiles/{userId}/state': async (input) => {
      const userId = requireId(input.path('userId'), 'userId');
      const view = await input.deps.commits.readDocument({ kind: 'profile', tenant: input.tenant, id: userId });
      return versionedJson({ userId, ...view });
    },

    'GET /v1/shared/state': async (input) => {
      const view = await input.deps.commits.readDocument({ kind: 'shared', tenant: input.tenant });
      return versionedJson(view);
    },
  },
  // A commit may set a thread key to a state of up to 4 MiB; a decision may carry one in `proposed`.
  { bodyLimitBytes: STATE_BODY_LIMIT_BYTES },
);
