import { decodeStoredJson, encodeStoredJson, isJsonObject, type JsonObject } from '../../core/json/json.js';
import type { DecisionOutcome, DoneDecision } from '../../core/model/model.js';
import type { Item } from '../table/table-client.js';
import { unpackText } from './packed-text.js';

// The decision a change of the log completes, as its item keeps it (attribute `decision`).

/** What a change carries that its decision may leave out (log-items.ts, `Carried`): the head and the session's agent. */
interface CarriedHead {
  readonly h: string;
  readonly ag: string | null;
}

/** A decision a change completes (attribute `decision`, JSON text). */
export interface StoredDecision {
  id: string;
  attempts: number;
  outcome: DecisionOutcome;
  /** Whether it is indexed for replays when newer changes follow it (the caller named it). */
  keep: boolean;
}

/**
 * A decision as a version change writes it (`compactDecision`): what the same item already
 * holds, or what a decision that made a version always has, is left out and named in `same`,
 * so a turn's commit is not billed for it twice (with a short reply it fits one write unit):
 * `i` the id (the version's `decisionId`), `v` the version, `h` the head (the carried head),
 * `a` the agent config (the version's `agent`), `g` the deciding agent (the carried session
 * agent), `c` changed (a decision that made a version changed something), `s` the worker's
 * state is the version's, `m` the worker's messages are the change's last nodes (their count is
 * kept in their place: a reply is stored once, as its nodes, not again in the answer);
 * `attempts` 1 and `keep` false are left out too. Written as packed text (brotli when smaller).
 */
type WrittenDecision = Partial<Omit<StoredDecision, 'outcome'>> & {
  outcome: Partial<DecisionOutcome> & Pick<DecisionOutcome, 'decision'>;
  same?: string;
};

/** What `compactDecision` may leave out, each with the letter that says so and where its value is. */
const SAME_AS_ITEM = [
  ['v', 'version'],
  ['h', 'head'],
  ['a', 'agent'],
  ['g', 'agentId'],
  ['c', 'changed'],
  ['s', 'decisionStateInVersion'],
] as const;

type ItemFacts = Pick<DecisionOutcome, 'version' | 'head' | 'agent' | 'agentId' | 'changed' | 'decisionStateInVersion'>;

/** The values a version change's own attributes give the fields `SAME_AS_ITEM` names. */
function itemFacts(item: Item, carried: CarriedHead): ItemFacts {
  return {
    version: Number(item.version),
    head: carried.h,
    agent: typeof item.agent === 'string' ? decodeStoredJson(item.agent) : null,
    agentId: carried.ag,
    changed: true,
    decisionStateInVersion: true,
  };
}

/** A node's message as its author sent it: the id and parent agentstate gave it taken off. */
function withoutId(message: JsonObject): JsonObject {
  const { id: _id, parentId: _parentId, ...sent } = message;
  return sent;
}

/**
 * The count of the worker's messages when they are, as sent (no id or parent of their own),
 * the last nodes the change makes; undefined when they are not.
 */
function repliedNodes(answer: JsonObject, nodes: readonly JsonObject[] | undefined): number | undefined {
  const sent = answer.messages;
  if (!Array.isArray(sent) || sent.length === 0 || !nodes || sent.length > nodes.length) return undefined;
  const made = nodes.slice(nodes.length - sent.length);
  const same = sent.every(
    (message, index) =>
      isJsonObject(message) &&
      message.id === undefined &&
      message.parentId === undefined &&
      typeof made[index]?.id === 'string' &&
      encodeStoredJson(withoutId(made[index] as JsonObject)) === encodeStoredJson(message),
  );
  return same ? sent.length : undefined;
}

/** The stored form of `decision` on a change whose item has `version` attributes and carries `carried`. */
export function compactDecision(
  decision: StoredDecision,
  item: Item,
  carried: CarriedHead,
  nodes: readonly JsonObject[] | undefined,
): WrittenDecision {
  const outcome: WrittenDecision['outcome'] = { ...decision.outcome };
  let same = '';
  const replied = repliedNodes(outcome.decision, nodes);
  if (replied !== undefined) {
    outcome.decision = { ...outcome.decision, messages: replied };
    same += 'm';
  }
  // A change without a version (a decision that changed nothing) holds no facts of its own.
  const facts = item.version === undefined ? null : itemFacts(item, carried);
  for (const [letter, field] of facts ? SAME_AS_ITEM : []) {
    if (field in outcome && encodeStoredJson(outcome[field]) === encodeStoredJson(facts?.[field])) {
      delete outcome[field];
      same += letter;
    }
  }
  const written: WrittenDecision = { outcome };
  if (decision.id === item.decisionId) same += 'i';
  else written.id = decision.id;
  if (decision.attempts !== 1) written.attempts = decision.attempts;
  if (decision.keep) written.keep = true;
  return { ...written, same };
}

/**
 * A change's decision as written, with what `compactDecision` left out taken back from the item
 * (the worker's messages from the change's `nodes`, when they are given).
 */
export function decisionOfItem(item: Item, carried: CarriedHead, nodes?: readonly JsonObject[]): StoredDecision | null {
  const text = unpackText(item.decision);
  const written = text === null ? null : (decodeStoredJson(text) as WrittenDecision | null);
  if (!written) return null;
  if (written.same === undefined) return written as StoredDecision;
  const { same, ...rest } = written;
  const outcome: Partial<DecisionOutcome> = { ...rest.outcome };
  if (item.version !== undefined) {
    const facts = itemFacts(item, carried);
    for (const [letter, field] of SAME_AS_ITEM) {
      if (same.includes(letter)) Object.assign(outcome, { [field]: facts[field] });
    }
  }
  const replied = rest.outcome.decision.messages;
  if (same.includes('m') && nodes && typeof replied === 'number') {
    outcome.decision = { ...rest.outcome.decision, messages: nodes.slice(nodes.length - replied).map(withoutId) };
  }
  return {
    id: same.includes('i') ? String(item.decisionId) : String(rest.id),
    attempts: rest.attempts ?? 1,
    keep: rest.keep ?? false,
    outcome: outcome as DecisionOutcome,
  };
}

/** What a decision completed by a change keeps, for its replay and its index. */
export function storedDecision(record: DoneDecision, keep: boolean): StoredDecision {
  return { id: record.decisionId, attempts: record.attempts, outcome: record.outcome, keep };
}
