import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { routeGroups } from '../../functions/http/routes.js';

const run = promisify(execFile);
const projectRoot = fileURLToPath(new URL('../..', import.meta.url));

type Template = { Resources: Record<string, { Type: string; Properties: Record<string, unknown>; Metadata?: Record<string, string> }> };

/**
 * The one real synth: `cdk synth` the way a user runs it (cdk.json, tsx, cdk-nag at synth,
 * esbuild bundling on this machine), offline. Everything else in test/infra skips bundling.
 */
describe('cdk synth', () => {
  const outdir = mkdtempSync(join(tmpdir(), 'agentstate-synth-'));
  let template: Template;

  beforeAll(async () => {
    // Act
    await run(join(projectRoot, 'node_modules', '.bin', 'cdk'), ['synth', '--quiet', '--output', outdir], {
      cwd: projectRoot,
      env: { ...process.env, CDK_DISABLE_VERSION_CHECK: 'true' },
      timeout: 110_000,
    });
    template = JSON.parse(readFileSync(join(outdir, 'AgentState.template.json'), 'utf8')) as Template;
  }, 120_000);

  afterAll(() => rmSync(outdir, { recursive: true, force: true }));

  const bundleOf = (description: RegExp) => {
    const [, fn] =
      Object.entries(template.Resources).find(
        ([, resource]) => resource.Type === 'AWS::Lambda::Function' && description.test(String(resource.Properties.Description)),
      ) ?? [];
    const assetPath = fn?.Metadata?.['aws:asset:path'];
    if (!assetPath) throw new Error(`no function or asset path for ${description}`);
    return join(outdir, assetPath, 'index.mjs');
  };

  it.each([...routeGroups])('bundles the %s function as minified ESM with a source map', (group) => {
    // Assess
    const bundle = bundleOf(new RegExp(`the ${group} routes$`));
    expect(existsSync(bundle)).toBe(true);
    expect(existsSync(`${bundle}.map`)).toBe(true);
    const code = readFileSync(bundle, 'utf8');
    expect(code.startsWith("import { createRequire } from 'module'; const require = createRequire(import.meta.url);")).toBe(true);
    expect(code).toMatch(/export\s*\{[^}]*\bhandler\b/);
    // Bundled with the SDK; anything near the 250 MB limit would mean a packaging mistake.
    expect(statSync(bundle).size).toBeLessThan(5 * 1024 * 1024);
  });

  it('bundles the authorizer', () => {
    const bundle = bundleOf(/authorizer/);
    expect(readFileSync(bundle, 'utf8')).toMatch(/export\s*\{[^}]*\bhandler\b/);
  });

  it.each([
    ['the change hook', /change hook/],
    ['the WebSocket function', /the WebSocket API/],
  ])('bundles %s', (_name, description) => {
    const bundle = bundleOf(description);
    expect(readFileSync(bundle, 'utf8')).toMatch(/export\s*\{[^}]*\bhandler\b/);
    expect(statSync(bundle).size).toBeLessThan(5 * 1024 * 1024);
  });

  it('ships the built inspector page with the inspector function', () => {
    // Assess: vite ran after esbuild and put the page next to the handler (/var/task/inspector).
    const folder = join(bundleOf(/the inspector routes$/), '..', 'inspector');
    const page = readFileSync(join(folder, 'index.html'), 'utf8');
    const script = /src="\/inspector\/([\w.-]+\.js)"/.exec(page)?.[1];
    expect(script).toBeDefined();
    expect(existsSync(join(folder, script as string))).toBe(true);
  });

  it('writes a validation report with no findings (cdk-nag and CloudFormation rules ran at synth)', () => {
    const report = JSON.parse(readFileSync(join(outdir, 'validation-report.json'), 'utf8')) as {
      pluginReports: Array<{ violations: unknown[] }>;
    };
    expect(report.pluginReports.flatMap((plugin) => plugin.violations)).toEqual([]);
  });
});
