import { AgentStateError } from '../kernel/errors.js';
import { openCursor, sealCursor } from '../kernel/sealing.js';
import type { NodeNotes, NotePosition, NotesRead, SessionScope } from '../model/model.js';

/**
 * Notes in parts (docs/api.md, "notes in parts"): a node may hold any number of notes (a fan-out
 * of a hundred tasks writing 100 KB each is 10 MB on one node), and an answer travels inside
 * Lambda's 6 MB payload. A read that carries notes (`state?notes=1`, `tree?notes=1`,
 * `versions?notesOf=`) carries those that fit what is left of the answer's bytes, in their order
 * (node, then key), and `notesNext` when some are left: a cursor for `GET …/notes` with the same
 * nodes, whose pages hold at least one note each and end by bytes too.
 */

/** The notes a read carries (by node, then key), and where the rest starts when some are left. */
export interface NotesPart {
  notes: Record<string, NodeNotes>;
  /** Set when notes are left: the last note carried (or read), and the life they are of. */
  rest?: { life: number; after: NotePosition | null };
}

/** What a note adds to an answer besides its value's text: its key and node, quoted. */
const NOTE_FRAME_BYTES = 16;

/**
 * The notes of life `life` in `read` that fit `bytes` (their JSON text), in order; with
 * `atLeastOne`, the first one whatever its size (a note is at most 256 KiB: it always fits).
 */
export function notesWithin(read: NotesRead, life: number, bytes: number, atLeastOne: boolean): NotesPart {
  const notes: Record<string, NodeNotes> = {};
  let used = 0;
  let taken = 0;
  let after: NotePosition | null = null;
  for (const record of read.records) {
    if (record.incarnation !== life) continue;
    const size = record.bytes + record.key.length + record.nodeId.length + NOTE_FRAME_BYTES;
    if (used + size > bytes && !(atLeastOne && taken === 0)) return { notes, rest: { life, after } };
    const byNode = notes[record.nodeId] ?? {};
    // Defined, not assigned: a note (or node) named `__proto__` is data, not the object's prototype.
    Object.defineProperty(byNode, record.key, { value: record.value, enumerable: true, writable: true, configurable: true });
    Object.defineProperty(notes, record.nodeId, { value: byNode, enumerable: true, writable: true, configurable: true });
    used += size;
    taken++;
    after = record;
  }
  if (!read.cut) return { notes };
  // Every note of the life that was read fits, but the read stopped: the rest starts after the last one it read.
  const last = read.records.at(-1);
  return { notes, rest: { life, after: last ? { nodeId: last.nodeId, incarnation: last.incarnation, key: last.key } : after } };
}

/** The nodes whose notes a cursor goes on with: some, by id, or every node of the session (`undefined`). */
function notesList(scope: SessionScope, nodeIds: readonly string[] | undefined): string {
  const nodes = nodeIds === undefined ? '*' : [...new Set(nodeIds)].sort().join(',');
  return JSON.stringify(['notes', scope.tenant, scope.sessionId, nodes]);
}

/** A cursor for `GET …/notes` of those nodes, sealed for them (a cursor reveals nothing and opens for its list only). */
export function sealNotesCursor(rest: NonNullable<NotesPart['rest']>, scope: SessionScope, nodeIds: readonly string[] | undefined): string {
  const { life, after } = rest;
  return sealCursor(after === null ? [life] : [life, after.nodeId, after.incarnation, after.key], notesList(scope, nodeIds));
}

/** Where a notes cursor goes on from; `400 invalid_request` for a cursor of other nodes, or anything else. */
export function openNotesCursor(
  cursor: string,
  scope: SessionScope,
  nodeIds: readonly string[] | undefined,
): { life: number; after: NotePosition | null } {
  const position = openCursor(cursor, notesList(scope, nodeIds));
  if (Array.isArray(position) && Number.isSafeInteger(position[0])) {
    const [life, nodeId, incarnation, key] = position as unknown[];
    if (position.length === 1) return { life: life as number, after: null };
    if (typeof nodeId === 'string' && Number.isSafeInteger(incarnation) && typeof key === 'string') {
      return { life: life as number, after: { nodeId, incarnation: incarnation as number, key } };
    }
  }
  throw new AgentStateError('invalid_request', 'cursor is not valid for this list', { field: 'cursor' });
}
