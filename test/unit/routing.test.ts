import { describe, expect, it } from 'vitest';
import { checkRoutes, checkRoutesStillHold, handoffHop, handoffOf, routeDecision } from '../../functions/core/agents/routing.js';
import type { Json } from '../../functions/core/json/json.js';
import { AgentStateError } from '../../functions/core/kernel/errors.js';
import { buildSchema } from '../../functions/core/model/fields.js';
import type { AgentRecord, AgentRoute } from '../../functions/core/model/model.js';

/** An agent of the registry, with its routes. */
const agent = (
  agentId: string,
  parentId: string | null,
  routes?: AgentRoute[],
  stateFields: AgentRecord['stateFields'] = null,
): AgentRecord => ({
  agentId,
  parentId,
  worker: null,
  stateFields,
  config: null,
  ...(routes ? { routes } : {}),
  createdAt: '2026-12-04T00:00:00.000Z',
  updatedAt: '2026-12-04T00:00:00.000Z',
});

// a ── b ── c ── d ── e, each routing to the next when `go` is set.
const chain = ['a', 'b', 'c', 'd', 'e'].map((id, index, ids) =>
  agent(
    id,
    index === 0 ? null : (ids[index - 1] as string),
    index < 4 ? [{ when: { go: true }, to: ids[index + 1] as string }] : undefined,
  ),
);

describe('routeDecision', () => {
  it('follows matching routes down the tree, at most three hops', () => {
    // Act
    const routed = routeDecision('a', chain, () => ({ go: true }));

    // Assess: a → b → c → d, and d's own route to e is not taken (a fourth hop).
    expect(routed.agentId).toBe('d');
    expect(routed.routing.map((hop) => `${hop.from}>${hop.to}`)).toEqual(['a>b', 'b>c', 'c>d']);
  });

  it('stays with the agent when no route matches, and tries routes in order', () => {
    const routes = [
      agent('r', null, [
        { when: { tier: 'gold' }, to: 'gold' },
        { when: { tier: { $in: ['gold', 'silver'] } }, to: 'silver' },
      ]),
      agent('gold', 'r'),
      agent('silver', 'r'),
    ];
    expect(routeDecision('r', routes, () => ({ tier: 'bronze' }))).toEqual({ agentId: 'r', routing: [] });
    expect(routeDecision('r', routes, () => ({ tier: 'gold' })).agentId).toBe('gold');
    expect(routeDecision('r', routes, () => ({ tier: 'silver' })).routing).toEqual([{ from: 'r', to: 'silver', via: 'route', index: 1 }]);
  });

  it('matches $exists on the state as the routing agent sees it: a field it cannot read is absent', () => {
    const agents = [agent('r', null, [{ when: { card: { $exists: true } }, to: 'x' }]), agent('x', 'r')];
    // The view the router gets leaves out what it may not read.
    expect(routeDecision('r', agents, () => ({ note: 'hi' })).agentId).toBe('r');
    expect(routeDecision('r', agents, () => ({ card: null })).agentId).toBe('x');
  });

  it('passes over a route whose target is no longer below its agent', () => {
    const agents = [agent('r', null, [{ when: { go: true }, to: 'moved' }]), agent('moved', null)];
    expect(routeDecision('r', agents, () => ({ go: true }))).toEqual({ agentId: 'r', routing: [] });
  });
});

describe('checkRoutes', () => {
  const fields = { secret: { type: 'string' as const, description: 's', read: 'private' as const, write: 'private' as const } };
  const registry = [
    agent('top', null, undefined, { open: { type: 'string', description: 'o', read: 'public', write: 'public' } }),
    agent('low', 'top', undefined, fields),
  ];
  const refused = (routes: AgentRoute[]) => {
    try {
      checkRoutes('top', routes, registry);
      return null;
    } catch (error) {
      return (error as AgentStateError).extras;
    }
  };

  it('takes a route on a field the agent reads, to an agent below it', () => {
    expect(refused([{ when: { open: { $exists: true } }, to: 'low' }])).toBeNull();
    expect(buildSchema('top', registry)).not.toBeNull();
  });

  it('refuses a route naming the route and the field, the same for an unreadable field and an undeclared one', () => {
    expect(refused([{ when: { secret: 'x' }, to: 'low' }])).toEqual({ field: 'routes.0.when.secret' });
    expect(refused([{ when: { open: 'x' }, to: 'top' }])).toEqual({ field: 'routes.0.to' });
    expect(refused([{ when: { open: { $near: 1 } }, to: 'low' }])).toEqual({ field: 'routes.0.when.open' });
    expect(refused([{ when: { open: { $exists: 'yes' } }, to: 'low' }])).toEqual({ field: 'routes.0.when.open' });
  });
});

describe('checkRoutesStillHold', () => {
  const message = (changed: string, agents: AgentRecord[]) => {
    try {
      checkRoutesStillHold(changed, agents);
      return null;
    } catch (error) {
      return (error as AgentStateError).message;
    }
  };

  it('refuses a move that takes a route target out from under its router, the target itself or an agent above it', () => {
    // Each registry as it would be after the move: `r` routes to `t`, which was below it.
    const targetMoved = [agent('r', null, [{ when: { go: true }, to: 't' }]), agent('t', null)];
    expect(message('t', targetMoved)).toMatch(/take t out from under agent r, whose route 0/);
    const middleMoved = [agent('r', null, [{ when: { go: true }, to: 't' }]), agent('s', null), agent('t', 's')];
    expect(message('s', middleMoved)).toMatch(/take t out from under agent r/);
  });

  it('looks only at routes with an end in the moved subtree: one already broken elsewhere does not refuse the move', () => {
    // `b`'s route to `c` is broken (c is not below b), which the rules keep from happening; a
    // move of `m`, which neither end of that route is in, is not that route's business.
    const agents = [
      agent('a', null),
      agent('b', 'a', [{ when: { go: true }, to: 'c' }]),
      agent('c', 'a'),
      agent('top', null, [{ when: { go: true }, to: 'leaf' }]),
      agent('m', 'top'),
      agent('leaf', 'm'),
    ];
    expect(message('m', agents)).toBeNull();
    // …and one whose end is in it still counts.
    expect(message('m', [...agents.filter((one) => one.agentId !== 'm'), agent('m', null)])).toMatch(/take leaf out from under agent top/);
  });
});

describe('handoffs', () => {
  const hierarchy = new Set(['a', 'b', 'c', 'd', 'e']);

  it('reads a handoff answer and refuses one that carries anything else', () => {
    expect(handoffOf({ state: { x: 1 } })).toBeNull();
    expect(handoffOf({ handoff: { agentId: 'b', reason: 'why' } })).toEqual({ agentId: 'b', reason: 'why' });
    expect(() => handoffOf({ handoff: { agentId: 'b' }, messages: [] } as unknown as Json)).toThrow(/carries nothing else/);
    expect(() => handoffOf({ handoff: { agentId: 7 } })).toThrow(AgentStateError);
  });

  it('refuses a loop, a fourth hop and an agent outside the hierarchy', () => {
    const first = handoffHop([], 'a', { agentId: 'b', reason: null }, hierarchy);
    const second = handoffHop([first], 'b', { agentId: 'c', reason: null }, hierarchy);
    const third = handoffHop([first, second], 'c', { agentId: 'd', reason: null }, hierarchy);
    expect(third).toEqual({ from: 'c', to: 'd', via: 'handoff', reason: null });
    expect(() => handoffHop([first, second, third], 'd', { agentId: 'e', reason: null }, hierarchy)).toThrow(/at most 3 hops/);
    expect(() => handoffHop([first], 'b', { agentId: 'a', reason: null }, hierarchy)).toThrow(/loop/);
    expect(() => handoffHop([], 'a', { agentId: 'z', reason: null }, hierarchy)).toThrow(/not an agent of this session's hierarchy/);
  });
});
