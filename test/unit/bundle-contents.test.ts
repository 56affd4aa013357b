import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { type RouteGroup, routeGroups } from '../../functions/http/contract/routes.js';
import { lambdaBundling } from '../../lib/bundling.js';
import { deployedEntries } from '../../lib/entries.js';

const root = fileURLToPath(new URL('../../', import.meta.url));

interface Bundle {
  /**
   * The source files whose code the function can run: in the file Lambda imports, or in a chunk
   * it imports, at once or on first use (files tree shaking empties do not count). esbuild may
   * write a chunk that nothing imports (a dynamic import in code tree shaking removed); no
   * function can run it, so it does not count.
   */
  shipped: string[];
  /** Of those, the ones in the file Lambda imports and the chunks it imports statically: what a cold start loads. */
  loaded: string[];
  /** The code a cold start loads: those files' text. */
  loadedCode: string;
}

/**
 * Each entry's bundle, built once for the whole file: the tests ask for the same entries again
 * and again (the decide group's for five of them), and a build of the same sources with the
 * same options is the same bundle. Building every entry anew took about 2.5 times as long.
 */
const built = new Map<string, Promise<Bundle>>();

/** A Lambda's bundle, built as lib/agent-state.ts builds it (lib/bundling.ts: split at dynamic imports). */
function bundleOf(entry: string): Promise<Bundle> {
  let bundle = built.get(entry);
  if (!bundle) {
    bundle = buildBundle(entry);
    built.set(entry, bundle);
  }
  return bundle;
}

async function buildBundle(entry: string): Promise<Bundle> {
  const result = await build({
    ...lambdaBundling,
    entryPoints: [`${root}${entry}`],
    absWorkingDir: root,
    outdir: join(os.tmpdir(), 'agentstate-bundle-contents'),
    write: false,
    metafile: true,
    logLevel: 'silent',
  });
  const { outputs } = result.metafile;
  const codeOf = (output: string) =>
    Object.entries(outputs[output]?.inputs ?? {})
      .filter(([, input]) => input.bytesInOutput > 0)
      .map(([path]) => path);
  const entryFile = Object.keys(outputs).find((output) => outputs[output]?.entryPoint !== undefined && output.endsWith('index.mjs'));
  const outputsReached = (kinds: readonly string[]) => {
    const files = new Set<string>();
    const visit = (output: string) => {
      if (files.has(output)) return;
      files.add(output);
      for (const imported of outputs[output]?.imports ?? []) if (kinds.includes(imported.kind) && !imported.external) visit(imported.path);
    };
    if (entryFile) visit(entryFile);
    return [...files];
  };
  const loadedOutputs = outputsReached(['import-statement']);
  const textOf = new Map(result.outputFiles.map((file) => [file.path, file.text]));
  return {
    shipped: outputsReached(['import-statement', 'dynamic-import']).flatMap(codeOf),
    loaded: loadedOutputs.flatMap(codeOf),
    loadedCode: loadedOutputs.map((output) => textOf.get(resolve(root, output)) ?? '').join('\n'),
  };
}

/** The source files whose code ends up in a Lambda's bundle, in any of its files. */
async function bundledInputs(entry: string): Promise<string[]> {
  return (await bundleOf(entry)).shipped;
}

describe('public route groups', () => {
  // /health and the inspector's files need no key and no table. Their functions must not load
  // the services, the AWS SDK or zod: a megabyte each, for nothing, on every cold start.
  it.each(['functions/http/handlers/health.ts', 'functions/http/handlers/inspector.ts'])(
    '%s bundles without the SDK, zod or the store',
    async (entry) => {
      const inputs = await bundledInputs(entry);
      expect(inputs).toContain(entry);
      const heavy = inputs.filter((input) => /node_modules\/(@aws-sdk|@smithy|zod)\/|functions\/(store|core\/session-service)/.test(input));
      expect(heavy).toEqual([]);
    },
  );

  it('a group with routes that need a key does load them (the check above can see them)', async () => {
    const inputs = await bundledInputs('functions/http/handlers/state.ts');
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
  { module: 'functions/core/decide/decide-service.ts', groups: ['decide'] },
  { module: 'functions/workers/call-worker.ts', groups: ['decide'] },
  { module: 'functions/workers/lambda-worker.ts', groups: ['decide'] },
  // The registry checks a worker's URL where it is registered (agents), a module worker's file
  // too; decide checks both again at a call (a module worker's file in a chunk of its own).
  { module: 'functions/workers/worker-registration.ts', groups: ['agents'] },
  { module: 'functions/workers/module-worker.ts', groups: ['agents', 'decide'] },
  // Registering, changing and listing agents; decide reads them (core/agents/agent-reader.ts).
  { module: 'functions/core/agents/agent-service.ts', groups: ['agents'] },
  { module: 'functions/core/commits/commit-service.ts', groups: ['commits'] },
  { module: 'functions/store/memory/memory-store.ts', groups: ['memory'] },
  { module: 'functions/core/memory/memory-service.ts', groups: ['memory'] },
  { module: 'functions/store/events/webhook-store.ts', groups: ['webhooks'] },
  { module: 'functions/core/webhooks/registry.ts', groups: ['webhooks'] },
  { module: 'functions/workers/webhook-sender.ts', groups: ['webhooks'] },
  // Outbound requests: workers (decide), webhooks, and the URL rules the registry checks.
  { module: 'functions/workers/outbound.ts', groups: ['agents', 'decide', 'webhooks'] },
  // The session log: what a change and a decision use (store/log/session-log.ts); the session
  // groups' reads (creating and listing sessions, the tree, the version history) on top of it.
  { module: 'functions/store/log/session-log.ts', groups: ['sessions', 'tree', 'state', 'agents', 'decide', 'commits'] },
  { module: 'functions/store/sessions/session-store.ts', groups: ['sessions', 'tree', 'state', 'agents', 'commits'] },
  { module: 'functions/core/sessions/session-tree-service.ts', groups: ['sessions', 'tree', 'state'] },
  // The state's writes and versions: JSON Patch, merge patch, typed-field writes.
  { module: 'functions/core/sessions/session-service.ts', groups: ['state'] },
  // Recording a version: the state's writes, decisions, commits, and an append that carries
  // the new head's state (API.md section 3); the other groups' bundles must not even hold it:
  // the chunk it loads on first use would split theirs.
  { module: 'functions/core/write/next-version.ts', groups: ['state', 'decide', 'commits', 'tree'] },
  { module: 'functions/core/json/json-patch.ts', groups: ['state'] },
  // The contract is a file beside the health bundle (lib/ copies it); the code that generates
  // it, and the document itself, are in no bundle.
  { module: 'docs/openapi.json', groups: [] },
  { module: 'functions/http/contract/', groups: [] },
];

describe('each route group bundles only what its routes use', () => {
  const inputsOf = (group: RouteGroup) => bundledInputs(`functions/http/handlers/${group}.ts`);

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
      'functions/store/events/live-store.ts',
      'functions/store/memory/memory-upkeep-store.ts',
    ],
  },
  {
    // The webhook deliveries, queued; webhook secrets opened with the sealing key.
    entry: 'functions/streams/webhook-hook.ts',
    own: [
      'functions/streams/webhook-queue.ts',
      'node_modules/@aws-sdk/client-sqs/',
      'functions/store/events/webhook-store.ts',
      'functions/workers/webhook-sender.ts',
      'functions/store/access/key-ring.ts',
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

  it.each([...streamConsumers.map(({ entry }) => entry), 'functions/streams/delivery-hook.ts'])(
    '%s carries none of the stores only the API uses',
    async (entry) => {
      const inputs = await bundledInputs(entry);
      const apiOnly = ['functions/store/access/api-keys.ts', 'functions/store/idempotency/idempotency-store.ts'];
      expect(apiOnly.filter((module) => inputs.some((input) => input.includes(module)))).toEqual([]);
    },
  );
});

/**
 * What a cold start loads: the file Lambda imports and the chunks it imports statically. What a
 * function imports only on first use is a chunk of its own (lib/bundling.ts), parsed only then:
 * without splitting, esbuild puts it in the one file, and every cold start parses it.
 */
const loadedOnFirstUse: ReadonlyArray<{ module: string; why: string; atImport?: readonly string[] }> = [
  { module: 'node_modules/@aws-sdk/client-lambda/', why: 'decide calls a lambda: worker (functions/workers/call-worker.ts)' },
  { module: 'functions/workers/lambda-worker.ts', why: 'decide calls a lambda: worker (functions/workers/call-worker.ts)' },
  // Local mode only: a Lambda never calls one. The agents group checks a module worker's file
  // where it is registered, at once.
  {
    module: 'functions/workers/module-worker.ts',
    why: 'decide calls a module: worker (functions/workers/call-worker.ts)',
    atImport: ['functions/http/handlers/agents.ts'],
  },
  { module: 'node_modules/@aws-sdk/client-kms/', why: 'the sealing key is opened, once per process (functions/store/access/key-ring.ts)' },
  {
    module: 'functions/store/access/key-ring-kms.ts',
    why: 'the sealing key is opened, once per process (functions/store/access/key-ring.ts)',
  },
  // Behind the authorizer a route group resolves no key (functions/http/parts/middleware.ts);
  // the authorizer and the WebSocket function's $connect resolve one on every call.
  {
    module: 'functions/store/access/api-keys.ts',
    why: 'a key is looked up in the table (locally)',
    atImport: ['functions/http/edge/authorizer.ts', 'functions/ws/handler.ts'],
  },
  // The SDK's default credential chain imports each provider when it tries it; a Lambda's
  // credentials are in its environment, the first it tries.
  { module: 'node_modules/@aws-sdk/nested-clients/', why: 'SSO, STS and sign-in credentials' },
  { module: 'node_modules/@aws-sdk/credential-provider-ini/', why: 'a profile file' },
  { module: 'node_modules/@aws-sdk/credential-provider-sso/', why: 'SSO credentials' },
  { module: 'node_modules/@aws-sdk/credential-provider-login/', why: 'sign-in credentials' },
  { module: 'node_modules/@aws-sdk/credential-provider-process/', why: 'a credential process' },
  { module: 'node_modules/@aws-sdk/credential-provider-web-identity/', why: 'web identity credentials' },
  { module: 'node_modules/@aws-sdk/credential-provider-http/', why: 'container credentials' },
  { module: 'node_modules/@smithy/credential-provider-imds/', why: 'instance metadata credentials' },
  // A session's delete: a DELETE, or a write that finds a delete abandoned halfway.
  { module: 'functions/store/sessions/session-delete.ts', why: 'a session is deleted (functions/store/sessions/session-store.ts)' },
  // What a version changed: worked out only for a large state, whose change events carry it.
  {
    module: 'functions/core/write/version-change.ts',
    why: "a large state's version records its change (functions/core/write/next-version.ts)",
  },
  { module: 'functions/core/json/json-diff.ts', why: "a large state's version records its change (functions/core/write/next-version.ts)" },
  // Routing: only a decision whose agent routes, or whose worker hands the decision on, needs it
  // (and the filter its routes are in); the agents group checks routes where they are registered.
  {
    module: 'functions/core/agents/routing.ts',
    why: 'a decision is routed or handed on (functions/core/decide/decision-hops.ts)',
    atImport: ['functions/http/handlers/agents.ts'],
  },
  {
    module: 'functions/core/memory/memory-filter.ts',
    why: 'a decision is routed or handed on (functions/core/decide/decision-hops.ts)',
    // The stream's consumers index memory items with it (indexedFields), at every batch.
    atImport: [
      'functions/http/handlers/agents.ts',
      'functions/http/handlers/memory.ts',
      'functions/streams/change-hook.ts',
      'functions/streams/webhook-hook.ts',
    ],
  },
  // zod's English messages: only a refused body needs them.
  { module: 'node_modules/zod/v4/locales/en.js', why: 'a body is refused (functions/http/edge/request.ts)' },
  // Tracing: by default a function is traced by Lambda alone and loads no X-Ray SDK; at the
  // `detailed` level (AGENTSTATE_TRACING, docs/deploy.md) Powertools' Tracer is imported at INIT.
  ...['@aws-lambda-powertools/tracer', 'aws-xray-sdk-core', 'semver', 'cls-hooked'].map((name) => ({
    module: `node_modules/${name}/`,
    why: 'detailed tracing (functions/telemetry/detailed-tracing.ts)',
  })),
];

describe('what a cold start loads', () => {
  // Every function the stack deploys (lib/entries.ts).
  const entries = deployedEntries.map((entry) => entry.file);

  it.each(entries)('%s loads at import nothing that is imported only on first use', async (entry) => {
    // Act
    const { loaded } = await bundleOf(entry);

    // Assess
    const early = loadedOnFirstUse.filter(
      ({ module, atImport }) => !atImport?.includes(entry) && loaded.some((input) => input.includes(module)),
    );
    expect(early.map(({ module, why }) => `${module} (${why})`)).toEqual([]);
  });

  it('ships them beside the file Lambda imports (the check above is not blind)', async () => {
    // decide: the Lambda client, the sealing key's KMS client, the credential providers, a
    // session's delete, zod's messages and the tracer.
    const decide = await bundleOf('functions/http/handlers/decide.ts');
    const shipped = loadedOnFirstUse.filter(({ module }) => decide.shipped.some((input) => input.includes(module)));
    expect(shipped).toEqual(loadedOnFirstUse);
    expect(decide.loaded.some((input) => input.includes('node_modules/@aws-sdk/client-dynamodb/'))).toBe(true);
  });
});

describe('the decide group', () => {
  it("reads agents and sessions without the agents and session groups' code", async () => {
    // Act
    const { loaded } = await bundleOf('functions/http/handlers/decide.ts');

    // Assess: the registry's reader and the session log are there; registering, changing and
    // listing agents, and creating and listing sessions, the tree and the history, are not.
    const carries = (module: string) => loaded.some((input) => input.includes(module));
    expect(['functions/core/agents/agent-reader.ts', 'functions/store/log/session-log.ts'].filter((module) => !carries(module))).toEqual(
      [],
    );
    expect(
      [
        'functions/core/agents/agent-service.ts',
        'functions/workers/worker-registration.ts',
        'functions/store/sessions/session-store.ts',
      ].filter(carries),
    ).toEqual([]);
  });

  // A JSON object in a body (a decision's proposed state, a session's metadata) is checked by
  // request.ts's jsonObject, not by zod's record schema, which neither group needs.
  it.each(['decide', 'sessions'])('%s loads no zod record schema', async (group) => {
    const { loadedCode } = await bundleOf(`functions/http/handlers/${group}.ts`);
    expect(loadedCode).toContain('"$ZodObject"');
    expect(loadedCode).not.toContain('"$ZodRecord"');
  });
});

/**
 * What every keyed group shares is split by what each calls: esbuild drops an unused function
 * or export, but never an unused method of a class or an entry of an object, so the store's
 * codecs and key shapes are modules imported as namespaces, and a class that only some groups
 * call in full is a base class and a subclass. Method names and literals survive minifying, so
 * the code a cold start loads shows which halves came along.
 */
describe('what every group shares', () => {
  const codeOf = async (entry: string) => (await bundleOf(entry)).loadedCode;
  const group = (name: RouteGroup) => `functions/http/handlers/${name}.ts`;

  // What a route group's cold start must not load, each with a function that does load it
  // (so that the check cannot pass by not seeing it).
  const splits: ReadonlyArray<{ marker: string; what: string; absentFrom: readonly RouteGroup[]; presentIn: string }> = [
    {
      marker: 'listAgents',
      what: "a page of the registry (decide reads the tenant's agents in one query)",
      absentFrom: ['decide'],
      presentIn: group('sessions'),
    },
    { marker: 'putAgent', what: 'registering an agent', absentFrom: ['decide', 'sessions', 'state'], presentIn: group('agents') },
    { marker: 'commitDocuments', what: "a commit's documents", absentFrom: ['decide'], presentIn: group('commits') },
    {
      marker: 'forWrite',
      what: 'finding a written node from the tip (decide plans its own)',
      absentFrom: ['decide'],
      presentIn: group('state'),
    },
    { marker: 'sessionExists', what: 'whether a session exists', absentFrom: ['decide'], presentIn: group('state') },
    {
      marker: 'settleClosing',
      what: "finishing a session's abandoned delete for a commit",
      absentFrom: ['decide'],
      presentIn: group('commits'),
    },
    {
      marker: '"$ZodCheckRegex"',
      what: 'the zod schema of an id (functions/http/edge/id-schema.ts)',
      absentFrom: ['decide', 'state', 'tree', 'commits', 'memory'],
      presentIn: group('sessions'),
    },
    {
      marker: 'MH#',
      what: "the key of a memory item's history",
      absentFrom: ['decide', 'state', 'sessions', 'webhooks'],
      presentIn: group('memory'),
    },
    {
      marker: 'X#',
      what: "the key of a webhook's dead letters",
      absentFrom: ['decide', 'state', 'sessions', 'memory'],
      presentIn: group('webhooks'),
    },
    {
      marker: '^A#([^#]+)$',
      what: "the document an item's key names (the stream's)",
      absentFrom: ['decide', 'commits'],
      presentIn: 'functions/streams/change-hook.ts',
    },
    {
      marker: 'AttributeType',
      what: 'the table definition (no function creates the table)',
      absentFrom: routeGroups,
      presentIn: 'functions/store/table/table.ts',
    },
  ];

  it.each(splits)('$what is not loaded by the groups that never call it', async ({ marker, absentFrom }) => {
    // Act: each group's function bundled as lib/agent-state.ts bundles it.
    const carrying: RouteGroup[] = [];
    for (const name of absentFrom) if ((await codeOf(group(name))).includes(marker)) carrying.push(name);

    // Assess
    expect(carrying).toEqual([]);
  });

  it.each(splits)('$what is seen where it is used (the check above is not blind)', async ({ marker, presentIn }) => {
    expect(await codeOf(presentIn)).toContain(marker);
  });
});

describe('the agents group', () => {
  it('reads the session store only for a field type change: a chunk its cold start does not load', async () => {
    // Act
    const agents = await bundleOf('functions/http/handlers/agents.ts');

    // Assess
    const store = (inputs: string[]) => inputs.some((input) => input.includes('functions/store/sessions/session-store.ts'));
    expect(store(agents.loaded)).toBe(false);
    expect(store(agents.shipped)).toBe(true);
  });
});

describe('the OpenAPI document beside the health bundle', () => {
  it('is served by the bundled function as Lambda runs it, equal to docs/openapi.json', async () => {
    // Prepare: the health function bundled as lib/agent-state.ts bundles it, written out with
    // the document copied beside it (as the stack does), and imported.
    const dir = mkdtempSync(join(os.tmpdir(), 'agentstate-health-bundle-'));
    const before = process.env.AGENTSTATE_OPENAPI_FILE;
    try {
      copyFileSync(`${root}docs/openapi.json`, join(dir, 'openapi.json'));
      process.env.AGENTSTATE_OPENAPI_FILE = join(dir, 'openapi.json');
      await build({ ...lambdaBundling, entryPoints: [`${root}functions/http/handlers/health.ts`], outdir: dir, logLevel: 'silent' });
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
      // Put back as it was: the unit files share their workers (vitest.config.ts).
      if (before === undefined) delete process.env.AGENTSTATE_OPENAPI_FILE;
      else process.env.AGENTSTATE_OPENAPI_FILE = before;
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('zod in a bundle', () => {
  // `import { z } from 'zod'` takes zod's whole namespace object, every locale with it (about
  // 440 KiB minified); `import * as z` lets esbuild keep only what the schemas use.
  it('brings no locale but English', async () => {
    const inputs = await bundledInputs('functions/http/handlers/agents.ts');
    const locales = inputs.filter((input) => /node_modules\/zod\/.*\/locales\//.test(input) && !/\/(en|index)\.js$/.test(input));
    expect(locales).toEqual([]);
  });
});
