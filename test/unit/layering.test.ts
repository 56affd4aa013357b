import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The layering rules of biome.jsonc (checked by `biome ci` in `npm test`), tried from the
 * outside: every case plants one import in a scratch tree laid out like the repository, under the
 * repository's own biome.jsonc, and Biome must flag exactly the imports that cross a boundary,
 * whatever form they take (value, type-only, re-export, dynamic import), and none of the imports
 * each layer is meant to make.
 */
const root = fileURLToPath(new URL('../../', import.meta.url));
const biome = createRequire(import.meta.url).resolve('@biomejs/biome/bin/biome');

type Form = 'value' | 'type' | 're-export' | 'dynamic';
interface Case {
  /** Where the importing file is, as in the repository. */
  from: string;
  /** What it imports. */
  imports: string;
  form?: Form;
  crosses: boolean;
}

const cases: Case[] = [
  // functions/core: the pure domain, no AWS and nothing above it.
  { from: 'functions/core', imports: '../store/dynamodb-store.js', crosses: true },
  { from: 'functions/core', imports: '../store/dynamodb-store.js', form: 'type', crosses: true },
  { from: 'functions/core/model', imports: '../../store/table/keys.js', form: 're-export', crosses: true },
  { from: 'functions/core/kernel', imports: '../../store/table/client.js', form: 'dynamic', crosses: true },
  { from: 'functions/core/sessions', imports: '../../store/index.js', crosses: true },
  { from: 'functions/core', imports: '../http/api.js', crosses: true },
  { from: 'functions/core', imports: '../workers/call-worker.js', crosses: true },
  { from: 'functions/core', imports: '@aws-sdk/client-dynamodb', crosses: true },
  { from: 'functions/core', imports: '@aws-sdk/lib-dynamodb', form: 'type', crosses: true },
  { from: 'functions/core', imports: 'aws-lambda', form: 'type', crosses: true },
  { from: 'functions/core', imports: '@aws-lambda-powertools/metrics', crosses: true },
  { from: 'functions/core', imports: '../telemetry/telemetry.js', crosses: true },
  { from: 'functions/core/decide', imports: '../kernel/metrics.js', crosses: false },
  { from: 'functions/core/json', imports: './json.js', crosses: false },
  { from: 'functions/core', imports: 'uuid', crosses: false },
  // functions/store: the adapter under core, never the handlers or what runs them.
  { from: 'functions/store', imports: '../http/dependencies.js', crosses: true },
  { from: 'functions/store/log', imports: '../../http/contract/routes.js', form: 'type', crosses: true },
  { from: 'functions/store', imports: '../workers/webhook-sender.js', crosses: true },
  { from: 'functions/store', imports: '../streams/change-hook.js', crosses: true },
  { from: 'functions/store/log', imports: '../../core/model/model.js', form: 'type', crosses: false },
  { from: 'functions/store', imports: '@aws-sdk/client-dynamodb', crosses: false },
  // lib: the construct, which needs only the definitions it deploys.
  { from: 'lib', imports: '../functions/http/api.js', crosses: true },
  { from: 'lib', imports: '../functions/core/sessions/session-service.js', form: 'type', crosses: true },
  { from: 'lib', imports: '../functions/store/dynamodb-store.js', crosses: true },
  { from: 'lib', imports: '../functions/http/contract/routes.js', crosses: false },
  { from: 'lib', imports: '../functions/http/edge/cors.js', crosses: false },
  { from: 'lib', imports: '../functions/http/edge/middleware.js', crosses: true },
  { from: 'lib', imports: '../functions/store/table/table.js', crosses: false },
  { from: 'lib', imports: '../functions/store/events/stream-images.js', crosses: false },
  { from: 'lib', imports: '../functions/store/table/keys.js', crosses: true },
  { from: 'lib', imports: '../functions/telemetry/tracing-level.js', crosses: false },
  { from: 'lib', imports: '../functions/telemetry/telemetry.js', crosses: true },
  { from: 'lib', imports: 'aws-cdk-lib', crosses: false },
  // packages/client: published on its own, with no dependencies and nothing from the server.
  { from: 'packages/client/src', imports: '../../../functions/core/json/json.js', form: 'type', crosses: true },
  { from: 'packages/client/src', imports: '../../../functions/http/contract/routes.js', crosses: true },
  { from: 'packages/client/src', imports: '../package.json', crosses: true },
  { from: 'packages/client/src', imports: '@aws-sdk/client-dynamodb', crosses: true },
  { from: 'packages/client/src', imports: 'zod', crosses: true },
  { from: 'packages/client/src', imports: 'node:crypto', crosses: true },
  { from: 'packages/client/src', imports: 'agentstate', form: 'dynamic', crosses: true },
  { from: 'packages/client/src', imports: 'ws', form: 'dynamic', crosses: false },
  { from: 'packages/client/src', imports: './types.js', form: 'type', crosses: false },
  // packages/langgraph: agentstate only through the client, and LangGraph's own packages.
  { from: 'packages/langgraph/src', imports: '../../../functions/core/json/json.js', form: 'type', crosses: true },
  { from: 'packages/langgraph/src', imports: '../../client/src/index.js', crosses: true },
  { from: 'packages/langgraph/src', imports: '@aws-sdk/client-dynamodb', crosses: true },
  { from: 'packages/langgraph/src', imports: 'node:crypto', crosses: true },
  { from: 'packages/langgraph/src', imports: 'zod', form: 'dynamic', crosses: true },
  { from: 'packages/langgraph/src', imports: '@agentstate/client', crosses: false },
  { from: 'packages/langgraph/src', imports: '@langchain/langgraph-checkpoint', crosses: false },
  { from: 'packages/langgraph/src', imports: '@langchain/core/runnables', form: 'type', crosses: false },
  { from: 'packages/langgraph/src', imports: './ids.js', crosses: false },
];

const source = (imports: string, form: Form = 'value') =>
  ({
    value: `import { planted } from '${imports}';\n\nexport const used = planted;\n`,
    type: `import type { Planted } from '${imports}';\n\nexport type Used = Planted;\n`,
    're-export': `export * from '${imports}';\n`,
    dynamic: `export const load = () => import('${imports}');\n`,
  })[form];

let scratch: string;
/** The planted files Biome flagged with noRestrictedImports, relative to the scratch tree. */
let flagged: Set<string>;
const fileOf = (index: number) => `${cases[index]?.from}/planted-${index}.ts`;

beforeAll(() => {
  // Prepare: one file per case, and the repository's own configuration.
  scratch = mkdtempSync(join(os.tmpdir(), 'agentstate-layering-'));
  copyFileSync(join(root, 'biome.jsonc'), join(scratch, 'biome.jsonc'));
  cases.forEach((entry, index) => {
    const path = join(scratch, fileOf(index));
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, source(entry.imports, entry.form));
  });

  // Act: the rules npm test runs, on the scratch tree (not a git checkout, so no VCS).
  let output: string;
  try {
    output = execFileSync(
      process.execPath,
      [biome, 'lint', '--vcs-enabled=false', '--only=style/noRestrictedImports', '--reporter=json', '--max-diagnostics=none', '.'],
      { cwd: scratch, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
    );
  } catch (error) {
    // Biome exits 1 when it reports errors; its report is on stdout all the same.
    output = String((error as { stdout?: unknown }).stdout ?? '');
  }
  const report = JSON.parse(output.slice(output.indexOf('{'), output.lastIndexOf('}') + 1)) as {
    diagnostics: Array<{ category: string; location: { path: string } }>;
  };
  flagged = new Set(
    report.diagnostics
      .filter((diagnostic) => diagnostic.category === 'lint/style/noRestrictedImports')
      .map((diagnostic) => diagnostic.location.path.replaceAll('\\', '/')),
  );
});

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('the layering rules', () => {
  const named = cases.map((entry, index) => ({
    ...entry,
    index,
    form: entry.form ?? 'value',
    verdict: entry.crosses ? 'crosses a boundary' : 'is allowed',
  }));
  it.each(named)('$from: a $form import of $imports $verdict', ({ index, crosses }) => {
    // Assess
    expect(flagged.has(fileOf(index))).toBe(crosses);
  });

  it('flag nothing but the planted crossings (the check sees every planted file)', () => {
    const expected = cases.flatMap((entry, index) => (entry.crosses ? [fileOf(index)] : []));
    expect([...flagged].sort()).toEqual(expected.sort());
  });
});
