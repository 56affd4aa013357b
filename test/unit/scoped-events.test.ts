import type { DynamoDBRecord } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { schemaReader } from '../../functions/core/agents/agent-reader.js';
import { type ChangeEvent, eventForAgent, type StateChangedEvent } from '../../functions/core/events/events.js';
import { ChangeFanout, type ChangeFanoutPorts, type ChangeInput } from '../../functions/core/fanout/change-fanout.js';
import { type FollowLog, type LiveConnection, type LiveFollower, LiveService, type LiveStore } from '../../functions/core/fanout/live.js';
import type { Json } from '../../functions/core/json/json.js';
import { AgentStateError } from '../../functions/core/kernel/errors.js';
import { type AgentFields, buildSchema, type Schema } from '../../functions/core/model/fields.js';
import type { AgentRecord } from '../../functions/core/model/model.js';
import { emptyTip } from '../../functions/core/model/tree.js';
import { type WebhookRecord, webhookView } from '../../functions/core/webhooks/records.js';
import { recordedVersionOf } from '../../functions/store/events/stream-images.js';
import { LOG_ITEM_KIND } from '../../functions/store/table/item-kinds.js';
import { liveBroadcaster } from '../../functions/ws/broadcast.js';
import { memoryBreakers } from '../helpers/breakers.js';
import { stateChangedEvent } from '../helpers/event-fixtures.js';

/**
 * Change events under typed fields (API.md section 7: an agent's view of events shows only
 * its fields): the filtering function, the fan-out that applies it per webhook and per
 * WebSocket subscription, and the live service's checks for keys limited to agents.
 */

// The hierarchy of test/e2e/typed-fields.test.ts: root, with billing and general below it.
const agents: AgentFields[] = [
  {
    agentId: 'root',
    parentId: null,
    stateFields: {
      plan: { type: 'string', read: 'public', write: 'private' },
      internal: { type: 'number', read: 'private', write: 'private' },
    },
  },
  {
    agentId: 'billing',
    parentId: 'root',
    stateFields: { cardToken: { type: 'string', read: { agents: ['root'] }, write: 'private' } },
  },
  { agentId: 'general', parentId: 'root', stateFields: { topic: { type: 'string', read: 'public', write: 'public' } } },
];
const schema = buildSchema('root', agents) as Schema;
const full = { plan: 'ship', internal: 7, cardToken: 'tok_1', topic: 'refunds' };

const event = (next: Json, prev: Json, version = 2) => stateChangedEvent(version, { next, prev, agent: { model: 'fast' } });

describe('eventForAgent', () => {
  it('cuts next and prev to the fields the agent may read, and leaves the rest of the event alone', () => {
    const whole = event(full, { plan: 'draft', cardToken: 'tok_0' });

    const general = eventForAgent(whole, schema, 'general');
    const billing = eventForAgent(whole, schema, 'billing');
    const root = eventForAgent(whole, schema, 'root');

    expect(general).toEqual({ ...whole, next: { plan: 'ship', topic: 'refunds' }, prev: { plan: 'draft' } });
    // The declaring agent reads its own field, even when it is listed for someone else only.
    expect(billing.next).toEqual({ plan: 'ship', cardToken: 'tok_1', topic: 'refunds' });
    expect(root.next).toEqual(full);
    expect(general.agent).toEqual({ model: 'fast' });
    expect(whole.next).toEqual(full);
  });

  it('gives an agent outside the hierarchy only what is listed for it by name', () => {
    expect(eventForAgent(event(full, null), schema, 'stranger').next).toEqual({});
  });

  it('returns the event itself without an agent or without typed fields', () => {
    const whole = event(full, null);

    expect(eventForAgent(whole, schema, null)).toBe(whole);
    expect(eventForAgent(whole, null, 'general')).toBe(whole);
  });

  it('keeps prev null (first version) and next null (never written)', () => {
    expect(eventForAgent(event(full, null, 1), schema, 'general')).toMatchObject({ prev: null, next: { plan: 'ship', topic: 'refunds' } });
    expect(eventForAgent(event(null, null, 1), schema, 'general')).toMatchObject({ prev: null, next: null });
  });

  it('sends states that no longer fit their types as null with viewError, never whole', () => {
    const misfit = event({ ...full, topic: 42 }, full);

    const cut = eventForAgent(misfit, schema, 'general');

    expect(cut).toEqual({
      ...misfit,
      next: null,
      prev: null,
      viewError: { code: 'conflict', fields: [{ field: 'topic', problem: 'must be a string' }] },
    });
    expect(JSON.stringify(cut)).not.toContain('tok_1');
  });

  it('reports a state that is not an object of fields with no fields', () => {
    expect(eventForAgent(event(['not', 'fields'], null), schema, 'general')).toMatchObject({
      next: null,
      prev: null,
      viewError: { code: 'conflict', fields: [] },
    });
  });

  it('ignores a field a migration clears', () => {
    const cleared = buildSchema('root', [
      { agentId: 'root', parentId: null, stateFields: { count: { type: 'number', read: 'public', write: 'public', migrate: 'clear' } } },
    ]) as Schema;

    expect(eventForAgent(event({ count: 'seven' }, null), cleared, 'root')).toMatchObject({ next: {}, prev: null });
  });
});

describe('schemaReader', () => {
  it('builds the schema of a session agent from every page of the tenant’s agents', async () => {
    const records = agents.map((agent) => ({ ...agent, worker: null, config: null, createdAt: '', updatedAt: '' }) as AgentRecord);
    const calls: Array<string | undefined> = [];
    const read = schemaReader({
      listAgents: async (_tenant, options) => {
        calls.push(options.cursor);
        const start = options.cursor ? Number(options.cursor) : 0;
        const items = records.slice(start, start + 2);
        return start + 2 < records.length ? { items, next: String(start + 2) } : { items };
      },
    });

    const built = await read('t1', 'billing');
    const none = await read('t1', 'nobody');

    expect([...(built?.fields.keys() ?? [])]).toEqual(['cardToken']);
    expect(none).toBeNull();
    expect(calls).toEqual([undefined, '2', undefined, '2']);
  });
});

// ---- the fan-out ----------------------------------------------------------------------------

function change(
  sessionId: string,
  version: number,
  prevVersion: number,
  state: Json,
  sessionAgentId: string | null = 'root',
  tenant = 't1',
): ChangeInput {
  return {
    key: `${tenant}/${sessionId}/${version}`,
    change: {
      tenant,
      sessionId,
      version: {
        version,
        node: 'root',
        prevVersion,
        cause: 'patch',
        author: null,
        decisionId: null,
        createdAt: '2025-06-01T10:00:00.000Z',
        state,
        agent: null,
        ...(sessionAgentId === null ? {} : { sessionAgentId }),
      },
      // A follow's mark on the log: the live broadcaster is asked.
      followed: true,
    },
  };
}

const hook = (id: string, agentId: string | null = null): WebhookRecord => ({
  id,
  url: `https://${id}.example`,
  secret: null,
  sessionId: null,
  agentId,
  createdAt: '2025-06-01T00:00:00.000Z',
});

function harness(webhooks: WebhookRecord[]) {
  const sent: Array<{ webhook: string; event: StateChangedEvent }> = [];
  const deadLetters: Array<{ webhook: string; body: string }> = [];
  const schemaReads: Array<[string, string]> = [];
  const broadcasts: Array<{ whole: readonly ChangeEvent[]; cut: readonly ChangeEvent[] | Error }> = [];
  const ports: ChangeFanoutPorts = {
    readState: async () => ({ state: { plan: 'draft' } }),
    webhooks: {
      ...memoryBreakers(),
      allWebhooks: async () => webhooks,
      recordDeadLetter: async (_tenant, webhookId, letter) => {
        deadLetters.push({ webhook: webhookId, body: letter.body });
      },
    },
    send: async (target, body) => {
      const webhook = webhooks.find((candidate) => candidate.url === target.url) as WebhookRecord;
      sent.push({ webhook: webhook.id, event: JSON.parse(body) as StateChangedEvent });
      return webhook.id.startsWith('failing') ? { ok: false, error: 'HTTP 500' } : { ok: true, status: 204 };
    },
    schemaFor: async (tenant, agentId) => {
      schemaReads.push([tenant, agentId]);
      return buildSchema(agentId, agents);
    },
    broadcast: async (_scope, events, eventsFor) => {
      broadcasts.push({ whole: events, cut: await (eventsFor as NonNullable<typeof eventsFor>)('general').catch((error: Error) => error) });
    },
    sleep: async () => {},
    log: () => {},
  };
  return { ports, sent, deadLetters, schemaReads, broadcasts };
}

describe('ChangeFanout with agent-scoped receivers', () => {
  it('sends a webhook with agentId its agent’s view, and one without the whole event', async () => {
    // Prepare
    const h = harness([hook('whole'), hook('general', 'general'), hook('billing', 'billing')]);

    // Act
    const result = await new ChangeFanout(h.ports).process([change('s1', 1, 0, full), change('s1', 2, 1, { ...full, topic: 'sales' })]);

    // Assess
    expect(result.failed).toEqual([]);
    const to = (webhook: string) =>
      h.sent.filter((delivery) => delivery.webhook === webhook).map((delivery) => [delivery.event.prev, delivery.event.next]);
    expect(to('whole')).toEqual([
      [null, full],
      [full, { ...full, topic: 'sales' }],
    ]);
    expect(to('general')).toEqual([
      [null, { plan: 'ship', topic: 'refunds' }],
      [
        { plan: 'ship', topic: 'refunds' },
        { plan: 'ship', topic: 'sales' },
      ],
    ]);
    expect(to('billing')[0]?.[1]).toEqual({ plan: 'ship', cardToken: 'tok_1', topic: 'refunds' });
    // One read of the hierarchy's fields for the batch, whoever receives.
    expect(h.schemaReads).toEqual([['t1', 'root']]);
  });

  it('reads no fields when no receiver names an agent, and cuts nothing for a session without an agent', async () => {
    // (No live followers either: the harness's broadcaster asks for an agent's view.)
    const h = harness([hook('whole')]);
    delete h.ports.broadcast;
    await new ChangeFanout(h.ports).process([change('s1', 1, 0, full)]);
    expect(h.schemaReads).toEqual([]);

    const scoped = harness([hook('general', 'general')]);
    await new ChangeFanout(scoped.ports).process([change('untyped', 1, 0, full, null)]);
    expect(scoped.schemaReads).toEqual([]);
    expect(scoped.sent[0]?.event.next).toEqual(full);
  });

  it('dead-letters the agent’s view, so a replay sends the same cut body', async () => {
    const h = harness([hook('failing', 'general')]);

    await new ChangeFanout(h.ports).process([change('s1', 1, 0, full)]);

    expect(h.deadLetters).toHaveLength(1);
    expect(JSON.parse(h.deadLetters[0]?.body as string).next).toEqual({ plan: 'ship', topic: 'refunds' });
    expect(h.deadLetters[0]?.body).not.toContain('tok_1');
  });

  it('delivers a misfit state to an agent as null with viewError', async () => {
    const h = harness([hook('general', 'general')]);

    const result = await new ChangeFanout(h.ports).process([change('s1', 1, 0, { ...full, topic: 42 })]);

    expect(result.failed).toEqual([]);
    expect(h.sent[0]?.event).toMatchObject({ next: null, prev: null, viewError: { code: 'conflict', fields: [{ field: 'topic' }] } });
  });

  it('retries the session when the fields cannot be read, sending that webhook nothing (never the whole event)', async () => {
    const h = harness([hook('whole'), hook('general', 'general')]);
    h.ports.schemaFor = async () => {
      throw new AgentStateError('unavailable', 'DynamoDB is throttling');
    };

    const result = await new ChangeFanout(h.ports).process([change('s1', 1, 0, full), change('s1', 2, 1, full)]);

    expect(result.failed).toEqual(['t1/s1/1']);
    expect(h.sent.map((delivery) => delivery.webhook)).toEqual(['whole', 'whole']);
  });

  it('fails closed without a schema reader', async () => {
    const h = harness([hook('general', 'general')]);
    delete h.ports.schemaFor;

    const result = await new ChangeFanout(h.ports).process([change('s1', 1, 0, full)]);

    expect(result.failed).toEqual(['t1/s1/1']);
    expect(h.sent).toEqual([]);
  });

  it('hands the live broadcaster the agent’s view alongside the whole events', async () => {
    const h = harness([]);

    await new ChangeFanout(h.ports).process([change('s1', 1, 0, full)]);

    expect(h.broadcasts).toHaveLength(1);
    expect((h.broadcasts[0]?.whole[0] as StateChangedEvent | undefined)?.next).toEqual(full);
    expect((h.broadcasts[0]?.cut as StateChangedEvent[] | undefined)?.[0]?.next).toEqual({ plan: 'ship', topic: 'refunds' });
  });
});

describe('liveBroadcaster with agent subscriptions', () => {
  const whole = [event(full, null, 1)];
  const followers: LiveFollower[] = [
    { connectionId: 'plain', agentId: null, mode: 'full', keyHash: null },
    { connectionId: 'as-general', agentId: 'general', mode: 'full', keyHash: null },
    { connectionId: 'also-general', agentId: 'general', mode: 'full', keyHash: null },
  ];

  it('sends each follower the events as its agent may see them, cutting once per agent', async () => {
    const posted: Array<[string, StateChangedEvent]> = [];
    const views: Array<string | null> = [];
    const broadcast = liveBroadcaster(
      { followers: async () => followers, deleteConnection: async () => {} },
      {
        post: async (connectionId, data) => {
          posted.push([connectionId, JSON.parse(data) as StateChangedEvent]);
          return 'sent';
        },
        close: async () => {},
      },
    );

    await broadcast({ tenant: 't1', sessionId: 's1' }, whole, async (agentId) => {
      views.push(agentId);
      return whole.map((item) => eventForAgent(item, schema, agentId));
    });

    expect(Object.fromEntries(posted.map(([connectionId, sent]) => [connectionId, sent.next]))).toEqual({
      plain: full,
      'as-general': { plan: 'ship', topic: 'refunds' },
      'also-general': { plan: 'ship', topic: 'refunds' },
    });
    expect(views).toEqual(['general']);
  });

  it('sends an agent’s followers nothing when its view cannot be made, and reports it', async () => {
    const posted: string[] = [];
    const broadcast = liveBroadcaster(
      { followers: async () => followers, deleteConnection: async () => {} },
      {
        post: async (connectionId) => {
          posted.push(connectionId);
          return 'sent';
        },
        close: async () => {},
      },
    );

    await expect(broadcast({ tenant: 't1', sessionId: 's1' }, whole, () => Promise.reject(new Error('no fields')))).rejects.toThrow(
      '2 of 3 live connections failed',
    );
    await expect(broadcast({ tenant: 't1', sessionId: 's1' }, whole)).rejects.toThrow('2 of 3 live connections failed');
    expect(posted).toEqual(['plain', 'plain']);
  });
});

// ---- subscriptions --------------------------------------------------------------------------

/** A log whose follow's mark already reaches any time: a subscription writes nothing to it. */
const noFollowLog: FollowLog = {
  readTip: async () => ({ ...emptyTip(), followersUntil: Number.MAX_SAFE_INTEGER }),
  commit: async () => {
    throw new Error('no follow should write here');
  },
};

function fakeLiveStore() {
  const connections = new Map<string, LiveConnection>();
  const subscriptions: Array<{ connectionId: string; sessionId: string; agentId: string | null | undefined }> = [];
  const store: LiveStore = {
    putConnection: async (connectionId, tenant, _expiresAt, agents) => {
      connections.set(connectionId, { tenant, sessions: [], ...(agents ? { agents } : {}) });
    },
    getConnection: async (connectionId) => connections.get(connectionId) ?? null,
    subscribe: async (connectionId, scope, _expiresAt, follow) => {
      subscriptions.push({ connectionId, sessionId: scope.sessionId, agentId: follow?.agentId });
      return true;
    },
    unsubscribe: async () => {},
    deleteConnection: async () => {},
    subscribers: async () => [],
    followers: async () => [],
    subscribeNamespace: async () => true,
    unsubscribeNamespace: async () => {},
    namespaceFollowers: async () => [],
  };
  return { store, connections, subscriptions };
}

describe('LiveService subscriptions with agents', () => {
  it('stores the agent a subscription names, and acknowledges it', async () => {
    const fake = fakeLiveStore();
    const live = new LiveService(fake.store, noFollowLog);
    await live.connect('c1', 't1');

    const plain = await live.subscribe('c1', 's1');
    const scoped = await live.subscribe('c1', 's2', 'general');
    const explicitNull = await live.subscribe('c1', 's3', null);

    expect(plain).toEqual({ type: 'subscribed', sessionId: 's1' });
    expect(scoped).toEqual({ type: 'subscribed', sessionId: 's2', agentId: 'general' });
    expect(explicitNull).toEqual({ type: 'subscribed', sessionId: 's3' });
    expect(fake.subscriptions.map((subscription) => subscription.agentId)).toEqual([null, 'general', null]);
    await expect(live.subscribe('c1', 's4', 'not valid!')).rejects.toMatchObject({ code: 'invalid_id', extras: { field: 'agentId' } });
  });

  it('requires a limited key’s connection to name one of its agents', async () => {
    const fake = fakeLiveStore();
    const live = new LiveService(fake.store, noFollowLog);
    await live.connect('limited', 't1', ['general', 'billing']);
    await live.connect('unlimited', 't1', []);

    await expect(live.subscribe('limited', 's1')).rejects.toMatchObject({
      code: 'forbidden',
      status: 403,
      extras: { agents: ['general', 'billing'] },
    });
    await expect(live.subscribe('limited', 's1', 'root')).rejects.toMatchObject({ code: 'forbidden' });
    expect(await live.subscribe('limited', 's1', 'billing')).toEqual({ type: 'subscribed', sessionId: 's1', agentId: 'billing' });
    expect(fake.connections.get('limited')?.agents).toEqual(['general', 'billing']);
    // An empty list is no limit.
    expect(fake.connections.get('unlimited')).toEqual({ tenant: 't1', sessions: [] });
    expect(fake.subscriptions).toEqual([{ connectionId: 'limited', sessionId: 's1', agentId: 'billing' }]);
  });
});

describe('webhook views and stream images', () => {
  it('shows a webhook’s agent only when it has one', () => {
    expect(webhookView(hook('w', 'general'))).toMatchObject({ agentId: 'general' });
    expect(webhookView(hook('w'))).not.toHaveProperty('agentId');
    expect(webhookView({ ...hook('w'), agentId: undefined })).not.toHaveProperty('agentId');
  });

  it('carries the session’s agent of a version item', () => {
    const image = (extra: Record<string, unknown>) =>
      ({
        eventName: 'INSERT',
        dynamodb: {
          SequenceNumber: '1',
          NewImage: {
            pk: { S: 'S#acme#s1' },
            sk: { S: 'V#000000#000000000000#00000001' },
            kind: { S: LOG_ITEM_KIND.version },
            version: { N: '1' },
            node: { S: 'root' },
            prevVersion: { N: '0' },
            cause: { S: 'patch' },
            createdAt: { S: '2025-06-01T10:00:00.000Z' },
            state: { S: '{}' },
            ...extra,
          },
        },
      }) as DynamoDBRecord;

    // The session's agent rides in what every change carries forward (`t`, log-items.ts).
    const carried = { v: 1, h: 'root', hv: 1, hd: 0, hx: 0, ag: 'root', u: null, ta: null, w: true, b: 0 };
    expect(recordedVersionOf(image({ t: { S: JSON.stringify(carried) } }))?.version.sessionAgentId).toBe('root');
    expect(recordedVersionOf(image({}))?.version).not.toHaveProperty('sessionAgentId');
  });
});
