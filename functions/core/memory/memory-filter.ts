import {
  compareJsonNumbers,
  isJsonNumber,
  isJsonObject,
  type Json,
  type JsonNumeric,
  type JsonObject,
  jsonValueEqual,
  setOwn,
  stringifyJson,
} from '../json/json.js';
import { AgentStateError } from '../kernel/errors.js';

/**
 * The filter of a memory search (API.md section 10): top-level fields of an item's value,
 * each matched by equality or by operators, all of them at once.
 *
 *   {"topic": "travel"}                       equality (JSON equality; numbers by value)
 *   {"score": {"$gte": 0.5, "$lt": 1}}       every operator of the field must hold
 *   {"lang": {"$in": ["en", "de"]}, "draft": {"$ne": true}}
 *
 * An object whose keys all begin with `$` is a set of operators; any other object is a value
 * to be equal to. A field the value does not have matches only `$ne` (null is a value, not a
 * missing field). `$gt $gte $lt $lte` compare numbers with numbers, exactly (as decimals, not
 * as doubles: `9007199254740993 > 9007199254740992`, json.ts `compareJsonNumbers`), and strings with strings (by Unicode
 * code point, as DynamoDB orders them); anything else does not match them.
 */

const FILTER_OPERATORS = ['$eq', '$ne', '$gt', '$gte', '$lt', '$lte', '$in'] as const;
/** Whether a field is there at all (`true`) or not (`false`): routes over state (API.md section 13) have it too. */
const EXISTS = '$exists';
type Operator = (typeof FILTER_OPERATORS)[number] | typeof EXISTS;

/** Where a filter sits in its request (named by its errors), and whether it may use `$exists`. */
export interface FilterSyntax {
  /** The request field of the filter, e.g. `filter` or `routes.0.when`. */
  path: string;
  exists: boolean;
}

const SEARCH_FILTER: FilterSyntax = { path: 'filter', exists: false };

/** Bounds that keep a filter's evaluation cheap and its cursor binding short. */
const MAX_FILTER_FIELDS = 32;
const MAX_IN_VALUES = 100;

interface FieldTest {
  field: string;
  tests: ReadonlyArray<{ op: Operator; operand: Json }>;
}

/** A checked filter: one test list per field. */
export type MemoryFilter = readonly FieldTest[];

function invalidFilter(syntax: FilterSyntax, detail: string, field?: string): AgentStateError {
  return new AgentStateError('invalid_request', detail, { field: field === undefined ? syntax.path : `${syntax.path}.${field}` });
}

/**
 * Checks a filter (`400 invalid_request` naming the field): a memory search's `filter` by
 * default, or another request field's with `syntax`. Absent: matches everything.
 */
export function parseFilter(raw: Json | undefined, syntax: FilterSyntax = SEARCH_FILTER): MemoryFilter {
  if (raw === undefined || raw === null) return [];
  if (!isJsonObject(raw)) throw invalidFilter(syntax, `${syntax.path} must be an object of top-level fields`);
  const entries = Object.entries(raw);
  if (entries.length > MAX_FILTER_FIELDS) throw invalidFilter(syntax, `${syntax.path} may name at most ${MAX_FILTER_FIELDS} fields`);
  return entries.map(([field, condition]) => ({ field, tests: parseCondition(syntax, field, condition) }));
}

function parseCondition(syntax: FilterSyntax, field: string, condition: Json): FieldTest['tests'] {
  const where = `${syntax.path}.${field}`;
  if (!isJsonObject(condition)) return [{ op: '$eq', operand: condition }];
  const keys = Object.keys(condition);
  const operators = keys.filter((key) => key.startsWith('$'));
  if (operators.length === 0) return [{ op: '$eq', operand: condition }];
  if (operators.length !== keys.length) {
    throw invalidFilter(syntax, `${where} mixes operators with plain keys; use {"$eq": {...}} to match an object with $ keys`, field);
  }
  const known: readonly string[] = syntax.exists ? [...FILTER_OPERATORS, EXISTS] : FILTER_OPERATORS;
  return operators.map((op) => {
    if (!known.includes(op)) throw invalidFilter(syntax, `${where}: unknown operator ${op}; use one of ${known.join(' ')}`, field);
    const operand = condition[op] as Json;
    if (op === '$in' && (!Array.isArray(operand) || operand.length > MAX_IN_VALUES)) {
      throw invalidFilter(syntax, `${where}.$in must be an array of at most ${MAX_IN_VALUES} values`, field);
    }
    if ((op === '$gt' || op === '$gte' || op === '$lt' || op === '$lte') && !isNumeric(operand) && typeof operand !== 'string') {
      throw invalidFilter(syntax, `${where}.${op} compares with a number or a string`, field);
    }
    if (op === EXISTS && typeof operand !== 'boolean') throw invalidFilter(syntax, `${where}.$exists is true or false`, field);
    return { op: op as Operator, operand };
  });
}

/** The top-level fields a filter names. */
export function fieldsOf(filter: MemoryFilter): string[] {
  return filter.map((test) => test.field);
}

/** Whether a whole value matches the filter. */
export function matchesMemoryFilter(filter: MemoryFilter, value: JsonObject): boolean {
  return filter.every(({ field, tests }) => {
    const present = Object.hasOwn(value, field);
    return tests.every((test) => holds(test.op, test.operand, present, present ? (value[field] as Json) : null));
  });
}

/**
 * The filter's verdict on an index entry: the value's short scalar fields (`fields`) and
 * whether it has others (`partial`). `unknown` when a field the filter names may be among
 * those left out: then only the value itself can tell.
 */
export function decideOnFields(filter: MemoryFilter, fields: JsonObject, partial: boolean): boolean | 'unknown' {
  let verdict: boolean | 'unknown' = true;
  for (const { field, tests } of filter) {
    const present = Object.hasOwn(fields, field);
    if (!present && partial) {
      verdict = 'unknown';
      continue;
    }
    const value = present ? (fields[field] as Json) : null;
    if (!tests.every((test) => holds(test.op, test.operand, present, value))) return false;
  }
  return verdict;
}

function holds(op: Operator, operand: Json, present: boolean, value: Json): boolean {
  switch (op) {
    case EXISTS:
      return present === operand;
    case '$eq':
      return present && jsonValueEqual(value, operand);
    case '$ne':
      return !present || !jsonValueEqual(value, operand);
    case '$in':
      return present && (operand as Json[]).some((candidate) => jsonValueEqual(value, candidate));
    case '$gt':
    case '$gte':
    case '$lt':
    case '$lte': {
      if (!present) return false;
      const order = compareScalars(value, operand);
      if (order === null) return false;
      return op === '$gt' ? order > 0 : op === '$gte' ? order >= 0 : op === '$lt' ? order < 0 : order <= 0;
    }
  }
}

/** The order of two numbers or two strings; null when they are not comparable. */
function compareScalars(a: Json, b: Json): number | null {
  if (isNumeric(a) && isNumeric(b)) return compareJsonNumbers(a, b);
  if (typeof a === 'string' && typeof b === 'string') return compareCodePoints(a, b);
  return null;
}

/** Whether a value is a number (a double, or a JsonNumber kept verbatim). */
function isNumeric(value: unknown): value is JsonNumeric {
  return typeof value === 'number' || isJsonNumber(value);
}

/** Orders strings by Unicode code point (UTF-8 byte order, as DynamoDB does), not by UTF-16 unit. */
function compareCodePoints(a: string, b: string): number {
  const left = [...a];
  const right = [...b];
  for (let index = 0; index < Math.min(left.length, right.length); index++) {
    const x = (left[index] as string).codePointAt(0) as number;
    const y = (right[index] as string).codePointAt(0) as number;
    if (x !== y) return x < y ? -1 : 1;
  }
  return Math.sign(left.length - right.length);
}

/** The longest string field the index keeps, and the most it keeps of one value, in UTF-8 bytes. */
const INDEXED_STRING_BYTES = 128;
const INDEXED_FIELDS_BYTES = 512;

/**
 * The short scalar top-level fields of a value, which the search index carries so that most
 * filters are decided without reading the value: strings of up to 128 bytes, numbers,
 * booleans and null, at most 512 bytes together. `partial` says whether anything was left out.
 */
export function indexedFields(value: JsonObject): { fields: JsonObject; partial: boolean } {
  const fields: JsonObject = {};
  let partial = false;
  let bytes = 2;
  for (const [field, item] of Object.entries(value)) {
    const scalar = item === null || typeof item === 'boolean' || isNumeric(item) || typeof item === 'string';
    const size = scalar ? Buffer.byteLength(stringifyJson(field), 'utf8') + Buffer.byteLength(textOf(item), 'utf8') + 2 : 0;
    const fits =
      scalar &&
      (typeof item !== 'string' || Buffer.byteLength(item, 'utf8') <= INDEXED_STRING_BYTES) &&
      bytes + size <= INDEXED_FIELDS_BYTES;
    if (!fits) {
      partial = true;
      continue;
    }
    setOwn(fields, field, item as Json);
    bytes += size;
  }
  return { fields, partial };
}

function textOf(item: Json): string {
  return stringifyJson(item);
}
