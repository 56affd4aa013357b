import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebhookDeliverer } from '../../functions/core/webhooks/delivery.js';
import { laneOf, type QueuedDelivery } from '../../functions/core/webhooks/records.js';
import { DynamoDbWebhookStore } from '../../functions/store/events/webhook-store.js';
import { TableClient } from '../../functions/store/table/table-client.js';
import { webhookSender } from '../../functions/workers/webhook-sender.js';
import { createTestTable, testDynamoDbClient } from '../helpers/dynamodb.js';

/**
 * Dead endpoints hold no delivery slots (issue 35, item 3; core/webhooks/breaker.ts). The
 * delivery hook in AWS runs at most a fixed number of deliveries at once; here a pool of slots
 * plays it, each slot its own function instance (its own deliverer, so nothing is shared but
 * the table), each delivery reading its webhook from the table first, as the delivery hook
 * does. One tenant has 150 lanes on three dead endpoints; another tenant's lanes, queued behind
 * all of them, go to a live one. The breaker is what keeps the dead lanes from trying (and
 * holding a slot) once per delivery: the count of requests the dead endpoint receives is the
 * measure, not a time.
 */

interface Endpoint {
  server: Server;
  url: string;
  /** Requests received, by path. */
  received: string[];
  status: number;
  /** How long it takes to answer. */
  delayMs: number;
}

async function endpoint(status: number): Promise<Endpoint> {
  const made: Endpoint = { server: undefined as unknown as Server, url: '', received: [], status, delayMs: 0 };
  made.server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => {
      body += chunk.toString('utf8');
    });
    req.on('end', () => {
      made.received.push(`${req.url} ${(JSON.parse(body) as { id: string }).id}`);
      setTimeout(() => res.writeHead(made.status).end(), made.delayMs);
    });
  });
  await new Promise<void>((resolve) => made.server.listen(0, '127.0.0.1', resolve));
  made.url = `http://127.0.0.1:${(made.server.address() as AddressInfo).port}`;
  return made;
}

let client: DynamoDBClient;
let store: DynamoDbWebhookStore;
let dead: Endpoint;
let live: Endpoint;
let clock = Date.now();
let tableName: string;

beforeAll(async () => {
  client = testDynamoDbClient();
  tableName = await createTestTable('breaker');
  store = new DynamoDbWebhookStore(new TableClient(client, tableName));
  dead = await endpoint(503);
  live = await endpoint(200);
});
afterAll(async () => {
  client.destroy();
  for (const { server } of [dead, live]) await new Promise((resolve) => server.close(resolve));
});

async function register(tenant: string, url: string): Promise<string> {
  const id = uuidv7();
  await store.putWebhook(tenant, { id, url, secret: null, sessionId: null, createdAt: new Date(clock).toISOString() }, { limit: 20 });
  return id;
}

/** One queued message: the tenant, webhook and event, not the webhook's record (read when delivered). */
interface Message {
  tenant: string;
  webhookId: string;
  sessionId: string;
  version: number;
}

/**
 * Runs `messages` through `slots` instances as SQS FIFO and the delivery hook's mapping do: a
 * lane's next message only after the one before it is done, lanes independent, one message per
 * invocation. Resolves when the queue is empty.
 */
async function runDeliveryHook(messages: Message[], slots: number): Promise<void> {
  const waiting = [...messages];
  const busyLanes = new Set<string>();
  const laneOfMessage = (message: Message) => laneOf(message.tenant, message.webhookId, [message.sessionId]);
  const instance = async () => {
    const deliverer = new WebhookDeliverer({
      webhooks: store,
      send: webhookSender({ allowLoopbackHttp: true }),
      deliveredBy: 'the delivery hook',
      now: () => new Date(clock),
      log: () => {},
    });
    for (;;) {
      const next = waiting.findIndex((message) => !busyLanes.has(laneOfMessage(message)));
      if (next < 0) {
        if (waiting.length === 0) return;
        await new Promise((resolve) => setTimeout(resolve, 5));
        continue;
      }
      const [message] = waiting.splice(next, 1) as [Message];
      const lane = laneOfMessage(message);
      busyLanes.add(lane);
      const webhook = await store.getWebhook(message.tenant, message.webhookId);
      if (webhook) {
        const id = `${message.sessionId}:${message.version}`;
        const delivery: QueuedDelivery = {
          tenant: message.tenant,
          webhook,
          lane,
          event: { id, sessionId: message.sessionId, version: message.version, body: JSON.stringify({ id }) },
        };
        const { failed } = await deliverer.deliver([delivery]);
        expect(failed).toEqual([]);
      }
      busyLanes.delete(lane);
    }
  };
  await Promise.all(Array.from({ length: slots }, instance));
}

async function deadLetters(tenant: string, webhookId: string): Promise<Array<{ attempts: number; lastError: string }>> {
  const letters: Array<{ attempts: number; lastError: string }> = [];
  let cursor: string | undefined;
  do {
    const page = await store.listDeadLetters(tenant, webhookId, { limit: 100, ...(cursor ? { cursor } : {}) });
    letters.push(...page.items);
    cursor = page.next;
  } while (cursor);
  return letters;
}

describe('a breaker per endpoint, shared through the table', () => {
  const slots = 10;
  let deadHooks: string[] = [];

  it('lets 150 lanes on dead endpoints try them once per opening, not once per delivery, while another tenant is delivered', async () => {
    // Prepare: three dead webhooks of one tenant, each followed by 50 sessions with 2 events (150
    // lanes, 300 deliveries), queued before a live webhook's 10 sessions of another tenant.
    deadHooks = await Promise.all(['/a', '/b', '/c'].map((path) => register('many-dead', `${dead.url}${path}`)));
    const liveHook = await register('alive', `${live.url}/hook`);
    const messages: Message[] = [];
    for (const version of [1, 2]) {
      for (let session = 0; session < 50; session++) {
        for (const webhookId of deadHooks) messages.push({ tenant: 'many-dead', webhookId, sessionId: `s${session}`, version });
      }
    }
    for (const version of [1, 2]) {
      for (let session = 0; session < 10; session++)
        messages.push({ tenant: 'alive', webhookId: liveHook, sessionId: `l${session}`, version });
    }

    // Act
    await runDeliveryHook(messages, slots);

    // Assess: the live tenant got everything, once each.
    expect(live.received.toSorted()).toEqual(
      [1, 2].flatMap((version) => Array.from({ length: 10 }, (_, session) => `/hook l${session}:${version}`)).toSorted(),
    );
    // Each dead delivery is a dead letter; only those that started before their endpoint's
    // breaker opened tried it (3 attempts each, at most one wave of slots per endpoint).
    const letters = (await Promise.all(deadHooks.map((id) => deadLetters('many-dead', id)))).flat();
    expect(letters).toHaveLength(300);
    const tried = letters.filter((letter) => letter.attempts > 0);
    expect(tried.length).toBeGreaterThanOrEqual(3);
    expect(tried.length).toBeLessThanOrEqual(slots * 3);
    expect(dead.received.length).toBe(tried.reduce((sum, letter) => sum + letter.attempts, 0));
    expect(dead.received.length).toBeLessThanOrEqual(slots * 3 * 3);
    for (const letter of letters.filter((candidate) => candidate.attempts === 0)) {
      expect(letter.lastError).toMatch(/^not attempted: the endpoint failed a delivery, so its breaker is open until /);
    }
  });

  it('lets one delivery of many at once probe a half-open breaker, and closes it when the endpoint answers', async () => {
    // Prepare: the endpoint is back, and slow enough that every other delivery of the wave
    // claims while the probe is under way (one that claims after the probe closed the breaker
    // delivers as usual: the next test); the breaker's 30 s are over.
    dead.status = 200;
    dead.delayMs = 1_000;
    dead.received.length = 0;
    clock += 30_001;
    const [hook] = deadHooks as [string];
    const before = (await deadLetters('many-dead', hook)).length;

    // Act: 20 lanes at once, 20 instances; then 20 more once the probe has been answered.
    const wave = (version: number) =>
      Array.from({ length: 20 }, (_, session) => ({ tenant: 'many-dead', webhookId: hook, sessionId: `p${session}`, version }));
    await runDeliveryHook(wave(1), 20);
    const probed = dead.received.length;
    dead.delayMs = 0;
    await runDeliveryHook(wave(2), 20);

    // Assess: exactly one delivery of the first wave tried (the probe); the others are dead
    // letters naming the probe's hold; after it, the breaker is closed and every delivery goes.
    expect(probed).toBe(1);
    expect((await deadLetters('many-dead', hook)).length - before).toBe(19);
    expect(dead.received.length).toBe(21);
    expect((await store.getWebhook('many-dead', hook))?.breaker).toBeUndefined();
  });
});

describe('the probe of a half-open breaker, claimed on DynamoDB Local', () => {
  it('delivers as usual when another delivery’s probe closed the breaker after this one read it', async () => {
    // Prepare: a webhook whose breaker is half-open as this delivery reads it, then closed by
    // another instance's probe before this one claims.
    const hook = await register('closed-meanwhile', live.url);
    await store.openBreaker('closed-meanwhile', hook, { failures: 1, openUntil: clock - 1 });
    const asRead = await store.getWebhook('closed-meanwhile', hook);
    await store.closeBreaker('closed-meanwhile', hook);
    live.received.length = 0;
    const deliverer = new WebhookDeliverer({
      webhooks: store,
      send: webhookSender({ allowLoopbackHttp: true }),
      deliveredBy: 'the delivery hook',
      now: () => new Date(clock),
      log: () => {},
    });

    // Act
    const id = 'closed:1';
    const { failed } = await deliverer.deliver([
      {
        tenant: 'closed-meanwhile',
        webhook: asRead as NonNullable<typeof asRead>,
        lane: laneOf('closed-meanwhile', hook, ['closed']),
        event: { id, sessionId: 'closed', version: 1, body: JSON.stringify({ id }) },
      },
    ]);

    // Assess: no dead letter saying the breaker is open; the endpoint got the event.
    expect(asRead?.breaker).toMatchObject({ failures: 1 });
    expect(failed).toEqual([]);
    expect(await deadLetters('closed-meanwhile', hook)).toEqual([]);
    expect(live.received).toEqual([`/ ${id}`]);
    expect((await store.getWebhook('closed-meanwhile', hook))?.breaker).toBeUndefined();
  });

  it('answers claimed to one of 30 claims in the same millisecond, taken to the others, closed once closed', async () => {
    // Prepare
    const hook = await register('claims', live.url);
    await store.openBreaker('claims', hook, { failures: 2, openUntil: clock - 1 });

    // Act: 30 claims at once, all in the same millisecond; then a closed breaker.
    const claims = await Promise.all(
      Array.from({ length: 30 }, () => store.claimProbe('claims', hook, { now: clock, until: clock + 10_000 })),
    );
    await store.closeBreaker('claims', hook);
    const afterClose = await store.claimProbe('claims', hook, { now: clock, until: clock + 20_000 });

    // Assess
    expect(claims.filter((claim) => claim === 'claimed')).toHaveLength(1);
    expect(claims.filter((claim) => claim === 'taken')).toHaveLength(29);
    expect(afterClose).toBe('closed');
  });

  it('takes its own claim, landed by an attempt whose answer was lost, as claimed', async () => {
    // Prepare: a table client that sends each probe claim twice, as the SDK resends a request
    // whose answer it lost after DynamoDB had applied it (a fault DynamoDB Local cannot make).
    const hook = await register('resent-claim', live.url);
    await store.openBreaker('resent-claim', hook, { failures: 1, openUntil: clock - 1 });
    const table = new TableClient(client, tableName);
    const send = table.send;
    (table as { send: TableClient['send'] }).send = (async (command: Parameters<TableClient['send']>[0]) => {
      const update = (command as { input?: { UpdateExpression?: string } }).input?.UpdateExpression ?? '';
      if (update.includes('breakerProbeBy =')) await send(command);
      return send(command);
    }) as TableClient['send'];
    const resending = new DynamoDbWebhookStore(table);

    // Act
    const claim = await resending.claimProbe('resent-claim', hook, { now: clock, until: clock + 10_000 });
    const other = await store.claimProbe('resent-claim', hook, { now: clock, until: clock + 10_000 });

    // Assess
    expect(claim).toBe('claimed');
    expect(other).toBe('taken');
  });
});
