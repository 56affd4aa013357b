import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, type ApiResponse, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * The rules of the agent registry that span more than one agent (API.md section 7): a
 * hierarchy at most 32 levels deep, routes that lead below their agent, a field name declared
 * once per tree. Each is tried alone, then broken on purpose by two or more registrations at
 * once that each keep it alone, through real HTTP on DynamoDB Local: whatever lands, the
 * registry afterwards keeps every rule, and every answer is one the contract names.
 */
let api: RunningApi;
let http: ApiClient;

beforeAll(async () => {
  api = await startApi();
  http = api.client;
});
afterAll(async () => {
  await api?.stop();
});

const MAX_DEPTH = 32;
const ROUNDS = 20;
/** A round trip per registration, 60-100 of them in a test: 11 s alone for the longest, more beside other files. */
const timeout = 120_000;
const field = { type: 'string', read: 'public', write: 'public' };

interface Listed {
  agentId: string;
  parentId: string | null;
  stateFields: Record<string, unknown> | null;
  routes?: Array<{ to: string }>;
}

/** Every agent of the tenant whose id begins with `prefix`, following the list's pages. */
async function agentsOf(prefix: string): Promise<Listed[]> {
  const agents: Listed[] = [];
  let cursor: string | undefined;
  do {
    const page = await http.get(`/v1/agents?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    expect(page.status).toBe(200);
    agents.push(...(page.body.agents as Listed[]).filter((agent) => agent.agentId.startsWith(prefix)));
    cursor = page.body.next;
  } while (cursor);
  return agents;
}

/** The level of `agentId` (1 at the top), following parents in `agents`. */
function levelOf(agents: readonly Listed[], agentId: string): number {
  const parentOf = new Map(agents.map((agent) => [agent.agentId, agent.parentId]));
  let level = 0;
  for (let at: string | null | undefined = agentId; at; at = parentOf.get(at)) {
    level++;
    if (level > 100) throw new Error(`a cycle through ${agentId}`);
  }
  return level;
}

function isBelow(agents: readonly Listed[], agentId: string, ancestorId: string): boolean {
  const parentOf = new Map(agents.map((agent) => [agent.agentId, agent.parentId]));
  for (let at = parentOf.get(agentId); at; at = parentOf.get(at)) if (at === ancestorId) return true;
  return false;
}

function topOf(agents: readonly Listed[], agentId: string): string {
  const parentOf = new Map(agents.map((agent) => [agent.agentId, agent.parentId]));
  let top = agentId;
  for (let at = parentOf.get(agentId); at; at = parentOf.get(at)) top = at;
  return top;
}

/** Every rule the registry holds, over the agents of one test. */
function expectRulesKept(agents: readonly Listed[]): void {
  for (const agent of agents) expect(levelOf(agents, agent.agentId), `${agent.agentId} is too deep`).toBeLessThanOrEqual(MAX_DEPTH);
  for (const agent of agents) {
    for (const route of agent.routes ?? []) {
      expect(isBelow(agents, route.to, agent.agentId), `${agent.agentId}'s route to ${route.to} leads out of its tree`).toBe(true);
    }
  }
  const declaredBy = new Map<string, string>();
  for (const agent of agents) {
    for (const name of Object.keys(agent.stateFields ?? {})) {
      const key = `${topOf(agents, agent.agentId)}/${name}`;
      expect(declaredBy.get(key), `${name} declared twice in the tree of ${topOf(agents, agent.agentId)}`).toBeUndefined();
      declaredBy.set(key, agent.agentId);
    }
  }
}

/** Registers `ids` in a line, each under the one before (the first at the top). */
async function chain(ids: readonly string[]): Promise<void> {
  for (const [index, id] of ids.entries()) {
    const answer = await http.put(`/v1/agents/${id}`, index === 0 ? {} : { parentId: ids[index - 1] });
    expect(answer.status, answer.text).toBe(201);
  }
}

const put = (id: string, body: unknown) => http.put(`/v1/agents/${id}`, body);
const statusesOf = (answers: ApiResponse[]) => answers.map((answer) => answer.status);
/** Each registration landed or was refused by a rule: none gave up waiting for the others (409). */
function expectNamedAnswers(answers: ApiResponse[]): void {
  for (const answer of answers) expect([200, 201, 400], answer.text).toContain(answer.status);
}

describe('at most 32 levels', { timeout }, () => {
  it('takes an agent at level 32 and refuses one at level 33 with 400, writing nothing', async () => {
    // Prepare: a line of 31 agents.
    const prefix = uniqueId('deep-new');
    const line = Array.from({ length: MAX_DEPTH - 1 }, (_, n) => `${prefix}-${n}`);
    await chain(line);

    // Act
    const at32 = await put(`${prefix}-32`, { parentId: line.at(-1) });
    const at33 = await put(`${prefix}-33`, { parentId: `${prefix}-32` });

    // Assess
    expect(at32.status, at32.text).toBe(201);
    expect(at33.status, at33.text).toBe(400);
    expect(at33.body).toMatchObject({ code: 'invalid_request', field: 'parentId' });
    expect((await http.get(`/v1/agents/${prefix}-33`)).status).toBe(404);
  });

  it('counts the agents below a moved agent: its deepest one may reach level 32, not 33', async () => {
    // Prepare: a line of 30 agents, and an agent with two levels below it (mover, child, grandchild).
    const prefix = uniqueId('deep-move');
    const line = Array.from({ length: MAX_DEPTH - 2 }, (_, n) => `${prefix}-${n}`);
    await chain(line);
    const mover = `${prefix}-mover`;
    await chain([mover, `${prefix}-child`, `${prefix}-grandchild`]);

    // Act: under the 29th the grandchild is at 32; under the 30th it would be at 33.
    const fits = await put(mover, { parentId: line.at(-2) });
    const tooDeep = await put(mover, { parentId: line.at(-1) });

    // Assess: the second is refused like a new agent at level 33, and the mover stays where it was.
    expect(fits.status, fits.text).toBe(200);
    expect(tooDeep.status, tooDeep.text).toBe(400);
    expect(tooDeep.body).toMatchObject({ code: 'invalid_request', field: 'parentId' });
    expect(tooDeep.body.detail).toContain('32');
    expect((await http.get(`/v1/agents/${mover}`)).body.parentId).toBe(line.at(-2));
    expectRulesKept(await agentsOf(prefix));
  });
});

describe('registrations at once that each keep the rules alone', { timeout }, () => {
  it(`never make a hierarchy deeper than 32: a move under a deep line beside a move under the mover's leaf (${ROUNDS} rounds)`, async () => {
    const prefix = uniqueId('deep-race');
    const line = Array.from({ length: MAX_DEPTH - 2 }, (_, n) => `${prefix}-${n}`);
    await chain(line);
    const outcomes: number[][] = [];
    for (let round = 0; round < ROUNDS; round++) {
      // Prepare: a mover with one agent below it, and a loose agent. The mover under the line's
      // last is at 31 and its child at 32; the loose one under that child alone is at 3.
      const mover = `${prefix}-m${round}`;
      const leaf = `${prefix}-l${round}`;
      const loose = `${prefix}-x${round}`;
      await chain([mover, leaf]);
      expect((await put(loose, {})).status).toBe(201);

      // Act
      const answers = await Promise.all([put(mover, { parentId: line.at(-1) }), put(loose, { parentId: leaf })]);

      // Assess
      expectNamedAnswers(answers);
      outcomes.push(statusesOf(answers));
      expectRulesKept(await agentsOf(prefix));
      // Put the line back free for the next round.
      expect((await put(mover, {})).status).toBeLessThan(300);
    }
    expect(outcomes.filter(([a, b]) => a === 200 && b === 200)).toEqual([]);
  });

  it(`never leave a route leading out of its tree: a route to an agent beside a move of that agent away (${ROUNDS} rounds)`, async () => {
    const prefix = uniqueId('route-race');
    for (let round = 0; round < ROUNDS; round++) {
      // Prepare: top → middle → target.
      const [top, middle, target] = ['top', 'middle', 'target'].map((name) => `${prefix}-${name}${round}`) as [string, string, string];
      await chain([top, middle, target]);

      // Act: the top routes to the target while the target leaves the tree.
      const answers = await Promise.all([put(top, { routes: [{ when: { note: 'x' }, to: target }] }), put(target, { parentId: null })]);

      // Assess
      expectNamedAnswers(answers);
      expect(statusesOf(answers), answers.map((answer) => answer.text).join('\n')).not.toEqual([200, 200]);
      expectRulesKept(await agentsOf(`${prefix}-`));
    }
  });

  it(`never declare one field name twice in a tree: two agents of one tree at once (${ROUNDS} rounds)`, async () => {
    const prefix = uniqueId('field-race');
    for (let round = 0; round < ROUNDS; round++) {
      // Prepare: a top with two agents below it.
      const [top, left, right] = ['top', 'left', 'right'].map((name) => `${prefix}-${name}${round}`) as [string, string, string];
      await chain([top, left]);
      expect((await put(right, { parentId: top })).status).toBe(201);

      // Act
      const answers = await Promise.all([
        put(left, { parentId: top, stateFields: { topic: field } }),
        put(right, { parentId: top, stateFields: { topic: field } }),
      ]);

      // Assess
      expectNamedAnswers(answers);
      expect(statusesOf(answers), answers.map((answer) => answer.text).join('\n')).not.toEqual([200, 200]);
      expectRulesKept(await agentsOf(`${prefix}-`));
    }
  });

  it(`never declare one field name twice in a tree: a move that brings a name in beside its declaration (${ROUNDS} rounds)`, async () => {
    const prefix = uniqueId('field-move-race');
    for (let round = 0; round < ROUNDS; round++) {
      // Prepare: a tree (top → member), and a loose agent with one below it that declares topic.
      const [top, member, mover, below] = ['top', 'member', 'mover', 'below'].map((name) => `${prefix}-${name}${round}`) as [
        string,
        string,
        string,
        string,
      ];
      await chain([top, member]);
      await chain([mover]);
      expect((await put(below, { parentId: mover, stateFields: { topic: field } })).status).toBe(201);

      // Act: the member declares topic while the mover brings its own topic into the tree.
      const answers = await Promise.all([put(member, { parentId: top, stateFields: { topic: field } }), put(mover, { parentId: top })]);

      // Assess
      expectNamedAnswers(answers);
      expect(statusesOf(answers), answers.map((answer) => answer.text).join('\n')).not.toEqual([200, 200]);
      expectRulesKept(await agentsOf(`${prefix}-`));
    }
  });

  it('keeps every rule under 50 registrations at once in one tree: declarations, moves and routes', async () => {
    // Prepare: a top with ten agents below it, none declaring anything.
    const prefix = uniqueId('rules-50');
    const top = `${prefix}-top`;
    const ids = Array.from({ length: 10 }, (_, n) => `${prefix}-${n}`);
    await chain([top]);
    for (const id of ids) expect((await put(id, { parentId: top })).status).toBe(201);

    // Act: 50 writers, each moving one agent (under the top or another agent) with a declaration
    // of one of four names, or with a route to one of the others.
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, n) => {
        const id = ids[n % 10] as string;
        const other = ids[(n * 7 + 3) % 10] as string;
        const parentId = n % 3 === 0 ? top : other === id ? top : other;
        return put(
          id,
          n % 5 === 4
            ? { parentId: top, routes: [{ when: { note: 'x' }, to: other === id ? top : other }] }
            : { parentId, stateFields: { [`f${n % 4}`]: field } },
        );
      }),
    );

    // Assess: every answer one the contract names, and the tree keeps every rule.
    expectNamedAnswers(answers);
    expect(answers.some((answer) => answer.status === 200)).toBe(true);
    expectRulesKept(await agentsOf(`${prefix}-`));
  });
});
