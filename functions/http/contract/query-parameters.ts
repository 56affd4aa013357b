import type { QueryParameter } from './operation-types.js';

// The query parameters several routes of the operations table share (operations.ts, tree-operations.ts).

export const node: QueryParameter = {
  name: 'node',
  description: 'The node to read or write at; default: the head.',
  schema: { type: 'string' },
};
export const limit: QueryParameter = {
  name: 'limit',
  description: 'Page size, 1–500.',
  schema: { type: 'integer', minimum: 1, maximum: 500 },
};
export const last: QueryParameter = {
  name: 'last',
  description: 'Its last N messages.',
  schema: { type: 'integer', minimum: 1, maximum: 10000 },
};
export const cursor: QueryParameter = {
  name: 'cursor',
  description: 'The `next` of the previous page, unchanged.',
  schema: { type: 'string' },
};
export const page = [limit, cursor] as const;
export const notesOf: QueryParameter = {
  name: 'notesOf',
  description: 'Up to 200 node ids (a,b): their notes.',
  schema: { type: 'string' },
};
const yesNo: QueryParameter['schema'] = { type: 'string', enum: ['1', 'true', '0', 'false'] };
export const flag = (name: string, description: string): QueryParameter => ({ name, description, schema: yesNo });
