import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { Json } from '../../core/json/json.js';
import type { DecisionSummary, Page, SessionScope, VersionRecord } from '../../core/model/model.js';
import { decisionSummaryOf } from '../log/log-items.js';
import { DynamoDbSessionLog } from '../log/session-log.js';
import { piecesOf } from '../state/state-pieces.js';
import * as versionItem from '../state/version-item.js';
import { KIND_ATTRIBUTE, LOG_ITEM_KIND } from '../table/item-kinds.js';
import * as keys from '../table/keys.js';
import { logPositionOf } from '../table/keys.js';
import { decodeCursor, invalidCursor, pageOf } from '../table/paging.js';
import type { Item } from '../table/table-client.js';

/**
 * The session log (session-log.ts) and what is read of a session's history page by page or
 * version by version: the version and decision lists, what a copy counts of the states it would
 * put, and the change hook's previous state. session-store.ts builds the rest on it.
 */
export class DynamoDbSessionHistory extends DynamoDbSessionLog {
  /**
   * Versions newest first: the log read backwards, its other changes left out. The first item
   * is the tip, so the list is of the session's current life; it ends where an older life's
   * changes begin. A page reads up to twice its limit of changes and ends at its last version.
   */
  async listVersions(scope: SessionScope, options: { limit: number; cursor?: string; bytes: number }): Promise<Page<VersionRecord>> {
    // A cursor is sealed for this session's version list (store/table/paging.ts).
    const list = JSON.stringify([this.table.tableName, keys.session(scope), 'versions']);
    const start = options.cursor === undefined ? undefined : decodeCursor(options.cursor, ['pk', 'sk'], list);
    if (start && (start.pk !== keys.session(scope) || !logPositionOf(String(start.sk)))) throw invalidCursor();
    const [{ Items, LastEvaluatedKey }, tip] = await Promise.all([
      this.table.send(
        new QueryCommand({
          TableName: this.table.tableName,
          KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
          ExpressionAttributeValues: { ':pk': keys.session(scope), ':prefix': keys.logPrefix },
          ScanIndexForward: false,
          Limit: Math.min(1000, options.limit * 2 + 8),
          ExclusiveStartKey: start,
          ConsistentRead: true,
        }),
      ),
      // A later page does not read the tip with its items: read beside them, it says whether the
      // session expired or was deleted since the first page (API.md section 12).
      start ? this.readTip(scope, { withState: false }) : undefined,
    ]);
    const items = Items ?? [];
    // An expired session lists nothing: it reads as unknown.
    if (!start && this.closedAtTop(scope, items[0])) return pageOf([], undefined, list);
    const life = logPositionOf(String(start?.sk ?? items[0]?.sk ?? ''))?.incarnation;
    if (tip && (tip.kind === 'closing' || tip.incarnation !== life)) throw invalidCursor();
    const versions: Item[] = [];
    let ended = false;
    // Where history was cut (API.md section 5): a version of a life is missing only by
    // retention, so a gap in the numbers, or a pruned item, is a cut. A later page starts
    // below the version its cursor names.
    let above = start ? (logPositionOf(String(start.sk))?.base ?? 0) + 1 : undefined;
    let prunedBefore: number | undefined;
    let peeked = false;
    // A page ends by bytes too (what one answer may carry, docs/api.md): before the version that
    // would pass them, so its pieces are not read; the first one always fits one answer.
    let bytes = 0;
    let filled = false;
    for (const item of items) {
      if (logPositionOf(String(item.sk))?.incarnation !== life) {
        ended = true;
        break;
      }
      if (item[KIND_ATTRIBUTE] !== LOG_ITEM_KIND.version) continue;
      const version = Number(item.version);
      if (above !== undefined && prunedBefore === undefined && (version < above - 1 || versionItem.isPruned(item))) prunedBefore = above;
      if (versionItem.isPruned(item)) continue;
      // One version past a full page only tells whether the cut is right below it.
      if (versions.length === options.limit) {
        peeked = true;
        break;
      }
      const size = versionItem.listedBytes(item);
      if (versions.length > 0 && bytes + size > options.bytes) {
        filled = true;
        break;
      }
      versions.push(item);
      bytes += size;
      above = version;
    }
    const lastRead = versions.at(-1);
    const full = filled || (versions.length === options.limit && (peeked || items.at(-1) !== lastRead || LastEvaluatedKey !== undefined));
    // The page reached the first version there is: a list that ends above 1 was cut there.
    if (!full && (ended || LastEvaluatedKey === undefined) && prunedBefore === undefined && above !== undefined && above > 1)
      prunedBefore = above;
    const pieces = await piecesOf(this.table, scope, versions);
    const records = await Promise.all(versions.map((item) => this.versionRecord(scope, item, pieces)));
    const next = ended ? undefined : full && lastRead ? { pk: lastRead.pk, sk: lastRead.sk } : LastEvaluatedKey;
    return {
      ...pageOf(records, next, list),
      ...(prunedBefore === undefined ? {} : { prunedBefore }),
      ...(life === undefined ? {} : { incarnation: life }),
    };
  }

  /**
   * Decisions newest first, from the log read backwards (the change that completed a decision
   * holds its record), as `listVersions` reads versions: the current life only, a page of up to
   * three Queries, each only the attributes a summary needs. A decision costs no write of its own
   * to be listed; a page may be short where many other changes lie between decisions.
   */
  async listDecisions(scope: SessionScope, options: { limit: number; cursor?: string }): Promise<Page<DecisionSummary>> {
    const list = JSON.stringify([this.table.tableName, keys.session(scope), 'decisions']);
    let start = options.cursor === undefined ? undefined : decodeCursor(options.cursor, ['pk', 'sk'], list);
    if (start && (start.pk !== keys.session(scope) || !logPositionOf(String(start.sk)))) throw invalidCursor();
    let life = start ? logPositionOf(String(start.sk))?.incarnation : undefined;
    if (start) {
      // As for versions: a later page reads the tip, for a session that expired or was deleted since.
      const tip = await this.readTip(scope, { withState: false });
      if (tip.kind === 'closing' || tip.incarnation !== life) throw invalidCursor();
    }
    const found: DecisionSummary[] = [];
    for (let round = 0; round < 3; round++) {
      const { Items, LastEvaluatedKey } = await this.table.send(
        new QueryCommand({
          TableName: this.table.tableName,
          KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
          ExpressionAttributeValues: { ':pk': keys.session(scope), ':prefix': keys.logPrefix },
          // `t` (what a change carries): whether the session has expired (the first item), and
          // with `version`, `decisionId`, `agent` and `node` what a version's decision leaves out
          // because the version holds it (log-items.ts, compactDecision).
          ProjectionExpression: 'pk, sk, createdAt, decision, t, #version, decisionId, #agent, #node',
          ExpressionAttributeNames: { '#version': 'version', '#agent': 'agent', '#node': 'node' },
          ScanIndexForward: false,
          Limit: Math.min(1000, options.limit * 4 + 8),
          ExclusiveStartKey: start,
          ConsistentRead: true,
        }),
      );
      const items = Items ?? [];
      if (round === 0 && !start && this.closedAtTop(scope, items[0])) return pageOf([], undefined, list);
      // Of this life only: the log of an older life ends the list (a deleted session's changes are tombstones).
      const inLife = (item: Item) => {
        life ??= logPositionOf(String(item.sk))?.incarnation;
        return logPositionOf(String(item.sk))?.incarnation === life;
      };
      for (const [index, item] of items.entries()) {
        if (!inLife(item)) return pageOf(found, undefined, list);
        const summary = decisionSummaryOf(item);
        if (summary) found.push(summary);
        if (found.length < options.limit) continue;
        // A full page: another follows if what is left of this read holds a decision, or more is unread.
        const rest = items.slice(index + 1);
        const more = rest.some((next) => inLife(next) && decisionSummaryOf(next) !== null);
        const ended = rest.some((next) => !inLife(next));
        const next = more ? { pk: item.pk, sk: item.sk } : ended ? undefined : LastEvaluatedKey;
        return pageOf(found, next, list);
      }
      if (!LastEvaluatedKey) return pageOf(found, undefined, list);
      start = LastEvaluatedKey;
    }
    return pageOf(found, start, list);
  }

  /**
   * What the source's versions `versions` say of their states without reading them (their
   * text's bytes, their pieces), for a copy's count of what it would put (session-copy.ts): one
   * Query a version, 8 at a time; a version gone or pruned is left out (the copy finds that
   * when it reads it).
   */
  async storedStates(scope: SessionScope, versions: readonly number[]): Promise<Map<number, { bytes: number; pieces: string[] }>> {
    const found = new Map<number, { bytes: number; pieces: string[] }>();
    const tip = await this.readTip(scope, { withState: false });
    if (tip.kind === 'closing') return found;
    const waiting = [...new Set(versions)].filter((version) => version > 0);
    const reader = async () => {
      for (let version = waiting.shift(); version !== undefined; version = waiting.shift()) {
        const item = await this.versionItemIn(scope, tip.incarnation, version, false);
        if (item && !versionItem.isPruned(item)) found.set(version, versionItem.storedState(item));
      }
    };
    await Promise.all(Array.from({ length: Math.min(8, waiting.length) }, reader));
    return found;
  }

  /**
   * The state of one version alone, for the change hook's `prev`: one strongly consistent read
   * (the previous version may have been written milliseconds before).
   */
  async getVersionState(scope: SessionScope, version: number, incarnation = 0): Promise<{ state: Json } | null> {
    // The change hooks read the version before the one an event is about: written before it,
    // and never changed but by retention's strip. An eventually consistent read (half the read
    // units) finds it, or, in the moment after its write, finds nothing and reads again strongly.
    const item = (await this.versionItemIn(scope, incarnation, version, false)) ?? (await this.versionItemIn(scope, incarnation, version));
    // Pruned by retention: the event goes without `prev` (history-prune.ts keeps it while the hook may still need it).
    if (!item || versionItem.isPruned(item)) return null;
    return { state: versionItem.decodeState(item, await piecesOf(this.table, scope, [item])) };
  }
}
