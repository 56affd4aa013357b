import { decodeStoredJson, encodeStoredJson } from '../../core/json/json.js';
import type { DecisionOutcome, DecisionRecord, DoneDecision, SessionScope } from '../../core/model/model.js';
import * as keys from '../table/keys.js';
import { tableKeys } from '../table/table.js';
import type { Item } from '../table/table-client.js';

// Decisions: D#<decision>#<life>. Imported as a namespace (item-codecs.ts): `decisionItem.decode`.

export const key = (scope: SessionScope, decisionId: string, incarnation: number): Item => ({
  pk: keys.session(scope),
  sk: keys.decision(decisionId, incarnation),
});

export const encode = (scope: SessionScope, record: DoneDecision, incarnation: number, expiresAt: number): Item => ({
  ...key(scope, record.decisionId, incarnation),
  status: record.status,
  attempts: record.attempts,
  outcome: encodeStoredJson(record.outcome),
  [tableKeys.timeToLive]: expiresAt,
});

export function decode(decisionId: string, item: Item): DecisionRecord {
  const attempts = Number(item.attempts ?? 0);
  if (item.status === 'done' && typeof item.outcome === 'string') {
    return { decisionId, status: 'done', attempts, outcome: decodeStoredJson(item.outcome) as unknown as DecisionOutcome };
  }
  return { decisionId, status: 'failed', attempts };
}
