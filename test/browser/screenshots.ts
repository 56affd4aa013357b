/**
 * `npm run screenshots`: regenerates the inspector screenshots in docs/ from a real local
 * server and Chromium, with the data of test/browser/support.ts. Not part of `npm test`.
 */
import { fileURLToPath } from 'node:url';
import { startApi } from '../helpers/e2e.js';
import { launchChromium, seedLargeSession, seedTripSession } from './support.js';

const docs = (name: string) => fileURLToPath(new URL(`../../docs/${name}`, import.meta.url));

const api = await startApi();
const browser = await launchChromium();
try {
  for (const [sessionId, agentId, userId] of [
    ['support-7f3a', 'support', 'u-17'],
    ['research-2c91', 'researcher', 'u-08'],
    ['onboarding-51d0', 'onboarding', 'u-42'],
  ] as const) {
    await api.client.post('/v1/sessions', { sessionId, agentId, userId });
    await api.client.patch(`/v1/sessions/${sessionId}/state`, { step: 1 });
  }
  await seedLargeSession(api.client, 'long-run-9e04', 60);
  const trip = await seedTripSession(api.client, 'trip-planner-4b8e');
  await api.client.patch(`/v1/sessions/${trip.sessionId}/state?node=${trip.forkNode}`, { days: 4 });

  for (const colorScheme of ['light', 'dark'] as const) {
    const page = await browser.newPage({ viewport: { width: 1280, height: 760 }, colorScheme });
    await page.goto(api.url);
    await page.getByLabel('API key').fill('dev-key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('link', { name: trip.sessionId }).waitFor();
    if (colorScheme === 'light') await page.screenshot({ path: docs('inspector-sessions.png') });

    await page.getByRole('link', { name: trip.sessionId }).click();
    await page.locator(`[data-node-id="${trip.forkNode}"]`).click();
    await page.getByLabel(`State at node ${trip.forkNode}`).waitFor();
    await page.waitForTimeout(300);
    await page.screenshot({ path: docs(colorScheme === 'light' ? 'inspector-session.png' : 'inspector-dark.png') });

    if (colorScheme === 'light') {
      await page.locator(`[data-node-id="${trip.head}"]`).click();
      await page.getByRole('tab', { name: 'Diff' }).click();
      await page.locator('.change').first().waitFor();
      await page.waitForTimeout(300);
      await page.screenshot({ path: docs('inspector-diff.png') });
    }
    await page.close();
  }
  console.log('screenshots written to docs/');
} finally {
  await browser.close();
  await api.stop();
}
