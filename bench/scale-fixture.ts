/**
 * What section 2 (scale) measures on: deep message chains, a long history and a table of many
 * sessions, written on a DynamoDB Local of its own that the section starts and stops.
 *
 * Why its own: DynamoDB Local (2026-01-16) keeps every stream record of the instance in one
 * SQLite table with no index on the shard, and each request to a table looks up where that
 * table's stream shard starts with `SELECT MIN(SequenceNumber) … WHERE ShardID = ?`, which
 * walks the records in the order they were written until it meets the shard's first one. A
 * table whose first write comes after N stream records of other tables pays a walk over those
 * N records on every request, reads included; the tables made first find theirs at once:
 *
 *     stream records:  [bench bench bench … 40,000 of sections 1–1d and the chains …][many …]
 *     a write to bench_many_sessions walks ────────────────────────────────────────▶ found
 *
 * On the run's instance, after sections 1–1d (4 MiB states among them), batches of 25 session
 * items (25 walks each) missed the 3 s timeout through every retry, and the run failed with
 * them; the very tables made after the chains were slow even on a fresh instance. Here every
 * table is made and written once before the bulk, so each finds its shard in the first few
 * records, and what ran before cannot slow the section down.
 */

import { performance } from 'node:perf_hooks';
import { ROOT_NODE } from '../functions/core/kernel/ids.js';
import type { Tip, VersionRecord } from '../functions/core/model/model.js';
import { StaleTipError } from '../functions/core/model/ports.js';
import { nextLineage } from '../functions/core/model/tree.js';
import { startDynamoDbLocal } from '../functions/local/dynamodb-local.js';
import { dynamoDbClient } from '../functions/store/table/client.js';
import { log, SCALE, TENANT } from './config.js';
import { BENCH_AGENT, kilobyteState, putBenchAgent, scope, untilWritten, type Wired, wire, writeFillerSessions } from './fixture.js';
import type { Meter } from './meter.js';

/** The kinds of write that deepen their own chains as the depth pairs measure them. */
const CHAIN_WRITES = ['append-1', 'append-25', 'turn', 'decide'];

export interface ScaleFixture {
  /** The main table: `<kind>-small` / `<kind>-large` chains, `history-small` / `history-large`. */
  main: Wired;
  /** A table that holds one session, `target`, and one that holds it among SCALE.sessions. */
  one: Wired;
  many: Wired;
  /** How long writing it all took. */
  setupSeconds: number;
  /** Stops the section's DynamoDB Local. */
  stop(): Promise<void>;
}

/**
 * Starts the section's DynamoDB Local, its client metered by `meter`, and writes the fixture:
 * chains of 10 and SCALE.depth messages for the reads and for each kind of write, histories of
 * 10 and SCALE.versions versions, and SCALE.sessions sessions in one table against one in
 * another. Prints how long the writing took.
 */
export async function startScaleFixture(meter: Meter): Promise<ScaleFixture> {
  const dynamo = await startDynamoDbLocal({ dataDir: 'memory', jit: 'peak' });
  try {
    const client = meter.instrument(dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamo.endpoint }));
    const setupStart = performance.now();
    // Every table made and written once before the bulk (the header says why).
    const main = await wire(client, 'bench');
    const one = await wire(client, 'bench_one_session');
    const many = await wire(client, 'bench_many_sessions');
    await untilWritten(() => putBenchAgent(main));
    await untilWritten(() => one.service.replaceState(scope('target'), kilobyteState(1)));
    await untilWritten(() => many.service.replaceState(scope('target'), kilobyteState(1)));
    await Promise.all([
      ...['depth', ...CHAIN_WRITES].flatMap((name) => {
        const agent = name === 'turn' || name === 'decide' ? BENCH_AGENT : undefined;
        return [chain(main, `${name}-small`, 10, agent), chain(main, `${name}-large`, SCALE.depth, agent)];
      }),
      history(main, 'history-small', 10),
      history(main, 'history-large', SCALE.versions),
      writeFillerSessions(many, SCALE.sessions - 1),
    ]);
    const setupSeconds = (performance.now() - setupStart) / 1000;
    log(
      `  (set-up, on a DynamoDB Local of its own: ${SCALE.depth} nodes, ${SCALE.versions} versions and ` +
        `${SCALE.sessions} sessions written in ${setupSeconds.toFixed(1)} s)`,
    );
    return { main, one, many, setupSeconds, stop: () => dynamo.stop() };
  } catch (error) {
    await dynamo.stop();
    throw error;
  }
}

/**
 * Depth: one chain of `depth` messages in 25-message appends, with a state at the head's parent
 * and at the head. With `agentId`, the session is made for that agent first (the decide rows).
 */
export async function chain(main: Wired, sessionId: string, depth: number, agentId?: string): Promise<void> {
  if (agentId) await untilWritten(() => createOnce(main, sessionId, agentId));
  for (let made = 0; made < depth; made += 25) {
    const count = Math.min(25, depth - made);
    // Under its parent by name, so that a repeat after a timeout finds its messages there and adds none.
    const parentId = made === 0 ? ROOT_NODE : `d${made}`;
    const messages = Array.from({ length: count }, (_, index) => ({ id: `d${made + index + 1}`, role: 'user', content: 'x' }));
    await untilWritten(() => main.service.appendMessages(scope(sessionId), { messages, parentId }));
  }
  // State at a node one above the head, then at the head: both have their own version.
  await untilWritten(() => main.service.replaceState(scope(sessionId), kilobyteState(1), { node: `d${depth - 1}` }));
  await untilWritten(() => main.service.replaceState(scope(sessionId), kilobyteState(2)));
}

/** Creates a session; one that exists already is the one an earlier attempt made (only the fixture makes these ids). */
async function createOnce(main: Wired, sessionId: string, agentId: string): Promise<void> {
  try {
    await main.deps.sessions.createSession(TENANT, { sessionId, agentId });
  } catch (error) {
    if ((error as { code?: string }).code !== 'session_exists') throw error;
  }
}

/** History: `count` versions written straight through the store (one PutItem each). */
async function history(main: Wired, sessionId: string, count: number): Promise<void> {
  const at = new Date().toISOString();
  let tip: Tip = await untilWritten(() => main.store.readTip(scope(sessionId), { withState: true }));
  while (tip.version < count) {
    const basedOn = tip;
    const version = basedOn.version + 1;
    const record: VersionRecord = {
      version,
      node: 'root',
      prevVersion: version - 1,
      cause: 'patch',
      author: null,
      decisionId: null,
      createdAt: at,
      state: kilobyteState(version),
      agent: null,
      lineage: nextLineage(basedOn.latest),
    };
    try {
      tip = await main.store.commit(scope(sessionId), {
        basedOn,
        version: record,
        prior: basedOn.latest,
        head: { id: 'root', version, depth: 0 },
        newNodes: [],
        touchSessionAt: basedOn.kind === 'empty' ? at : undefined,
        mayCreateSession: basedOn.kind === 'empty',
      });
    } catch (error) {
      // A timeout (the put may have landed) or a lost race: read where the log is, and go on from there.
      const code = String((error as { code?: unknown }).code);
      if (!(error instanceof StaleTipError) && code !== 'unavailable' && code !== 'throttled') throw error;
      tip = await untilWritten(() => main.store.readTip(scope(sessionId), { withState: true }));
    }
  }
}
