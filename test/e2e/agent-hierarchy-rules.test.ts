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

/** Registers `ids` in a line, each under the one before (the first at the top, or under `under`). */
async function chain(ids: readonly string[], under?: string): Promise<void> {
  for (const [index, id] of ids.entries()) {
    const parentId = index === 0 ? under : ids[index - 1];
    const answer = await http.put(`/v1/agents/${id}`, parentId === undefined ? {} : { parentId });
    expect(answer.status, answer.text).toBe(201);
  }
}

const put = (id: string, body: unknown) => http.put(`/v1/agents/${id}`, body);
const statusesOf = (answers: ApiResponse[]) => answers.map((answer) => answer.status);

/**
 * Registers `ids` at the top, all at once: a new agent without a parent, fields or routes is
 * one the registry's rules do not concern (agent-service.ts `ruled`), so these wait for nothing
 * and nothing waits for them. The rounds of a race make their top agents so before the first
 * round, each round's race unchanged; what goes below a parent is still made in its round.
 */
async function tops(ids: readonly string[]): Promise<void> {
  const answers = await Promise.all(ids.map((id) => put(id, {})));
  expect(statusesOf(answers), answers.map((answer) => answer.text).join('\n')).toEqual(ids.map(() => 201));
}

/**
 * The ids of the depth tests begin with `deep`: each hangs its own agents below one line of 30
 * (levels 1 to 30), and each checks the rules over all of them, the line included, since an
 * agent's level counts the line above it.
 */
const deep = uniqueId('deep');
let deepLine: Promise<string[]> | undefined;
/**
 * The line of 30, registered once for the three tests that hang their agents below its 29th
 * and 30th (by whichever runs first) rather than once by each: 30 registrations one after
 * another, each a round trip. None of the three moves an agent of the line, and what each
 * hangs below it is its own, so none changes what another's rules are checked against.
 */
function lineOf30(): Promise<string[]> {
  deepLine ??= (async () => {
    const line = Array.from({ length: MAX_DEPTH - 2 }, (_, n) => `${deep}-line-${n}`);
    await chain(line);
    return line;
  })();
  return deepLine;
}

/** Each registration landed or was refused by a rule: none gave up waiting for the others (409). */
function expectNamedAnswers(answers: ApiResponse[]): void {
  for (const answer of answers) expect([200, 201, 400], answer.text).toContain(answer.status);
}

describe('at most 32 levels', { timeout }, () => {
  it('takes an agent at level 32 and refuses one at level 33 with 400, writing nothing', async () => {
    // Prepare: a line of 31 agents (the shared 30, and one of this test's own below them).
    const prefix = `${deep}-new`;
    const line = [...(await lineOf30()), `${prefix}-31st`];
    await chain(line.slice(-1), line.at(-2));

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
    const prefix = `${deep}-move`;
    const line = await lineOf30();
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
    expectRulesKept(await agentsOf(deep));
  });
});

describe('registrations at once that each keep the rules alone', { timeout }, () => {
  it(`never make a hierarchy deeper than 32: a move under a deep line beside a move under the mover's leaf (${ROUNDS} rounds)`, async () => {
    const prefix = `${deep}-race`;
    const line = await lineOf30();
    await tops(Array.from({ length: ROUNDS }, (_, round) => [`${prefix}-m${round}`, `${prefix}-x${round}`]).flat());
    const outcomes: number[][] = [];
    for (let round = 0; round < ROUNDS; round++) {
      // Prepare: a mover with one agent below it, and a loose agent (both at the top). The mover
      // under the line's last is at 31 and its child at 32; the loose one under that child alone is at 3.
      const mover = `${prefix}-m${round}`;
      const leaf = `${prefix}-l${round}`;
      const loose = `${prefix}-x${round}`;
      expect((await put(leaf, { parentId: mover })).status).toBe(201);

      // Act
      const answers = await Promise.all([put(mover, { parentId: line.at(-1) }), put(loose, { parentId: leaf })]);

      // Assess
      expectNamedAnswers(answers);
      outcomes.push(statusesOf(answers));
      expectRulesKept(await agentsOf(deep));
      // Put the line back free for the next round.
      expect((await put(mover, {})).status).toBeLessThan(300);
    }
    expect(outcomes.filter(([a, b]) => a === 200 && b === 200)).toEqual([]);
  });

  it(`never leave a route leading out of its tree: a route to an agent beside a move of that agent away (${ROUNDS} rounds)`, async () => {
    const prefix = uniqueId('route-race');
    await tops(Array.from({ length: ROUNDS }, (_, round) => `${prefix}-top${round}`));
    for (let round = 0; round < ROUNDS; round++) {
      // Prepare: top → middle → target (the top made before the rounds).
      const [top, middle, target] = ['top', 'middle', 'target'].map((name) => `${prefix}-${name}${round}`) as [string, string, string];
      await chain([middle, target], top);

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
    await tops(Array.from({ length: ROUNDS }, (_, round) => `${prefix}-top${round}`));
    for (let round = 0; round < ROUNDS; round++) {
      // Prepare: a top (made before the rounds) with two agents below it.
      const [top, left, right] = ['top', 'left', 'right'].map((name) => `${prefix}-${name}${round}`) as [string, string, string];
      await chain([left], top);
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
    await tops(Array.from({ length: ROUNDS }, (_, round) => [`${prefix}-top${round}`, `${prefix}-mover${round}`]).flat());
    for (let round = 0; round < ROUNDS; round++) {
      // Prepare: a tree (top → member), and a loose agent with one below it that declares topic
      // (top and mover made before the rounds).
      const [top, member, mover, below] = ['top', 'member', 'mover', 'below'].map((name) => `${prefix}-${name}${round}`) as [
        string,
        string,
        string,
        string,
      ];
      await chain([member], top);
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
