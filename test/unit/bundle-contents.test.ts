import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { type RouteGroup, routeGroups } from '../../functions/http/routes.js';

const root = fileURLToPath(new URL('../../', import.meta.url));

/**
 * The source files whose code ends up in a Lambda's bundle, bundled the way lib/agent-state.ts
 * does (files that tree shaking empties do not count).
 */
async function bundledInputs(entry: string): Promise<string[]> {
  const result = await build({
    entryPoints: [`${root}${entry}`],
    bundle: true,
    write: false,
    metafile: true,
    platform: 'node',
    format: 'esm',
    target: 'node22',
    mainFields: ['module', 'main'],
    logLevel: 'silent',
  });
  const [output] = Object.values(result.metafile.outputs);
  return Object.entries(output?.inputs ?? {})
    .filter(([, input]) => input.bytesInOutput > 0)
    .map(([path]) => path);
}

describe('public route groups', () => {
  // /health and the inspector's files need no key and no table. Their functions must not load
  // the services, the AWS SDK or zod: a megabyte each, for nothing, on every cold start.
  it.each(['functions/http/health.ts', 'functions/http/inspector.ts'])('%s bundles without the SDK, zod or the store', async (entry) => {
    const inputs = await bundledInputs(entry);
    expect(inputs).toContain(entry);
    const heavy = inputs.filter((input) => /node_modules\/(@aws-sdk|@smithy|zod)\/|functions\/(store|core\/session-service)/.test(input));
    expect(heavy).toEqual([]);
  });

  it('a group with routes that need a key does load them (the check above can see them)', async () => {
    const inputs = await bundledInputs('functions/http/state.ts');
    expect(inputs.some((input) => input.includes('node_modules/@aws-sdk/'))).toBe(true);
    expect(inputs.some((input) => input.includes('node_modules/zod/'))).toBe(true);
  });
});

/**
 * What a route group's function may carry beyond what every keyed group shares: each heavy
 * module, and the groups whose routes use it. Any other group that takes one in (a part named
 * where it is not used, an import that drags a store along) fails here, so the wiring cannot
 * grow back into one set of services for every function.
 */
const usedOnlyBy: ReadonlyArray<{ module: string; groups: readonly RouteGroup[] }> = [
  // decide calls workers; the Lambda client is how it calls a `lambda:` one.
  { module: 'node_modules/@aws-sdk/client-lambda/', groups: ['decide'] },
  { module: 'functions/core/decide-service.ts', groups: ['decide'] },
  // The registry checks a worker's URL where it is registered (agents) and decide before a call.
  { module: 'functions/workers/call-worker.ts', groups: ['agents', 'decide'] },
  { module: 'functions/workers/module-worker.ts', groups: ['agents', 'decide'] },
  { module: 'functions/core/commit-service.ts', groups: ['commits'] },
  { module: 'functions/store/memory-store.ts', groups: ['memory'] },
  { module: 'functions/core/memory-service.ts', groups: ['memory'] },
  { module: 'functions/store/webhook-store.ts', groups: ['webhooks'] },
  { module: 'functions/core/webhooks.ts', groups: ['webhooks'] },
  { module: 'functions/workers/webhook-delivery.ts', groups: ['webhooks'] },
  // Outbound requests: workers (decide), webhooks, and the URL rules the registry checks.
  { module: 'functions/workers/outbound.ts', groups: ['agents', 'decide', 'webhooks'] },
  { module: 'functions/store/session-store.ts', groups: ['sessions', 'tree', 'state', 'agents', 'decide', 'commits'] },
  { module: 'functions/core/session-service.ts', groups: ['sessions', 'tree', 'state'] },
  // The contract is a file beside the health bundle (lib/ copies it); the code that generates
  // it, and the document itself, are in no bundle.
  { module: 'docs/openapi.json', groups: [] },
  { module: 'functions/http/contract/', groups: [] },
];

describe('each route group bundles only what its routes use', () => {
  const bundles = new Map<RouteGroup, Promise<string[]>>();
  const inputsOf = (group: RouteGroup) => {
    if (!bundles.has(group)) bundles.set(group, bundledInputs(`functions/http/${group}.ts`));
    return bundles.get(group) as Promise<string[]>;
  };

  it.each(routeGroups)('%s', async (group) => {
    // Act: the group's function bundled as lib/agent-state.ts bundles it (the SDK included).
    const inputs = await inputsOf(group);

    // Assess: every heavy module it carries is one its routes use.
    const carried = usedOnlyBy.filter(({ module }) => inputs.some((input) => input.includes(module)));
    const strays = carried.filter(({ groups }) => !groups.includes(group)).map(({ module }) => module);
    expect(strays).toEqual([]);
  });

  it('sees a module where a group does use it (the check above is not blind)', async () => {
    for (const { module, groups } of usedOnlyBy) {
      for (const group of groups)
        expect(
          (await inputsOf(group)).some((input) => input.includes(module)),
          `${module} in ${group}`,
        ).toBe(true);
    }
  });
});

/**
 * The two consumers of the stream are two functions, each with an entry of its own: what one
 * consumer does is in no bundle of the other (they shared one entry, and so each bundle, until
 * issue 20).
 */
const streamConsumers: ReadonlyArray<{ entry: string; own: readonly string[] }> = [
  {
    // Live sync, the event bus, the upkeep.
    entry: 'functions/streams/change-hook.ts',
    own: [
      'functions/ws/broadcast.ts',
      'functions/ws/connections.ts',
      'functions/streams/event-bus.ts',
      'node_modules/@aws-sdk/client-eventbridge/',
      'node_modules/@aws-sdk/client-apigatewaymanagementapi/',
      'functions/store/live-store.ts',
      'functions/store/memory-upkeep-store.ts',
    ],
  },
  {
    // The webhook deliveries, queued; webhook secrets opened with the sealing key.
    entry: 'functions/streams/webhook-hook.ts',
    own: [
      'functions/streams/webhook-queue.ts',
      'node_modules/@aws-sdk/client-sqs/',
      'functions/store/webhook-store.ts',
      'functions/workers/webhook-delivery.ts',
      'functions/store/key-ring.ts',
      'node_modules/@aws-sdk/client-kms/',
    ],
  },
];

describe('each stream consumer bundles only its own code', () => {
  it.each(streamConsumers)('$entry', async ({ entry, own }) => {
    // Act
    const inputs = await bundledInputs(entry);

    // Assess: everything it does is there; nothing the other consumer does is.
    const carries = (module: string) => inputs.some((input) => input.includes(module));
    expect(own.filter((module) => !carries(module))).toEqual([]);
    const others = streamConsumers.filter((consumer) => consumer.entry !== entry).flatMap((consumer) => consumer.own);
    expect(others.filter(carries)).toEqual([]);
  });
});

describe('the OpenAPI document beside the health bundle', () => {
  it('is served by the bundled function as Lambda runs it, equal to docs/openapi.json', async () => {
    // Prepare: the health function bundled as lib/agent-state.ts bundles it, written out with
    // the document copied beside it (as the stack does), and imported.
    const dir = mkdtempSync(join(os.tmpdir(), 'agentstate-health-bundle-'));
    const env = { ...process.env };
    try {
      copyFileSync(`${root}docs/openapi.json`, join(dir, 'openapi.json'));
      process.env.AGENTSTATE_OPENAPI_FILE = join(dir, 'openapi.json');
      await build({
        entryPoints: [`${root}functions/http/health.ts`],
        outfile: join(dir, 'index.mjs'),
        bundle: true,
        platform: 'node',
        format: 'esm',
        target: 'node22',
        mainFields: ['module', 'main'],
        logLevel: 'silent',
      });
      const { handler } = (await import(pathToFileURL(join(dir, 'index.mjs')).href)) as {
        handler: (event: unknown, context: unknown) => Promise<{ statusCode: number; body: string }>;
      };

      // Act
      const answer = await handler(
        {
          version: '2.0',
          routeKey: 'GET /v1/openapi.json',
          rawPath: '/v1/openapi.json',
          rawQueryString: '',
          headers: {},
          requestContext: { http: { method: 'GET', path: '/v1/openapi.json' }, requestId: 'r1' },
          isBase64Encoded: false,
        },
        {},
      );

      // Assess
      expect(answer.statusCode).toBe(200);
      expect(JSON.parse(answer.body)).toEqual(JSON.parse(readFileSync(`${root}docs/openapi.json`, 'utf8')));
    } finally {
      process.env = env;
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('zod in a bundle', () => {
  // `import { z } from 'zod'` takes zod's whole namespace object, every locale with it (about
  // 440 KiB minified); `import * as z` lets esbuild keep only what the schemas use.
  it('brings no locale but English', async () => {
    const inputs = await bundledInputs('functions/http/agents.ts');
    const locales = inputs.filter((input) => /node_modules\/zod\/.*\/locales\//.test(input) && !/\/(en|index)\.js$/.test(input));
    expect(locales).toEqual([]);
  });
});
