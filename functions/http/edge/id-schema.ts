import * as z from 'zod/mini';
import { ID_PATTERN, ID_RULE, isDotSegment } from '../../core/kernel/ids.js';

/**
 * The zod schema of an identifier (core/kernel/ids.ts); a body's ids are checked first by
 * request.ts's `requireIds`. A module of its own: a schema with a check is a method call
 * esbuild must keep wherever its module is bundled, and only the sessions and agents groups
 * (and the contract) use this one.
 */
export const idSchema = z.string().check(
  z.regex(ID_PATTERN, `must be ${ID_RULE}`),
  z.refine((id) => !isDotSegment(id), `must be ${ID_RULE}`),
);

/**
 * `retention` of a session or an agent (API.md section 12); its windows are checked by the
 * core, naming the field. Here beside the id beside which the same two groups use it.
 */
export const retentionSchema = z.nullable(z.strictObject({ keepVersions: z.optional(z.number()), keepDays: z.optional(z.number()) }));
