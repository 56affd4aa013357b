import { afterEach, describe, expect, it, vi } from 'vitest';
import { AgentService } from '../../functions/core/agents/agent-service.js';
import { MAX_HIERARCHY_DEPTH } from '../../functions/core/agents/hierarchy.js';
import { AgentStateError } from '../../functions/core/kernel/errors.js';
import { type CoreMetric, useMetricSink } from '../../functions/core/kernel/metrics.js';
import type { AgentRecord } from '../../functions/core/model/model.js';
import {
  type AgentPutConditions,
  type AgentStore,
  type QueueTarget,
  RegistryChangedError,
  type SessionStore,
} from '../../functions/core/model/ports.js';
import type { RetryPolicy } from '../../functions/core/write/write-retry.js';

/**
 * What a registration checks and what its write is conditional on (agent-service.ts), over a
 * registry kept in memory: the store's conditions themselves are proved on DynamoDB Local by
 * test/e2e/agent-hierarchy-rules.test.ts.
 */
const record = (agentId: string, parentId: string | null): AgentRecord => ({
  agentId,
  parentId,
  worker: null,
  config: null,
  stateFields: null,
  createdAt: '2026-12-06T12:00:00.000Z',
  updatedAt: '2026-12-06T12:00:00.000Z',
});

function registry(
  edges: Array<[string, string | null]>,
  options: { refuseEveryWrite?: boolean; refuseFirstWrites?: number } = {},
  retry: Partial<RetryPolicy> = {},
) {
  const stored = new Map(edges.map(([agentId, parentId]) => [agentId, record(agentId, parentId)]));
  const writes: AgentPutConditions[] = [];
  // A line with nobody ahead: what a registration that lost does with it.
  const queue = {
    joined: [] as QueueTarget[],
    left: 0,
    join: async (target: QueueTarget) => {
      queue.joined.push(target);
      return { ahead: async () => [], leave: async () => void queue.left++ };
    },
  };
  const agents = {
    getAgent: async (_tenant: string, agentId: string) => stored.get(agentId) ?? null,
    registryVersion: async () => 7,
    listAgents: async () => ({ items: [...stored.values()] }),
    putAgent: async (_tenant: string, agent: AgentRecord, conditions: AgentPutConditions) => {
      writes.push(conditions);
      if (options.refuseEveryWrite || writes.length <= (options.refuseFirstWrites ?? 0)) throw new RegistryChangedError();
      stored.set(agent.agentId, agent);
      return !conditions.existed;
    },
  } as unknown as AgentStore;
  const sessions = {} as Pick<SessionStore, 'listSessions' | 'readTip'>;
  return { service: new AgentService({ agents, sessions, queue }, () => {}, undefined, retry), stored, writes, queue };
}

/** A line of `length` agents, `prefix0` at the top. */
const line = (prefix: string, length: number): Array<[string, string | null]> =>
  Array.from({ length }, (_, n) => [`${prefix}${n}`, n === 0 ? null : `${prefix}${n - 1}`]);

describe('the depth of a hierarchy', () => {
  it('counts the levels below an agent that moves: its deepest agent at 32 is taken, at 33 refused with 400', async () => {
    // Prepare: a line of 30, and a mover with two levels below it.
    const { service, stored } = registry([...line('n', MAX_HIERARCHY_DEPTH - 2), ...line('m', 3)]);

    // Act
    const fits = await service.putAgent('t', 'm0', { parentId: `n${MAX_HIERARCHY_DEPTH - 4}` });
    const tooDeep = await service.putAgent('t', 'm0', { parentId: `n${MAX_HIERARCHY_DEPTH - 3}` }).catch((error: unknown) => error);

    // Assess
    expect(fits.agent.parentId).toBe(`n${MAX_HIERARCHY_DEPTH - 4}`);
    expect(tooDeep).toBeInstanceOf(AgentStateError);
    expect(tooDeep).toMatchObject({ code: 'invalid_request', extras: { field: 'parentId' } });
    expect(stored.get('m0')?.parentId).toBe(`n${MAX_HIERARCHY_DEPTH - 4}`);
  });

  it('takes a new agent at level 32 and refuses one at 33', async () => {
    const { service } = registry(line('n', MAX_HIERARCHY_DEPTH));
    await expect(service.putAgent('t', 'at32', { parentId: `n${MAX_HIERARCHY_DEPTH - 2}` })).resolves.toMatchObject({ created: true });
    await expect(service.putAgent('t', 'at33', { parentId: `n${MAX_HIERARCHY_DEPTH - 1}` })).rejects.toMatchObject({
      code: 'invalid_request',
    });
  });

  it('still names a cycle a cycle when the agent moved under its own descendant has many levels below it', async () => {
    const { service } = registry(line('m', MAX_HIERARCHY_DEPTH));
    await expect(service.putAgent('t', 'm0', { parentId: `m${MAX_HIERARCHY_DEPTH - 1}` })).rejects.toThrow(/cycle/);
  });
});

describe('what a registration is written under', () => {
  it('the registry version for another parent, a field name or a route; only the agent as read otherwise', async () => {
    // Prepare
    const { service, writes } = registry([
      ['top', null],
      ['a', 'top'],
      ['b', 'top'],
    ]);
    const field = { type: 'string' as const, read: 'public' as const, write: 'public' as const };

    // Act
    await service.putAgent('t', 'a', { parentId: 'top', config: { model: 'm' } });
    await service.putAgent('t', 'new', { parentId: 'top' });
    await service.putAgent('t', 'loose', {});
    await service.putAgent('t', 'b', { parentId: 'a' });
    await service.putAgent('t', 'a', { parentId: 'top', stateFields: { topic: field } });
    await service.putAgent('t', 'a', { parentId: 'top', stateFields: { topic: field }, routes: [{ when: { topic: 'x' }, to: 'b' }] });
    await service.putAgent('t', 'a', { parentId: 'top', stateFields: {} });
    await service.putAgent('t', 'b', {});

    // Assess
    expect(writes).toEqual([
      { existed: true, parentAsRead: 'top' },
      { existed: false, parentAsRead: null, registryVersion: 7 },
      { existed: false, parentAsRead: null },
      { existed: true, parentAsRead: 'top', registryVersion: 7 },
      { existed: true, parentAsRead: 'top', registryVersion: 7 },
      { existed: true, parentAsRead: 'top', registryVersion: 7 },
      { existed: true, parentAsRead: 'top' },
      { existed: true, parentAsRead: 'a', registryVersion: 7 },
    ]);
  });

  it('for a key limited to agents, always the registry version: a move above it between its read and its write makes it 403', async () => {
    // Prepare: planner > mid > child and elsewhere, versioned as the store keeps them. The
    // first time the limited registration reads the registry, mid moves under elsewhere
    // (another registration, landing between that read and this write).
    const stored = new Map<string, AgentRecord>(
      [record('planner', null), record('mid', 'planner'), record('child', 'mid'), record('elsewhere', null)].map((agent) => [
        agent.agentId,
        agent,
      ]),
    );
    let version = 3;
    let moved = false;
    const writes: AgentPutConditions[] = [];
    const agents = {
      getAgent: async (_tenant: string, agentId: string) => stored.get(agentId) ?? null,
      registryVersion: async () => version,
      listAgents: async () => {
        const items = [...stored.values()];
        if (!moved) {
          moved = true;
          stored.set('mid', record('mid', 'elsewhere'));
          version += 1;
        }
        return { items };
      },
      putAgent: async (_tenant: string, agent: AgentRecord, conditions: AgentPutConditions) => {
        writes.push(conditions);
        if (conditions.registryVersion !== undefined && conditions.registryVersion !== version) throw new RegistryChangedError();
        if (conditions.existed && stored.get(agent.agentId)?.parentId !== conditions.parentAsRead) throw new RegistryChangedError();
        stored.set(agent.agentId, agent);
        return !conditions.existed;
      },
    } as unknown as AgentStore;
    const service = new AgentService({ agents, sessions: {} as Pick<SessionStore, 'listSessions' | 'readTip'> }, () => {}, undefined, {
      maxAttempts: 3,
    });

    // Act: a key limited to planner changes child's config only.
    const answer = await service
      .putAgent('t', 'child', { parentId: 'mid', config: { n: 1 } }, ['planner'])
      .catch((error: unknown) => error);

    // Assess: written under the version it read, refused when read again; child unchanged.
    expect(writes).toEqual([{ existed: true, parentAsRead: 'mid', registryVersion: 3 }]);
    expect(answer).toMatchObject({ code: 'forbidden' });
    expect(stored.get('child')?.config).toBeNull();
  });

  afterEach(() => {
    vi.useRealTimers();
    vi.restoreAllMocks();
  });

  it('is checked again while the registry keeps changing, until the retry budget runs out: 409 conflict naming its attempts', async () => {
    // Prepare: the waits between attempts (random) pass on a fake clock.
    vi.useFakeTimers();
    const { service, writes } = registry([['a', null]], { refuseEveryWrite: true }, { maxAttempts: 5 });

    // Act
    const answer = service.putAgent('t', 'a', { config: { n: 1 } }).catch((error: unknown) => error);
    await vi.runAllTimersAsync();

    // Assess
    expect(await answer).toBeInstanceOf(AgentStateError);
    expect(await answer).toMatchObject({ code: 'conflict', message: expect.stringContaining('agents'), extras: { attempts: 5 } });
    expect(writes).toHaveLength(5);
  });

  it('waits its turn in the line of the tenant once it lost, and gives its ticket back when it lands', async () => {
    // Prepare: the first write finds the registry changed; a line with nobody ahead.
    const { service, writes, queue } = registry([['a', null]], { refuseFirstWrites: 1 });

    const counted: CoreMetric[] = [];
    useMetricSink((name) => counted.push(name));

    // Act
    const { agent } = await service.putAgent('t', 'a', { config: { n: 2 } }).finally(() => useMetricSink(() => {}));

    // Assess
    expect(agent.config).toEqual({ n: 2 });
    // A lost registration is no session write's lost version slot: the operator's count of those stays as it was.
    expect(counted).toEqual([]);
    expect(writes).toHaveLength(2);
    expect(queue.joined).toEqual([{ document: { kind: 'shared', tenant: 't' } }]);
    expect(queue.left).toBe(1);
  });
});
