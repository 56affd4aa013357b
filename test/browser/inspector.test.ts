import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';
import { launchChromium, seedLargeSession, seedTripSession, type TripSession } from './support.js';

/**
 * The inspector page in a real Chromium against a real local server (`npm start`: the page,
 * the API and the WebSocket on one port, DynamoDB Local underneath). Nothing is mocked.
 */
describe('inspector page', () => {
  let api: RunningApi;
  let browser: Browser;
  let page: Page;
  let trip: TripSession;

  beforeAll(async () => {
    // History is pruned at most once a second per session here (a minute by default).
    [api, browser] = await Promise.all([startApi({ AGENTSTATE_PRUNE_INTERVAL_SECONDS: '1' }), launchChromium()]);
    trip = await seedTripSession(api.client, uniqueId('trip'));
    page = await browser.newPage({ viewport: { width: 1360, height: 860 } });
    page.setDefaultTimeout(10_000);
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await api?.stop();
  });

  const row = (nodeId: string) => page.locator(`[role="treeitem"][data-node-id="${nodeId}"]`);
  const tab = (name: string) => page.getByRole('tab', { name });

  it('signs in with an API key and lists the sessions, searchable by id', async () => {
    // Prepare
    await page.goto(api.url);

    // Act
    await page.getByLabel('API key').fill('not-a-key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('not accepted');
    await page.getByLabel('API key').fill('dev-key');
    await page.getByRole('button', { name: 'Sign in' }).click();

    // Assess
    await page.getByRole('link', { name: trip.sessionId }).waitFor();
    expect(await page.evaluate("sessionStorage.getItem('agentstate.inspector.apiKey')")).toBe('dev-key');
    expect(await page.evaluate('localStorage.length')).toBe(0);

    await page.getByLabel('Search by session id').fill('no-such-prefix');
    await page.getByText('No session id starts with').waitFor();
    await page.getByLabel('Search by session id').fill(trip.sessionId.slice(0, 10));
    await page.getByRole('link', { name: trip.sessionId }).waitFor();
  });

  it('opens a session: the tree with its head and fork marked, each node with role and snippet', async () => {
    // Act
    await page.getByRole('link', { name: trip.sessionId }).click();

    // Assess
    await row(trip.head).waitFor();
    expect(await page.locator('[role="treeitem"]').count()).toBe(7);
    await expect.poll(() => row(trip.head).getAttribute('aria-label')).toMatch(/^assistant a2b, head,/);
    expect(await row(trip.forkNode).getAttribute('aria-label')).toContain('fork with 2 branches');
    expect(await row(trip.forkNode).textContent()).toContain('When are you travelling');
    // The second message's content is a list of parts; its snippet is their text.
    expect(await row('a2').textContent()).toContain('Day 1: Alfama');
    expect(await row('u1').locator('.role').textContent()).toBe('user');
    // The head is selected first.
    expect(await page.locator('#node-title').textContent()).toBe(trip.head);
  });

  it('shows the state at the fork point, its agent config and its lineage', async () => {
    // Act
    await row(trip.forkNode).click();

    // Assess: the fork point still reads version 1, whatever its branches wrote later.
    await expect.poll(() => page.locator('#node-title').textContent()).toBe(trip.forkNode);
    const state = page.getByLabel(`State at node ${trip.forkNode}`);
    await expect.poll(() => state.textContent()).toContain('"destination": "Lisbon"');
    expect(await state.textContent()).not.toContain('Porto');
    expect(await page.getByText('The state this node reads: version 1').count()).toBe(1);

    await tab('Lineage').click();
    await expect.poll(() => page.locator('.lineage-item').count()).toBe(1);
    expect(await page.locator('.lineage-item').first().textContent()).toContain('patch at a1');
  });

  it('moves through the tree with the keyboard', async () => {
    // Act: from the fork point, down to its first child, then to its parent and back.
    await page.getByRole('tree').focus();
    await page.keyboard.press('ArrowRight');
    await expect.poll(() => page.locator('#node-title').textContent()).toBe('u2');
    await page.keyboard.press('ArrowLeft');
    await expect.poll(() => page.locator('#node-title').textContent()).toBe(trip.forkNode);
    await page.keyboard.press('End');

    // Assess
    await expect.poll(() => page.locator('#node-title').textContent()).toBe(trip.head);
    expect(await page.getByRole('tree').getAttribute('aria-activedescendant')).toBe(await row(trip.head).getAttribute('id'));
  });

  it('diffs two versions', async () => {
    // Act: the head's version (3) against the one it was made from (1), the default pair.
    await tab('Diff').click();

    // Assess
    const summary = page.locator('.diff-summary');
    await expect.poll(() => summary.textContent()).toContain('v1 → v3');
    const changes = await page.locator('.change').allTextContents();
    expect(changes.find((change) => change.includes('state.destination'))).toMatch(/changed.*"Lisbon".*"Porto"/s);
    expect(changes.some((change) => change.includes('state.plan[0]'))).toBe(true);

    // Any two versions: 1 → 2 (the first branch's write).
    await page.getByLabel('From version').fill('1');
    await page.getByLabel('To version').fill('2');
    await page.getByRole('button', { name: 'Compare' }).click();
    await expect.poll(() => summary.textContent()).toContain('v1 → v2');
    expect(await page.locator('.change').allTextContents()).toContainEqual(expect.stringMatching(/added\s*state\.month/));
  });

  it('shows a change the moment it happens, over the WebSocket', async () => {
    // Prepare: the fork point is open, the page is following the session.
    await row(trip.forkNode).click();
    await tab('State').click();
    await page.getByText('Live', { exact: true }).waitFor();

    // Act: another client writes at the fork point.
    const write = await api.client.patch(`/v1/sessions/${trip.sessionId}/state?node=${trip.forkNode}`, { days: 4 });
    expect(write.status).toBe(200);

    // Assess: the event arrives in the feed, and the state shown is reread, without a reload.
    const feed = page.locator('.feed-item');
    await expect
      .poll(() => feed.first().textContent(), { timeout: 10_000 })
      .toMatch(new RegExp(`v${write.body.version}\\s*patch at\\s*${trip.forkNode}`));
    await expect.poll(() => page.getByLabel(`State at node ${trip.forkNode}`).textContent()).toContain('"days": 4');
    // The session header is reread on its own request, which may finish a moment later.
    await expect.poll(() => page.getByTestId('session-version').textContent()).toBe(String(write.body.version));
  });

  it('switches the head from the page', async () => {
    // Act
    await row(trip.firstBranchEnd).click();
    await page.getByRole('button', { name: 'Make head' }).click();

    // Assess: the API agrees, and the tree marks the new head.
    await expect.poll(async () => (await api.client.get(`/v1/sessions/${trip.sessionId}`)).body.head).toBe(trip.firstBranchEnd);
    await expect.poll(() => row(trip.firstBranchEnd).getAttribute('aria-label')).toContain(', head,');
    expect(await row(trip.head).getAttribute('aria-label')).not.toContain(', head,');
  });

  it('shows which agent decided each turn, and why', async () => {
    // Prepare: support routes to billing once an order is named (no workers: each decision is
    // what the caller proposed, decided by the agent routing chose).
    const support = uniqueId('support');
    const billing = uniqueId('billing');
    expect((await api.client.put(`/v1/agents/${support}`, {})).status).toBe(201);
    expect((await api.client.put(`/v1/agents/${billing}`, { parentId: support })).status).toBe(201);
    const routes = [{ when: { order_id: { $exists: true } }, to: billing }];
    expect((await api.client.put(`/v1/agents/${support}`, { routes })).status).toBe(200);
    const sessionId = uniqueId('routed');
    expect((await api.client.post('/v1/sessions', { sessionId, agentId: support })).status).toBe(201);
    const decide = (proposed: object) => api.client.post(`/v1/sessions/${sessionId}/decide`, { trigger: { type: 'tick' }, proposed });
    expect((await decide({ state: { step: 1 } })).status).toBe(200);
    expect((await api.client.patch(`/v1/sessions/${sessionId}/state`, { order_id: 'o-1' })).status).toBe(200);
    expect((await decide({ state: { step: 2, order_id: 'o-1' } })).status).toBe(200);

    // Act
    await page.goto(`${api.url}/#/s/${sessionId}`);

    // Assess: newest first, the routed decision says who routed it and by which route.
    const items = page.locator('.decision-item');
    await expect.poll(() => items.count()).toBe(2);
    expect(await items.nth(0).textContent()).toContain(`${billing} decided: ${support} routed it (route 0)`);
    expect(await items.nth(1).textContent()).toContain(`${support} decided (the session's agent)`);
  });

  it("shows the client's tagged values as the values they stand for", async () => {
    // Prepare: a state a session handle wrote with a Date, a Map, a BigInt and a `$` key.
    const sessionId = uniqueId('rich');
    const written = await api.client.put(`/v1/sessions/${sessionId}/state`, {
      due: { $as: 'Date', $v: '2026-01-02T00:00:00.000Z' },
      tags: { $as: 'Map', $v: [['a', 1]] },
      count: { $as: 'BigInt', $v: '10' },
      $$note: 'kept',
    });
    expect(written.status).toBe(200);

    // Act
    await page.goto(`${api.url}/#/s/${sessionId}`);
    await row('root').click();

    // Assess
    const state = page.getByLabel('State at node root');
    await expect.poll(() => state.textContent()).toContain('"due": Date 2026-01-02T00:00:00.000Z');
    const text = await state.textContent();
    expect(text).toContain('"tags": Map(1) {');
    expect(text).toContain('"a" => 1');
    expect(text).toContain('"count": 10n');
    expect(text).toContain('"$note": "kept"');
    expect(text).not.toContain('$as');
    expect(await state.locator('.j-tag').first().textContent()).toBe('Date 2026-01-02T00:00:00.000Z');
  });

  it('stays responsive with hundreds of nodes: only the rows in view are drawn', async () => {
    // Prepare: 200 turns, a branch every 10 → 421 nodes.
    const sessionId = uniqueId('large');
    const total = await seedLargeSession(api.client, sessionId, 200);

    // Act
    await page.goto(`${api.url}/#/s/${sessionId}`);
    await row('r200').waitFor();

    // Assess: the head (the last row) is scrolled into view, and the DOM holds a window, not 421 rows.
    expect(await page.locator('.tree-canvas').evaluate((element) => element.getBoundingClientRect().height)).toBe(total * 34);
    expect(await page.locator('[role="treeitem"]').count()).toBeLessThan(80);
    await page.getByRole('tree').focus();
    await page.keyboard.press('Home');
    await row('root').waitFor();
    expect(await row('r200').count()).toBe(0);
    await page.keyboard.press('PageDown');
    await page.keyboard.press('PageDown');
    await expect.poll(() => page.locator('#node-title').textContent()).not.toBe('root');
  }, 60_000);

  it("opens a 4 MiB state collapsed, pages through it, and shows a version's change as a diff and a JSON Patch", async () => {
    // Prepare: a 4 MiB state, then one entry appended with JSON Patch.
    const sessionId = uniqueId('big-state');
    const log = Array.from({ length: 3800 }, (_, n) => ({ id: `m${n}`, text: `${n} ${'what the agent noted on the way '.repeat(32)}` }));
    expect((await api.client.put(`/v1/sessions/${sessionId}/state`, { log, turns: 0 })).status).toBe(200);
    const appended = await api.client.request('PATCH', `/v1/sessions/${sessionId}/state`, {
      json: [{ op: 'add', path: '/log/-', value: { id: 'last', text: 'the newest line' } }],
      contentType: 'application/json-patch+json',
    });
    expect(appended.status).toBe(200);

    // Act: open the session; the head is the root, its state the large one.
    await page.goto(`${api.url}/#/s/${sessionId}`);
    await row('root').click();
    const state = page.getByLabel('State at node root');
    await page.getByText(/A large state \(3\.\d MiB\)/).waitFor();

    // Assess: a few rows, not 3,801 entries; the log opens a page at a time.
    expect(await state.locator('*').count()).toBeLessThan(60);
    await state.getByRole('button', { name: /"log": \[ 3801 items \]/ }).click();
    const entries = state.locator('.tree-members .tree-members > .tree-node');
    await expect.poll(() => entries.count()).toBe(100);
    await state.getByRole('button', { name: 'Show 100 more of 3701' }).click();
    await expect.poll(() => entries.count()).toBe(200);
    expect(await state.locator('*').count()).toBeLessThan(2000);
    await entries.first().getByRole('button').click();
    await expect.poll(() => entries.first().textContent()).toContain('"id": "m0"');

    // Assess: the version's change, path by path and as the operation that made it.
    await tab('Diff').click();
    await expect.poll(() => page.locator('.diff-summary').textContent()).toContain('v1 → v2: 1 difference');
    expect(await page.locator('.change-pointer').textContent()).toBe('/log/3800');
    await page.getByText("The state's change as JSON Patch (RFC 6902): 1 operation").click();
    const patch = JSON.parse((await page.getByLabel('JSON Patch').textContent()) ?? '');
    expect(patch).toEqual([{ op: 'add', path: '/log/3800', value: { id: 'last', text: 'the newest line' } }]);
  }, 60_000);

  it("shows the session's retention and where its history was pruned", async () => {
    // Prepare: ten versions at the root, then a window of 2; the change hook prunes the rest.
    const sessionId = uniqueId('pruned');
    for (let n = 0; n < 10; n++) expect((await api.client.patch(`/v1/sessions/${sessionId}/state`, { n })).status).toBe(200);
    expect((await api.client.patch(`/v1/sessions/${sessionId}`, { retention: { keepVersions: 2 } })).status).toBe(200);
    expect((await api.client.patch(`/v1/sessions/${sessionId}/state`, { n: 10 })).status).toBe(200);
    // Until the newest version the window leaves out (v9 of v1..v11) is gone: waiting for v1
    // alone let the page read its lineage once in the middle of the prune (8 items where 2 stay).
    await expect.poll(async () => (await api.client.get(`/v1/sessions/${sessionId}/versions/9`)).status, { timeout: 15_000 }).toBe(410);

    // Act
    await page.goto(`${api.url}/#/s/${sessionId}`);
    await row('root').click();
    await tab('Lineage').click();

    // Assess: the header says what it keeps; the lineage says where it was cut.
    await expect.poll(() => page.getByTestId('session-retention').textContent()).toBe('keeps newest 2');
    await expect.poll(() => page.locator('.lineage-item').count()).toBe(2);
    expect(await page.getByTestId('lineage-pruned').textContent()).toContain('History pruned below v10');
  }, 30_000);
});
