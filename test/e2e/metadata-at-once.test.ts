import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, uniqueId } from '../helpers/api-client.js';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * A session's metadata limits (docs/api.md, `metadata`: at most 16 KiB of JSON and at most 50
 * top-level string values) hold when many `PATCH /v1/sessions/{sid}` merge into one session at
 * once, through real HTTP on DynamoDB Local: every answer `200` or the documented `400`, the
 * stored metadata within the limits, and every key a `200` added is there. The merge is
 * checked on what the session holds at the tip it commits on, so a PATCH that read an older
 * one loses its place and merges again. Its 60 writers on one session take seconds of the
 * write path's 15 s budget, so the file runs alone (vitest.config.ts).
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

const counted = (answers: Array<{ status: number }>) =>
  Object.fromEntries(
    [...new Set(answers.map((answer) => answer.status))].map((status) => [status, answers.filter((a) => a.status === status).length]),
  );

/** A session without metadata. */
async function newSession(prefix: string): Promise<string> {
  const sid = uniqueId(prefix);
  expect((await http.post('/v1/sessions', { sessionId: sid })).status).toBe(201);
  return sid;
}

describe('metadata merged by many PATCHes at once', () => {
  it('merges 60 strings at once where a session may hold 50: 50 land, 10 refused, every landed key stored', async () => {
    // Prepare
    const sid = await newSession('meta-strings');
    const keys = Array.from({ length: 60 }, (_, n) => `k${n}`);

    // Act: each PATCH adds a key of its own.
    const answers = await Promise.all(keys.map((key) => http.patch(`/v1/sessions/${sid}`, { metadata: { [key]: `v-${key}` } })));

    // Assess
    expect(counted(answers)).toEqual({ 200: 50, 400: 10 });
    for (const refused of answers.filter((answer) => answer.status === 400))
      expect(refused.body).toMatchObject({ code: 'invalid_request', field: 'metadata' });
    const landed = keys.filter((_, n) => answers[n]?.status === 200);
    const stored = (await http.get(`/v1/sessions/${sid}`)).body.metadata as Record<string, string>;
    expect(stored).toEqual(Object.fromEntries(landed.map((key) => [key, `v-${key}`])));
  });

  it('merges 20 strings of 1 KiB at once where metadata may be 16 KiB of JSON: the 15 that fit land, every landed key stored', async () => {
    // Prepare: how many such keys fit in 16 KiB of JSON (all keys and values the same length).
    const sid = await newSession('meta-size');
    const keys = Array.from({ length: 20 }, (_, n) => `big-${String(n).padStart(2, '0')}`);
    const value = (key: string) => `${key}:`.padEnd(1024, 'x');
    const bytesOf = (count: number) =>
      Buffer.byteLength(JSON.stringify(Object.fromEntries(keys.slice(0, count).map((k) => [k, value(k)]))));
    const fit = keys.filter((_, n) => bytesOf(n + 1) <= 16 * 1024).length;

    // Act
    const answers = await Promise.all(keys.map((key) => http.patch(`/v1/sessions/${sid}`, { metadata: { [key]: value(key) } })));

    // Assess
    expect(fit).toBe(15);
    expect(counted(answers)).toEqual({ 200: fit, 400: keys.length - fit });
    for (const refused of answers.filter((answer) => answer.status === 400))
      expect(refused.body).toMatchObject({ code: 'invalid_request', field: 'metadata' });
    const landed = keys.filter((_, n) => answers[n]?.status === 200);
    const stored = (await http.get(`/v1/sessions/${sid}`)).body.metadata as Record<string, string>;
    expect(stored).toEqual(Object.fromEntries(landed.map((key) => [key, value(key)])));
    expect(Buffer.byteLength(JSON.stringify(stored))).toBeLessThanOrEqual(16 * 1024);
  });
});
