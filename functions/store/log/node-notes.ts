import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { decodeStoredJson, encodeStoredJson, type Json } from '../../core/json/json.js';
import type { NoteRecord, SessionScope } from '../../core/model/model.js';
import * as keys from '../table/keys.js';
import { forEachInRange } from '../table/paging.js';
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
 * The notes of one node (`nodeId`) or of every node of the session, in every life: a range read
 * whole. The caller keeps the tip's life (`notesOfLife`), so the read needs no tip first.
 */
export async function readNotes(table: TableClient, scope: SessionScope, nodeId?: string): Promise<NoteRecord[]> {
  const notes: NoteRecord[] = [];
  const prefix = nodeId === undefined ? keys.notePrefix : keys.noteKeys(nodeId);
  await forEachInRange(table, { partition: keys.session(scope), prefix }, (item: Item) => {
    // `W#<node>#<life>#<key>`: ids hold no `#`.
    const [, node, life, key] = String(item.sk).split('#');
    if (node === undefined || life === undefined || key === undefined) return;
    notes.push({ nodeId: node, incarnation: Number(life), key, value: decodeStoredJson(String(item[NOTE_ATTRIBUTE])) });
  });
  return notes;
}
