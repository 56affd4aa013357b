import { ApiGatewayManagementApiClient, GoneException, PostToConnectionCommand } from '@aws-sdk/client-apigatewaymanagementapi';
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, describe, expect, it } from 'vitest';
import type { StateChangedEvent } from '../../functions/core/events/events.js';
import type { Json } from '../../functions/core/json/json.js';
import { eventBridgePublisher } from '../../functions/streams/event-bus.js';
import { liveBroadcaster } from '../../functions/ws/broadcast.js';
import { managementApiGateway } from '../../functions/ws/connections.js';
import { stateChangedEvent } from '../helpers/event-fixtures.js';

const event = (version: number, state: unknown = { n: version }) => stateChangedEvent(version, { next: state as Json });

const noWait = async () => {};

describe('eventBridgePublisher', () => {
  const eventBridge = mockClient(EventBridgeClient);
  afterEach(() => eventBridge.reset());

  it('puts every event on the bus in requests of at most 10, with source, detail-type, tenant and time', async () => {
    // Prepare
    eventBridge
      .on(PutEventsCommand)
      .callsFake((input: { Entries: unknown[] }) => ({ FailedEntryCount: 0, Entries: input.Entries.map(() => ({ EventId: 'x' })) }));
    const publish = eventBridgePublisher(new EventBridgeClient({ region: 'us-east-1' }), 'agentstate-bus', noWait);
    const events = Array.from({ length: 23 }, (_, index) => ({ tenant: 'acme', event: event(index + 1) }));

    // Act
    const failed = await publish(events);

    // Assess
    expect(failed).toEqual([]);
    const calls = eventBridge.commandCalls(PutEventsCommand);
    expect(calls.map((call) => call.args[0].input.Entries?.length)).toEqual([10, 10, 3]);
    const first = calls[0]?.args[0].input.Entries?.[0];
    expect(first).toMatchObject({
      EventBusName: 'agentstate-bus',
      Source: 'agentstate',
      DetailType: 'state.changed',
      Time: new Date('2025-06-01T10:00:00.000Z'),
    });
    // prev is null, so the merge patch is the whole new state.
    expect(JSON.parse(first?.Detail as string)).toEqual({ ...event(1), patch: event(1).next, tenant: 'acme' });
  });

  it('retries the entries that failed, and returns those that keep failing', async () => {
    // Prepare: entry 2 is throttled once, entry 3 always fails.
    let call = 0;
    eventBridge.on(PutEventsCommand).callsFake((input: { Entries: Array<{ Detail: string }> }) => {
      call++;
      return {
        Entries: input.Entries.map((entry) => {
          const version = (JSON.parse(entry.Detail) as { version: number }).version;
          const fails = version === 3 || (version === 2 && call === 1);
          return fails ? { ErrorCode: 'ThrottlingException', ErrorMessage: 'slow down' } : { EventId: `e${version}` };
        }),
      };
    });
    const publish = eventBridgePublisher(new EventBridgeClient({ region: 'us-east-1' }), 'bus', noWait);

    // Act
    const failed = await publish([1, 2, 3].map((version) => ({ tenant: 't', event: event(version) })));

    // Assess
    expect(failed).toEqual([2]);
    expect(eventBridge.commandCalls(PutEventsCommand).map((c) => c.args[0].input.Entries?.length)).toEqual([3, 2, 1]);
  });

  it('counts a request that fails outright as failed entries', async () => {
    eventBridge.on(PutEventsCommand).rejects(new Error('network down'));
    const publish = eventBridgePublisher(new EventBridgeClient({ region: 'us-east-1' }), 'bus', noWait);

    expect(await publish([{ tenant: 't', event: event(1) }])).toEqual([0]);
  });

  it('puts an event too large for an entry without its states', async () => {
    eventBridge
      .on(PutEventsCommand)
      .callsFake((input: { Entries: unknown[] }) => ({ Entries: input.Entries.map(() => ({ EventId: 'x' })) }));
    const publish = eventBridgePublisher(new EventBridgeClient({ region: 'us-east-1' }), 'bus', noWait);

    await publish([{ tenant: 't', event: event(1, { blob: 'x'.repeat(300_000) }) }]);

    const detail = JSON.parse(eventBridge.commandCalls(PutEventsCommand)[0]?.args[0].input.Entries?.[0]?.Detail as string);
    expect(detail).toMatchObject({ id: 's1:1', truncated: true, tenant: 't' });
    expect(detail).not.toHaveProperty('next');
  });
});

describe('managementApiGateway', () => {
  const management = mockClient(ApiGatewayManagementApiClient);
  afterEach(() => management.reset());
  const gateway = () =>
    managementApiGateway(new ApiGatewayManagementApiClient({ region: 'us-east-1', endpoint: 'https://example.com/v1' }));

  it('posts the message to the connection', async () => {
    management.on(PostToConnectionCommand).resolves({});

    expect(await gateway().post('conn-1', '{"a":1}')).toBe('sent');
    const input = management.commandCalls(PostToConnectionCommand)[0]?.args[0].input;
    expect(input?.ConnectionId).toBe('conn-1');
    expect(new TextDecoder().decode(input?.Data as Uint8Array)).toBe('{"a":1}');
  });

  it('reports a connection that is gone (410)', async () => {
    management.on(PostToConnectionCommand).rejects(new GoneException({ message: 'gone', $metadata: { httpStatusCode: 410 } }));

    expect(await gateway().post('conn-1', '{}')).toBe('gone');
  });

  it('lets other failures through', async () => {
    management.on(PostToConnectionCommand).rejects(Object.assign(new Error('LimitExceeded'), { name: 'LimitExceededException' }));

    await expect(gateway().post('conn-1', '{}')).rejects.toThrow('LimitExceeded');
  });
});

describe('liveBroadcaster', () => {
  it('sends every follower the session’s events in order, and forgets connections that are gone', async () => {
    // Prepare
    const sent: Array<[string, number]> = [];
    const deleted: string[] = [];
    const broadcast = liveBroadcaster(
      {
        subscribers: async () => ['alive', 'gone'],
        deleteConnection: async (connectionId) => {
          deleted.push(connectionId);
        },
      },
      {
        post: async (connectionId, data) => {
          if (connectionId === 'gone') return 'gone';
          sent.push([connectionId, (JSON.parse(data) as StateChangedEvent).version]);
          return 'sent';
        },
        close: async () => {},
      },
    );

    // Act
    await broadcast({ tenant: 't', sessionId: 's1' }, [event(1), event(2)]);

    // Assess
    expect(sent).toEqual([
      ['alive', 1],
      ['alive', 2],
    ]);
    expect(deleted).toEqual(['gone']);
  });

  it('posts nothing when the session has no followers', async () => {
    let posts = 0;
    const broadcast = liveBroadcaster(
      { subscribers: async () => [], deleteConnection: async () => {} },
      {
        post: async () => {
          posts++;
          return 'sent';
        },
        close: async () => {},
      },
    );

    await broadcast({ tenant: 't', sessionId: 's1' }, [event(1)]);

    expect(posts).toBe(0);
  });
});
