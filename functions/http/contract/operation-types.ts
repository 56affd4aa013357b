import type * as z from 'zod';
import type { ErrorCode } from '../../core/kernel/errors.js';
import type { ComponentName } from './schemas.js';

// What an entry of the operations table (operations.ts) holds: a module of its own, so that the
// table itself stays within a file's 500 lines as routes are added.

export type Tag = 'health' | 'sessions' | 'tree' | 'state' | 'agents' | 'decide' | 'commits' | 'webhooks' | 'memory' | 'inspector';

export interface QueryParameter {
  name: string;
  description: string;
  schema: { type: 'string' | 'integer' | 'boolean'; minimum?: number; maximum?: number; enum?: string[]; pattern?: string };
}

export interface Operation {
  tag: Tag;
  summary: string;
  description?: string;
  /** No API key: `/health`, this document, the inspector's files. */
  public?: true;
  query?: readonly QueryParameter[];
  body?: {
    schema: z.core.$ZodType;
    /** Default `application/json`. */
    contentTypes?: readonly string[];
    /** An absent body counts as `{}`. */
    optional?: true;
    /** Shown by API tools; `redocly lint` checks it against the schema. */
    example: unknown;
    /** A media type whose body takes another form than `example`'s. */
    exampleOf?: Readonly<Record<string, unknown>>;
  };
  /** The success answers: status → what they carry (each schema's example is in examples.ts). */
  responses: Partial<Record<200 | 201 | 202 | 204, Answer>>;
  problems: readonly ErrorCode[];
  /** State routes answer an oversize body with `413 state_too_large` rather than `payload_too_large`. */
  tooLarge?: 'state_too_large';
}

export interface Answer {
  description: string;
  schema?: ComponentName;
  /** A body that is not JSON (the inspector's page and files). */
  contentType?: string;
  headers?: readonly ('ETag' | 'Location')[];
}
