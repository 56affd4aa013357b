import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';
import { launchChromium } from './support.js';

/**
 * The inspector's memory view in a real Chromium against a real local server: namespaces,
 * items found by a search with a filter, an item's value (tagged values shown as values) and
 * its versions. Nothing is mocked.
 */
describe('inspector page: memory items', () => {
  let api: RunningApi;
  let browser: Browser;
  let page: Page;
  const user = uniqueId('u');
  const item = (namespace: string[], key: string) => `/v1/memory/${[...namespace, key].join('/')}`;

  beforeAll(async () => {
    [api, browser] = await Promise.all([startApi(), launchChromium()]);
    const put = async (namespace: string[], key: string, value: object) => {
      const response = await api.client.put(item(namespace, key), { value });
      if (response.status >= 300) throw new Error(`put ${key}: ${response.status} ${response.text}`);
    };
    await put(['users', user, 'facts'], 'diet', { topic: 'food', score: 0.4 });
    await put(['users', user, 'facts'], 'diet', { topic: 'food', score: 0.9, since: { $as: 'Date', $v: '2019-01-01T00:00:00.000Z' } });
    await put(['users', user, 'facts'], 'city', { topic: 'travel', score: 0.7 });
    await put(['users', user, 'notes'], 'n1', { topic: 'travel', score: 0.1 });
    page = await browser.newPage({ viewport: { width: 1360, height: 860 } });
    page.setDefaultTimeout(10_000);
    await page.goto(api.url);
    await page.getByLabel('API key').fill('dev-key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Sessions' }).waitFor();
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await api?.stop();
  });

  const results = () => page.locator('table.sessions tbody tr th a');

  it('browses namespaces from the top, one level at a time', async () => {
    // Act
    await page.getByRole('link', { name: 'Memory', exact: true }).click();
    await page.getByRole('link', { name: 'users', exact: true }).click();
    await page.getByRole('link', { name: `users/${user}`, exact: true }).click();

    // Assess
    await expect
      .poll(() => page.locator('.namespace-list a').allTextContents(), { timeout: 10_000 })
      .toEqual([`users/${user}/facts`, `users/${user}/notes`]);
    expect(await page.getByRole('navigation', { name: 'Namespace' }).textContent()).toContain(`users / ${user}`);
    await expect.poll(() => results().allTextContents()).toEqual(['n1', 'city', 'diet']);
  });

  it('searches with a filter, and says what is wrong with one that is not', async () => {
    // Act
    await page.getByLabel('Filter (JSON)').fill('{"topic": "travel", "score": {"$gte": 0.5}}');
    await page.getByRole('button', { name: 'Search' }).click();
    await expect.poll(() => results().allTextContents()).toEqual(['city']);
    await page.getByLabel('Filter (JSON)').fill('{"score": {"$near": 1}}');
    await page.getByRole('button', { name: 'Search' }).click();
    const refusal = await page.getByRole('alert').textContent();
    await page.getByLabel('Filter (JSON)').fill('{topic');
    await page.getByRole('button', { name: 'Search' }).click();

    // Assess
    expect(refusal).toContain('unknown operator $near');
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('The filter is not JSON');
    expect(await results().count()).toBe(0);
  });

  it('opens an item: its value with tagged values as values, and each version it had', async () => {
    // Prepare
    await page.getByLabel('Filter (JSON)').fill('');
    await page.getByRole('button', { name: 'Search' }).click();

    // Act
    await page.getByRole('link', { name: 'diet', exact: true }).click();

    // Assess
    const current = page.getByLabel('Value of diet at version 2');
    await expect.poll(() => current.textContent()).toContain('"since": Date 2019-01-01T00:00:00.000Z');
    expect(await page.getByTestId('item-version').textContent()).toBe('2');
    await expect.poll(() => page.getByRole('list', { name: 'Versions of diet' }).locator('li').count(), { timeout: 10_000 }).toBe(2);
    await page.getByRole('button', { name: 'Show v1' }).click();
    await expect.poll(() => page.getByLabel('Value of diet at version 1').textContent()).toContain('"score": 0.4');
    expect(await page.getByText('Version 1, replaced later').count()).toBe(1);
  });

  it('says so when the item in the address does not exist', async () => {
    await page.goto(`${api.url}/#/memory/users/${user}/facts?key=nothing-here`);

    await expect.poll(() => page.getByRole('alert').textContent()).toContain(`No item nothing-here in users/${user}/facts`);
  });
});
