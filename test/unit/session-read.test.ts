import { describe, expect, it } from 'vitest';
import * as sessionItem from '../../functions/store/sessions/session-item.js';
import { readManySessionItems, readSessionItems } from '../../functions/store/sessions/session-read.js';
import type { Item, TableClient } from '../../functions/store/table/table-client.js';

/**
 * A session read whole (session-read.ts): its item and its metadata item come from one Query or
 * BatchGet, which DynamoDB does not isolate from a transaction across items, so a read may see
 * the session item of one `PATCH` and the metadata item of another. DynamoDB Local never shows
 * that, so a table that answers it is faked here: the reader must read again, never answer
 * with metadata the session item does not name.
 */
const scope = { tenant: 't', sessionId: 's' };
const at = '2026-01-01T00:00:00.000Z';
const meta = (metadata: Record<string, string>) => ({
  sessionId: 's',
  agentId: null,
  userId: null,
  metadata,
  createdAt: at,
  updatedAt: at,
});
const before = {
  item: sessionItem.encode(scope, meta({ v: 'old' }), 'stamp-1'),
  metadata: sessionItem.encodeMetadata(scope, { v: 'old' }, 'stamp-1'),
};
const after = {
  item: sessionItem.encode(scope, meta({ v: 'new' }), 'stamp-2'),
  metadata: sessionItem.encodeMetadata(scope, { v: 'new' }, 'stamp-2'),
};

/** A table whose reads answer `answers` in turn (each the items found), and that counts them. */
function tableAnswering(answers: Item[][]): TableClient & { reads: string[] } {
  const reads: string[] = [];
  return {
    tableName: 'table',
    reads,
    send: async (command: { constructor: { name: string } }) => {
      reads.push(command.constructor.name);
      const items = answers[Math.min(reads.length - 1, answers.length - 1)] ?? [];
      return command.constructor.name === 'BatchGetCommand' ? { Responses: { table: items } } : { Items: items };
    },
  } as unknown as TableClient & { reads: string[] };
}

describe('a session read whole', () => {
  it('reads again when the session item and its metadata item are of different writes, and answers the consistent pair', async () => {
    // Prepare: the session item of the second PATCH beside the first's metadata, then both of the second.
    const table = tableAnswering([
      [after.item, before.metadata],
      [after.item, after.metadata],
    ]);

    // Act
    const read = await readSessionItems(table, scope);

    // Assess
    expect(table.reads).toEqual(['QueryCommand', 'QueryCommand']);
    expect(sessionItem.decode(read?.item as Item, read?.metadataItem).metadata).toEqual({ v: 'new' });
  });

  it('reads a list page in one round, and again only the session read torn', async () => {
    // Prepare: the page's BatchGet finds the old session item beside the new metadata; its Query both new.
    const other = { tenant: 't', sessionId: 'o' };
    const otherItem = sessionItem.encode(other, { ...meta({}), sessionId: 'o', metadata: null });
    const table = tableAnswering([
      [before.item, after.metadata, otherItem],
      [after.item, after.metadata],
    ]);

    // Act
    const read = await readManySessionItems(table, 't', ['s', 'o']);

    // Assess
    expect(table.reads).toEqual(['BatchGetCommand', 'QueryCommand']);
    expect(sessionItem.decode(read.get('s')?.item as Item, read.get('s')?.metadataItem).metadata).toEqual({ v: 'new' });
    expect(sessionItem.decode(read.get('o')?.item as Item, read.get('o')?.metadataItem).metadata).toBeNull();
  });
});
