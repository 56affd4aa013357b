import { QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { ROOT_NODE } from '../../core/kernel/ids.js';
import type { DoneDecision, NodeRecord, SessionScope, Tip } from '../../core/model/model.js';
import { rootNode } from '../../core/model/tree.js';
import { messagePreview } from '../../core/sessions/preview.js';
import * as decisionItem from '../sessions/decision-item.js';
import { DECISION_TTL_SECONDS } from '../sessions/decision-store.js';
import * as keys from '../table/keys.js';
import { batchGet, conditionally, type Item, type TableClient } from '../table/table-client.js';
import { entryOf, jsonText, type LogEntry, type NodePlace, nodesOf, parseJsonText } from './log-items.js';

/**
 * The index of a session's message nodes: how a node is found by its id, in one read.
 *
 *   N#<node>#<life>     where the node's message is (`at`: its change and position), parent,
 *                       depth, role, createdAt, the version it pointed at when indexed, a preview
 *   N#<node>#<life>#p   the version it points at since it moved (a write at it off the head, or
 *                       the head's writes when the head left it); only ever moves forward
 *
 * A node's message lives in the change that made it (log-items.ts). Its index is written when
 * the log moves past that change: the next writer after it puts the index of its nodes before
 * claiming its own place (`departure`). That writer puts them with one batch of unconditional
 * puts, because what it puts follows from that change alone: any writer that read it puts the
 * same items, and a writer that lost its race and puts them again changes nothing. The only
 * thing about a node that changes is the version it points at, and that goes in an item of its
 * own under a condition that it only grows. Until the log moves past a change, its nodes are
 * found in the tip (`Tip.recentNodes`), which every reader reads anyway.
 *
 * The life in the key keeps a node of a session that was deleted apart from the node of the
 * same id in the session made after it: a writer that read the old session before the delete
 * and puts the index afterwards puts it under the old life, where nothing reads it (and takes
 * it back once it knows that life closed: unclaimed-writes.ts).
 */

/** The index item of one node of a change, as the change says it. */
function nodeIndexItem(scope: SessionScope, incarnation: number, node: NodeRecord): Item {
  return {
    pk: keys.session(scope),
    sk: keys.nodeIndex(node.id, incarnation),
    parentId: node.parentId,
    depth: node.depth,
    role: node.role,
    createdAt: node.createdAt,
    stateVersion: node.stateVersion,
    preview: messagePreview(node.message),
    at: jsonText(node.place),
  };
}

/** A node from its index item and the pointer that moved since (either may be absent for the root). */
function nodeFromIndex(id: string, index: Item | undefined, pointer: Item | undefined): NodeRecord | null {
  if (!index && id !== ROOT_NODE) return null;
  const base = index
    ? {
        id,
        parentId: typeof index.parentId === 'string' ? index.parentId : null,
        depth: Number(index.depth),
        role: typeof index.role === 'string' ? index.role : null,
        message: null,
        stateVersion: Number(index.stateVersion ?? 0),
        createdAt: String(index.createdAt ?? ''),
        preview: typeof index.preview === 'string' ? index.preview : null,
        place: parseJsonText<NodePlace>(index.at),
      }
    : rootNode('');
  if (!pointer && !index) return null;
  return pointer ? { ...base, stateVersion: Math.max(base.stateVersion, Number(pointer.stateVersion ?? 0)) } : base;
}

/**
 * The writes a change after `tip` owes the change it moves past, before claiming its place:
 * the index of that change's nodes, the record of a decision it completed (for replays), and
 * the pointers that change moved and only it held — a write off the head (its version's node)
 * and, when this change moves the head away, the head's pointer if writes at the head moved it.
 */
export function departure(
  scope: SessionScope,
  tip: Tip,
  headMoves: boolean,
): { puts: Item[]; pointers: Array<{ nodeId: string; version: number }> } {
  const entry = entryOf(tip);
  if (!entry) return { puts: [], pointers: [] };
  const incarnation = entry.position.incarnation;
  const puts: Item[] = nodesOf(entry).map((node) =>
    // The head's index says the version the head points at as this change leaves it.
    nodeIndexItem(scope, incarnation, node.id === tip.head ? { ...node, stateVersion: tip.headVersion } : node),
  );
  if (entry.decision?.keep && tip.recentDecision) puts.push(decisionIndexItem(scope, entry, tip.recentDecision));
  const pointers: Array<{ nodeId: string; version: number }> = [];
  if (entry.versionNode !== null && entry.versionNode !== tip.head) {
    pointers.push({ nodeId: entry.versionNode, version: Number(entry.item.version) });
  }
  if (headMoves && entry.carried.hx !== -1 && entry.carried.hx !== tip.headVersion) {
    pointers.push({ nodeId: tip.head, version: tip.headVersion });
  }
  return { puts, pointers };
}

/** The decision record of a change that completed a decision its caller named (kept a week from then). */
function decisionIndexItem(scope: SessionScope, entry: LogEntry, record: DoneDecision): Item {
  const expiresAt = Math.floor(Date.parse(entry.createdAt) / 1000) + DECISION_TTL_SECONDS;
  return decisionItem.encode(scope, record, entry.position.incarnation, expiresAt);
}

/** Moves a node's pointer forward to `version` (never back: a slower writer with an older one changes nothing). */
export function movePointer(
  table: TableClient,
  scope: SessionScope,
  incarnation: number,
  nodeId: string,
  version: number,
): Promise<boolean> {
  return conditionally(
    table.send(
      new UpdateCommand({
        TableName: table.tableName,
        Key: { pk: keys.session(scope), sk: keys.nodePointer(nodeId, incarnation) },
        UpdateExpression: 'SET stateVersion = :version',
        ConditionExpression: 'attribute_not_exists(stateVersion) OR stateVersion < :version',
        ExpressionAttributeValues: { ':version': version },
      }),
    ),
  );
}

/**
 * One node by id, in whichever life is newest: its index and its pointer are the last two keys
 * under `N#<node>#`, one Query. The caller compares `incarnation` with the tip's.
 */
export async function readNode(
  table: TableClient,
  scope: SessionScope,
  nodeId: string,
): Promise<{ node: NodeRecord; incarnation: number } | null> {
  const { Items } = await table.send(
    new QueryCommand({
      TableName: table.tableName,
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
      ExpressionAttributeValues: { ':pk': keys.session(scope), ':prefix': keys.nodeKeys(nodeId) },
      ScanIndexForward: false,
      Limit: 2,
      ConsistentRead: true,
    }),
  );
  const [first, second] = Items ?? [];
  if (!first) return null;
  const incarnation = lifeOf(first);
  const isPointer = String(first.sk).endsWith('#p');
  const index = isPointer ? (second && lifeOf(second) === incarnation && !String(second.sk).endsWith('#p') ? second : undefined) : first;
  const node = nodeFromIndex(nodeId, index, isPointer ? first : undefined);
  return node ? { node, incarnation } : null;
}

/** Several nodes of one life by id: their index and pointer items in one batch. */
export async function readNodes(
  table: TableClient,
  scope: SessionScope,
  nodeIds: readonly string[],
  incarnation: number,
): Promise<Map<string, NodeRecord>> {
  const ids = [...new Set(nodeIds)];
  const items = await batchGet(
    table,
    ids.flatMap((id) => [
      { pk: keys.session(scope), sk: keys.nodeIndex(id, incarnation) },
      { pk: keys.session(scope), sk: keys.nodePointer(id, incarnation) },
    ]),
  );
  const bySortKey = new Map(items.map((item) => [String(item.sk), item]));
  const found = new Map<string, NodeRecord>();
  for (const id of ids) {
    const node = nodeFromIndex(id, bySortKey.get(keys.nodeIndex(id, incarnation)), bySortKey.get(keys.nodePointer(id, incarnation)));
    if (node) found.set(id, node);
  }
  return found;
}

/** Every indexed node of one life, from the items of a whole `N#` range. */
export function nodesOfLife(items: readonly Item[], incarnation: number): NodeRecord[] {
  const index = new Map<string, Item>();
  const pointers = new Map<string, Item>();
  for (const item of items) {
    const match = /^N#(.+)#(\d+)(#p)?$/.exec(String(item.sk));
    if (!match || Number(match[2]) !== incarnation) continue;
    (match[3] ? pointers : index).set(match[1] as string, item);
  }
  const nodes: NodeRecord[] = [];
  for (const id of new Set([...index.keys(), ...pointers.keys()])) {
    const node = nodeFromIndex(id, index.get(id), pointers.get(id));
    if (node) nodes.push(node);
  }
  return nodes;
}

function lifeOf(item: Item): number {
  const match = /#(\d+)(?:#p)?$/.exec(String(item.sk));
  return match ? Number(match[1]) : -1;
}

/** Index items one page of `readNodesBefore` asks for per node it still needs (its index, its pointer, an older life's). */
const ITEMS_PER_NODE = 3;

/**
 * The indexed nodes of life `incarnation` whose ids sort before `before` (all when undefined),
 * by id from the last: at most `count`, and whether the range was read to its end (else more
 * keys follow the last one returned). One `Query`
 * of the `N#` range backwards, a page at a time, read consistently (after the tip, as the tree
 * is): it reads the keys of the nodes it returns and of one more, not the session's whole index.
 * A node's keys lie together (`N#<node>#<life>[#p]`: `#` sorts before every id character), so a
 * node is whole once a key of another one follows it.
 */
export async function readNodesBefore(
  table: TableClient,
  scope: SessionScope,
  range: { before?: string; count: number; incarnation: number },
): Promise<{ nodes: NodeRecord[]; complete: boolean }> {
  const nodes: NodeRecord[] = [];
  let group: { id: string; index?: Item; pointer?: Item } | undefined;
  const close = () => {
    const node = group && group.id !== ROOT_NODE ? nodeFromIndex(group.id, group.index, group.pointer) : null;
    if (node) nodes.push(node);
  };
  let start: Record<string, unknown> | undefined;
  do {
    const { Items, LastEvaluatedKey } = await table.send(
      new QueryCommand({
        TableName: table.tableName,
        // Every `N#` key of a node whose id sorts before `before`: `N#<before>` itself is no key.
        KeyConditionExpression: 'pk = :pk AND sk BETWEEN :from AND :to',
        ExpressionAttributeValues: {
          ':pk': keys.session(scope),
          ':from': keys.nodePrefix,
          ':to': range.before === undefined ? keys.nodeRangeEnd : keys.nodePrefix + range.before,
        },
        ScanIndexForward: false,
        Limit: ITEMS_PER_NODE * (range.count - nodes.length + 1),
        ConsistentRead: true,
        ExclusiveStartKey: start,
      }),
    );
    for (const item of Items ?? []) {
      const match = /^N#(.+)#(\d+)(#p)?$/.exec(String(item.sk));
      if (!match) continue;
      const id = match[1] as string;
      if (group?.id !== id) {
        close();
        if (nodes.length >= range.count) return { nodes, complete: false };
        group = { id };
      }
      if (Number(match[2]) !== range.incarnation) continue;
      if (match[3]) group.pointer = item;
      else group.index = item;
    }
    start = LastEvaluatedKey;
  } while (start);
  close();
  return { nodes, complete: true };
}
