import { encodedSize, isJsonObject, type Json, type JsonObject, setOwn } from '../json/json.js';
import { AgentStateError } from '../kernel/errors.js';
import { isValidId, newId, ROOT_NODE } from '../kernel/ids.js';
import { type Caller, checkOverlay, type Schema } from '../model/fields.js';
import { agentConfigExcess } from '../model/limits.js';
import { type NodeRecord, STATE_LIMIT_BYTES } from '../model/model.js';
import { type ChainPlan, type IncomingMessage, planChain } from '../sessions/chain.js';
import { checkedWrite, storedState, type WriteTarget } from '../write/write-target.js';

/**
 * What goes to a decision's worker and what comes back: the state it is shown, and its answer
 * checked before anything of it is written. A bad answer is the worker's fault (`502
 * worker_failed`), never the caller's — unless there is no worker: then the answer is the
 * caller's own `proposed`, and so is the blame (`413 state_too_large`, `400 invalid_request`).
 */

/** Whose answer a decision applies: its worker's, or (no worker) the caller's `proposed`. */
export type AnswerSource = 'worker' | 'caller';

/**
 * A worker's answer is kept to replay it, in one item with room to spare: all of it but its
 * `state`, which may be as large as any state (4 MiB) and is replayed from the version it
 * recorded when it is large (decide-service.ts).
 */
const DECISION_RESPONSE_LIMIT_BYTES = 256 * 1024;

/** A worker's answer, checked: the raw object (kept for replay) and the parts a decision applies. */
export interface ValidDecision {
  /** Whose answer it is: what a fault found later (typed fields, the merged size) is blamed on. */
  source: AnswerSource;
  raw: JsonObject;
  state?: Json;
  agent?: Json;
  messages?: IncomingMessage[];
}

/** The error of a bad answer, blamed on whoever gave it. */
function refusal(
  source: AnswerSource,
  detail: string,
  limit?: { limitBytes: number; sizeBytes: number },
  part: 'state' | 'agent' = 'state',
): AgentStateError {
  if (source === 'worker') {
    return new AgentStateError(
      'worker_failed',
      `the worker's answer is not a valid DecisionResponse: ${detail}`,
      limit ? { ...limit, limit: part } : {},
    );
  }
  if (limit && part === 'state') return new AgentStateError('state_too_large', `proposed.${detail}`, { ...limit, field: 'proposed.state' });
  if (limit) return new AgentStateError('invalid_request', `proposed.${detail}`, { limitBytes: limit.limitBytes, field: 'proposed.agent' });
  return new AgentStateError('invalid_request', `proposed (applied as the decision, there being no worker): ${detail}`, {
    field: 'proposed',
  });
}

/**
 * A DecisionResponse is `{state?, agent?, messages?, ...}`; anything else is the fault of
 * `source`: the worker's (`502`) or, for a decision without a worker, the caller's.
 */
export function validateDecisionResponse(answer: unknown, source: AnswerSource = 'worker'): ValidDecision {
  const workerFailed = (detail: string, limit?: { limitBytes: number; sizeBytes: number }, part?: 'state' | 'agent') =>
    refusal(source, detail, limit, part);
  if (!isJsonObject(answer)) throw workerFailed('it must be a JSON object');
  const raw = answer;
  const { state: _state, ...rest } = raw;
  const bytes = encodedSize(rest);
  if (bytes > DECISION_RESPONSE_LIMIT_BYTES) {
    throw workerFailed(`it is ${bytes} bytes of JSON besides its state; the limit is ${DECISION_RESPONSE_LIMIT_BYTES}`);
  }
  const decision: ValidDecision = { source, raw };
  if ('state' in raw) {
    decision.state = raw.state as Json;
    const stateBytes = encodedSize(decision.state);
    if (stateBytes > STATE_LIMIT_BYTES) {
      throw workerFailed(`state is ${stateBytes} bytes; the limit is ${STATE_LIMIT_BYTES}`, {
        limitBytes: STATE_LIMIT_BYTES,
        sizeBytes: stateBytes,
      });
    }
  }
  if ('agent' in raw) {
    decision.agent = raw.agent as Json;
    // The config rides on every version and on the decision record: the registry's limit.
    const excess = agentConfigExcess(decision.agent);
    if (excess) throw workerFailed(`agent ${excess.detail}`, { limitBytes: excess.limitBytes, sizeBytes: excess.sizeBytes }, 'agent');
  }
  if ('messages' in raw && raw.messages !== null) {
    if (!Array.isArray(raw.messages)) throw workerFailed('messages must be an array');
    decision.messages = raw.messages.map((message, index) => {
      if (!isJsonObject(message) || typeof message.role !== 'string' || message.role.length === 0) {
        throw workerFailed(`messages[${index}] must be an object with a string role`);
      }
      if (message.id !== undefined && (!isValidId(message.id) || message.id === ROOT_NODE)) {
        throw workerFailed(`messages[${index}].id is not a valid node id`);
      }
      return message as IncomingMessage;
    });
  }
  return decision;
}

/**
 * The answer's messages planned under the decision's node. Their ids are the answer's, so an
 * id already taken — by a node of the tree, by one of the trigger's nodes this same commit
 * creates, or twice in the answer — is a fault of the answer, blamed on whoever gave it (`502`,
 * or without a worker the caller's `400`), not an append's `409 node_exists`. The trigger's new
 * nodes are not in the table yet: without them among the known nodes, an answer reusing one's
 * id made a second node of that id, hung under the first (a node that is its own parent).
 */
export function planReply(input: Parameters<typeof planChain>[0], triggerNodes: readonly NodeRecord[], source: AnswerSource): ChainPlan {
  const known = new Map(input.known);
  for (const node of triggerNodes) known.set(node.id, node);
  try {
    return planChain({ ...input, known });
  } catch (error) {
    if (!AgentStateError.match(error, 'node_exists')) throw error;
    throw refusal(source, `messages: ${(error as Error).message}`);
  }
}

/** The state the worker is shown: its view, with the request's `stateOverlay` on top. */
export function withOverlay(schema: Schema | null, agentId: Caller, view: Json, overlay: JsonObject | undefined): Json {
  if (!overlay) return view;
  if (schema) checkOverlay(schema, agentId, overlay);
  const base = isJsonObject(view) ? view : {};
  const shown: JsonObject = { ...base };
  for (const [name, value] of Object.entries(overlay)) {
    if (value === null) delete shown[name];
    else setOwn(shown, name, value);
  }
  return shown;
}

/**
 * The state a decision records: the worker's state as a write of its agent (a value
 * overwrites, {} clears; omitted or null keeps what it saw). With typed fields it is checked
 * against the agent's write scope and merged back with the fields the agent cannot see, and
 * the merged state is held to the state limit like every state about to be written (the
 * worker's part alone may fit while the whole does not). A breach is the worker's fault; for
 * a decision without a worker, the caller's own error (`403`, `422`, `413`).
 */
export function answeredState(target: Pick<WriteTarget, 'current' | 'schema'>, agentId: Caller, decision: ValidDecision): Json {
  // Nothing written over nothing: a session whose state is still null keeps it, typed fields or not
  // (a typed write of null would be refused as "not an object", failing a worker that wrote nothing).
  if ((decision.state === undefined || decision.state === null) && storedState(target) === null) return null;
  const answer = (seen: Json) => (decision.state === undefined || decision.state === null ? seen : decision.state);
  try {
    return checkedWrite(target, agentId, answer);
  } catch (error) {
    if (!(error instanceof AgentStateError) || decision.source === 'caller') throw error;
    const what = error.code === 'state_too_large' ? 'the state it makes is too large' : "the worker's state breaks the typed fields";
    throw new AgentStateError('worker_failed', `${what}: ${error.message}`, { ...error.extras, fieldError: error.code });
  }
}

/** The messages a trigger appends before the decision: only `client.messages` carries any. */
export function triggerMessagesOf(trigger: JsonObject & { type: string }): IncomingMessage[] {
  if (trigger.type !== 'client.messages') return [];
  return (trigger.messages ?? []) as IncomingMessage[];
}

/** Gives every message without an id a generated one, so a retried commit names the same nodes. */
export function withIds(messages: readonly IncomingMessage[]): IncomingMessage[] {
  return messages.map((message) => (message.id === undefined ? { ...message, id: newId() } : message));
}
