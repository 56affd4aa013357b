import { PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { decodeStoredJson, encodeStoredJson, type Json } from '../../core/json/json.js';
import type { NoteRecord, NotesRead, NotesWindow, SessionScope } from '../../core/model/model.js';
import * as keys from '../table/keys.js';
import type { Item, TableClient } from '../table/table-client.js';

/**
 * Notes kept beside a session's nodes (docs/api.md, "a note beside a node"): one item each, in the
 * session's partition, outside its log.
 *
 *   W#<node>#<life>#<key>   the note's value, as JSON text (`note`)
 *
 * A note is a blind put: it claims no place in the log and reads nothing it rewrites, so notes
 * written at once never wait for each other nor for the log's writers (appends, state writes).
 * Being in the partition, they go with the session: a delete, an expiry and an erasure erase
 * every item of the partition that is not a change of the log (session-delete.ts). The life in
 * the key keeps a note put by a writer that read the session before a delete (and put after
 * the erase read the partition) apart from the session made after it: readers ask for the
 * tip's life only, as they do for the node index (node-index.ts).
 */

const NOTE_ATTRIBUTE = 'note';

export async function putNote(
  table: TableClient,
  scope: SessionScope,
  note: { incarnation: number; nodeId: string; key: string; value: Json },
): Promise<void> {
  await table.send(
    new PutCommand({
      TableName: table.tableName,
      Item: {
        pk: keys.session(scope),
        sk: keys.note(note.nodeId, note.incarnation, note.key),
        // Numbers verbatim, as every stored value (core/json/json.ts).
        [NOTE_ATTRIBUTE]: encodeStoredJson(note.value),
      },
    }),
  );
}

/**
 * The notes of one node (`nodeId`) or of every node of the session, in every life, in key order
 * from after `window.after` on: a range read, page by page, that stops once it holds more than
 * `window.bytes` (`cut` when more was left). The caller keeps the tip's life (note-pages.ts), so
 * the read needs no tip first.
 */
export async function readNotes(
  table: TableClient,
  scope: SessionScope,
  nodeId: string | undefined,
  window: NotesWindow,
): Promise<NotesRead> {
  const prefix = nodeId === undefined ? keys.notePrefix : keys.noteKeys(nodeId);
  const after = window.after === undefined ? undefined : keys.note(window.after.nodeId, window.after.incarnation, window.after.key);
  const records: NoteRecord[] = [];
  let bytes = 0;
  let start: Item | undefined = after?.startsWith(prefix) ? { pk: keys.session(scope), sk: after } : undefined;
  do {
    const { Items = [], LastEvaluatedKey } = await table.send(
      new QueryCommand({
        TableName: table.tableName,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
        ExpressionAttributeValues: { ':pk': keys.session(scope), ':prefix': prefix },
        ExclusiveStartKey: start,
        ConsistentRead: true,
      }),
    );
    for (const item of Items) {
      const note = noteOf(item);
      if (!note || (after !== undefined && String(item.sk) <= after)) continue;
      records.push(note);
      bytes += note.bytes;
    }
    start = LastEvaluatedKey;
  } while (start && bytes <= window.bytes);
  return { records, cut: start !== undefined };
}

/** The note an item holds (its key `W#<node>#<life>#<key>`: ids hold no `#`). */
function noteOf(item: Item): NoteRecord | undefined {
  const [, node, life, key] = String(item.sk).split('#');
  if (node === undefined || life === undefined || key === undefined) return undefined;
  const text = String(item[NOTE_ATTRIBUTE]);
  return { nodeId: node, incarnation: Number(life), key, value: decodeStoredJson(text), bytes: Buffer.byteLength(text, 'utf8') };
}

/** How many nodes' notes are read at once, each one range read, when one range read does not cover them. */
const NOTES_READ_AT_ONCE = 25;

/**
 * The notes of the named nodes (`nodeIds`), in every life, in key order from after
 * `window.after` on, bounded by the nodes named whatever the session holds. First one page (up to
 * 1 MB) of the range from the first named node's notes to the last's: the checkpoints a page of
 * LangGraph's `list` names are neighbours in the key order (uuid6 ids sort by time), so this one
 * read usually holds all of them, and what it holds of other nodes in between is dropped. Named
 * nodes the page did not reach (and the one it stopped in) are read each by itself, so a range
 * that holds much else is not read past a page; those reads stop, as `readNotes` does, once what
 * was read passes `window.bytes`.
 */
export async function readNotesOf(
  table: TableClient,
  scope: SessionScope,
  nodeIds: readonly string[],
  window: NotesWindow,
): Promise<NotesRead> {
  const from = window.after === undefined ? undefined : keys.noteKeys(window.after.nodeId);
  const after = window.after === undefined ? undefined : keys.note(window.after.nodeId, window.after.incarnation, window.after.key);
  const prefixes = [...new Set(nodeIds)]
    .map((nodeId) => keys.noteKeys(nodeId))
    .filter((prefix) => from === undefined || prefix >= from)
    .sort();
  const first = prefixes[0];
  const last = prefixes.at(-1);
  if (first === undefined || last === undefined) return { records: [], cut: false };
  const named = new Set(prefixes);
  const { Items = [], LastEvaluatedKey } = await table.send(
    new QueryCommand({
      TableName: table.tableName,
      KeyConditionExpression: 'pk = :pk AND sk BETWEEN :low AND :high',
      // Ids hold no `#` and nothing above `~`: every note of the last node sorts below its prefix and `\x7f`.
      ExpressionAttributeValues: { ':pk': keys.session(scope), ':low': first, ':high': `${last}\x7f` },
      ...(after?.startsWith(first) ? { ExclusiveStartKey: { pk: keys.session(scope), sk: after } } : {}),
      ConsistentRead: true,
    }),
  );
  // The node the page stopped in (`W#<node>#` of its last key), and the named ones after it, are read each by itself.
  const stoppedIn = LastEvaluatedKey === undefined ? undefined : keys.noteKeys(String(LastEvaluatedKey.sk).split('#')[1] ?? '');
  const rest = stoppedIn === undefined ? [] : prefixes.filter((prefix) => prefix >= stoppedIn);
  const records: NoteRecord[] = [];
  let bytes = 0;
  for (const item of Items) {
    const note = noteOf(item);
    if (!note || !named.has(keys.noteKeys(note.nodeId)) || (stoppedIn !== undefined && keys.noteKeys(note.nodeId) >= stoppedIn)) continue;
    if (after !== undefined && String(item.sk) <= after) continue;
    records.push(note);
    bytes += note.bytes;
  }
  for (let start = 0; start < rest.length; start += NOTES_READ_AT_ONCE) {
    if (bytes > window.bytes) return { records, cut: true };
    const reads = rest
      .slice(start, start + NOTES_READ_AT_ONCE)
      .map((prefix) => readNotes(table, scope, prefix.slice(2, -1), { ...window, bytes: window.bytes - bytes }));
    for (const read of await Promise.all(reads)) {
      // A read that stopped early ends what this one returns: the notes after it are its own.
      records.push(...read.records);
      bytes += read.records.reduce((sum, note) => sum + note.bytes, 0);
      if (read.cut) return { records, cut: true };
    }
  }
  return { records, cut: false };
}
