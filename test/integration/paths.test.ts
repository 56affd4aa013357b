import { beforeAll, describe, expect, it } from 'vitest';
import { ROOT_NODE } from '../../functions/core/kernel/ids.js';
import type { SessionScope } from '../../functions/core/model/model.js';
import { SessionService } from '../../functions/core/sessions/session-service.js';
import { createStores, type Stores } from '../../functions/store/index.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * Paths read by ranges of the log (functions/store/log/paths.ts), against a model of the tree kept
 * in memory: long conversations, forks, returns to older branches, writes between, so that
 * paths run through many ranges, past the newest changes a tip read brings along, and through
 * ranges merged past their bound. Real DynamoDB Local; a second store reads the same table
 * with parts of a few KB, so that every range is split into many parallel reads.
 */
const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
let stores: Stores;
let splitting: Stores;
let service: SessionService;

/** Sequential rounds of requests on the reading client: one starts when none is in flight. */
let rounds = 0;
let inFlight = 0;
const reading = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() });
reading.middlewareStack.add(
  (next) => async (args) => {
    if (inFlight === 0) rounds++;
    inFlight++;
    try {
      return await next(args);
    } finally {
      inFlight--;
    }
  },
  { step: 'initialize', name: 'countRounds' },
);

beforeAll(async () => {
  const tableName = await createTestTable('paths');
  stores = createStores(client, tableName);
  splitting = createStores(reading, tableName, { pathSegmentBytes: 3_000 });
  service = new SessionService(createStores(reading, tableName).sessions);
});

/** The tree as a model: each node's parent, and where the head is. */
class TreeModel {
  readonly parents = new Map<string, string>();
  head = ROOT_NODE;

  add(ids: string[], under: string): void {
    let parent = under;
    for (const id of ids) {
      this.parents.set(id, parent);
      parent = id;
    }
    this.head = parent;
  }

  path(id: string): string[] {
    const ids: string[] = [];
    for (let at = id; at !== ROOT_NODE; at = this.parents.get(at) as string) ids.push(at);
    return [ROOT_NODE, ...ids.reverse()];
  }

  nodes(): string[] {
    return [...this.parents.keys()];
  }
}

/** A small deterministic generator, so that a failing tree can be built again. */
function random(seed: number): (below: number) => number {
  let state = seed;
  return (below) => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return state % below;
  };
}

async function expectPaths(scope: SessionScope, model: TreeModel, ids: string[]): Promise<void> {
  for (const id of ids) {
    const expected = model.path(id);
    rounds = 0;
    const read = await service.getPath(scope, id);
    // The node's index with the tip, its change and those just before it, the rest of its ranges.
    expect(rounds, `rounds to read the path to ${id}`).toBeLessThanOrEqual(3);
    expect(read.ancestry, `path to ${id}`).toEqual(expected);
    expect(read.messages.map((message) => message.id)).toEqual(expected.slice(1));
    const { tip, nodes } = await splitting.sessions.readTipWithNodes(scope, [id], { withState: false });
    rounds = 0;
    const split = await splitting.sessions.readPath(scope, tip, nodes.get(id) ?? tip.headNode);
    expect(split.ancestry, `path to ${id}, read in small parts`).toEqual(expected);
    expect(rounds, `rounds to read the path to ${id} in small parts`).toBeLessThanOrEqual(2);
  }
  const head = await service.getPath(scope);
  expect(head.ancestry).toEqual(model.path(model.head));
}

describe('paths through a tree that grew in many ranges of the log', () => {
  it('reads every path of a branching conversation exactly, however its ranges lie', async () => {
    // Prepare: 160 changes of every kind, chosen by a seeded generator.
    const scope = { tenant: 'paths', sessionId: 'branching' };
    const model = new TreeModel();
    const next = random(20);
    let counter = 0;
    for (let step = 0; step < 160; step++) {
      const choice = next(10);
      const nodes = model.nodes();
      if (choice < 4 || nodes.length === 0) {
        const ids = Array.from({ length: 1 + next(3) }, () => `n${++counter}`);
        await service.appendMessages(scope, { messages: ids.map((id) => ({ id, role: 'user', content: `message ${id}` })) });
        model.add(ids, model.head);
      } else if (choice < 6) {
        const parent = nodes[next(nodes.length)] as string;
        const ids = [`n${++counter}`];
        await service.appendMessages(scope, { parentId: parent, messages: ids.map((id) => ({ id, role: 'assistant' })) });
        model.add(ids, parent);
      } else if (choice < 8) {
        const target = nodes[next(nodes.length)] as string;
        await service.switchHead(scope, target);
        model.head = target;
      } else {
        await service.patchState(scope, { step }, choice === 8 ? {} : { node: nodes[next(nodes.length)] as string });
      }
    }

    // Act and assess: every leaf, some inner nodes, and the head.
    const leaves = model.nodes().filter((id) => ![...model.parents.values()].includes(id));
    await expectPaths(scope, model, [...leaves, ...model.nodes().filter((_, index) => index % 17 === 0)]);
  }, 120_000);

  it('keeps a path right when its ranges outnumber the bound and merge', async () => {
    // Prepare: a main line that a side branch interrupts 30 times, so that each return to the
    // main line starts a new range of its path.
    const scope = { tenant: 'paths', sessionId: 'many-ranges' };
    const model = new TreeModel();
    await service.appendMessages(scope, { messages: [{ id: 'side', role: 'user' }] });
    model.add(['side'], ROOT_NODE);
    await service.switchHead(scope, ROOT_NODE);
    model.head = ROOT_NODE;
    let main = ROOT_NODE;
    for (let turn = 1; turn <= 30; turn++) {
      await service.appendMessages(scope, { parentId: main, messages: [{ id: `m${turn}`, role: 'user' }] });
      model.add([`m${turn}`], main);
      main = `m${turn}`;
      await service.appendMessages(scope, { parentId: 'side', messages: [{ id: `s${turn}`, role: 'assistant' }] });
      model.add([`s${turn}`], 'side');
      await service.switchHead(scope, main);
      model.head = main;
    }

    // Act and assess
    await expectPaths(scope, model, ['m30', 'm15', 's30', 's1']);
  }, 60_000);

  it('shows a worker the last messages of a long path, and says how many came before', async () => {
    // Prepare: 120 one-message appends, with state writes between, beyond a tip read's reach.
    const scope = { tenant: 'paths', sessionId: 'last-messages' };
    for (let n = 1; n <= 120; n++) {
      await service.appendMessages(scope, { messages: [{ id: `l${n}`, role: 'user' }] });
      if (n % 3 === 0) await service.patchState(scope, { n });
    }

    // Act
    const tip = await stores.sessions.readTip(scope, { withState: false, recent: true });
    const last = await stores.sessions.readPath(scope, tip, tip.headNode, { last: 90 });
    const all = await stores.sessions.readPath(scope, tip, tip.headNode);

    // Assess
    expect(last.messages.map((message) => message.id)).toEqual(Array.from({ length: 90 }, (_, index) => `l${index + 31}`));
    expect(last.ancestry).toEqual(last.messages.map((message) => message.id));
    expect(last.omitted).toBe(30);
    expect(all.ancestry).toEqual([ROOT_NODE, ...Array.from({ length: 120 }, (_, index) => `l${index + 1}`)]);
    expect(all.omitted).toBe(0);
  }, 60_000);
});
