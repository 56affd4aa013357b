import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { routeGroups } from '../../functions/http/contract/routes.js';
import { DEPLOYED_WORKER_ARN, synthesizedAssembly } from '../helpers/synth.js';

type Template = { Resources: Record<string, { Type: string; Properties: Record<string, unknown>; Metadata?: Record<string, string> }> };

/**
 * The one real synth: `cdk synth` the way a user runs it (cdk.json, tsx, cdk-nag at synth,
 * esbuild bundling on this machine), offline, with no AWS region or account configured. It is
 * shared with test/deployed (test/helpers/synth.ts); everything else in test/infra skips bundling.
 */
describe('cdk synth', () => {
  let outdir: string;
  let template: Template;

  beforeAll(async () => {
    // Act
    outdir = await synthesizedAssembly();
    template = JSON.parse(readFileSync(join(outdir, 'AgentState.template.json'), 'utf8')) as Template;
  }, 180_000);

  it('stays environment-agnostic: no region or account in the template, only AWS::Region and AWS::AccountId', () => {
    // Assess: the CLI hands the app CDK_DEFAULT_REGION=us-east-1 when nothing is configured.
    // (The region-keyed Mappings the CDK adds are looked up with AWS::Region at deploy time.)
    // The one Lambda worker the shared assembly allows is a setting (test/helpers/synth.ts), not the environment's.
    const { Resources, Outputs } = template as Template & { Outputs: unknown };
    const text = JSON.stringify({ Resources, Outputs }).replaceAll(DEPLOYED_WORKER_ARN, 'arn:…');
    expect(JSON.stringify(Resources)).toContain(DEPLOYED_WORKER_ARN);
    expect(
      text.match(/\b(us|eu|ap|sa|ca|me|af|il|mx)-(east|west|north|south|central|northeast|southeast|northwest|southwest)-\d\b/g) ?? [],
    ).toEqual([]);
    expect(text.match(/\b\d{12}\b/g) ?? []).toEqual([]);
    expect(text).toContain('"Ref":"AWS::Region"');
  });

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
    // Split (lib/bundling.ts): what is imported only on first use is in chunks beside it, with
    // their maps (health and the inspector import nothing later).
    if (group === 'health' || group === 'inspector') return;
    const chunks = readdirSync(join(bundle, '..', 'chunks'));
    expect(chunks.filter((file) => file.endsWith('.mjs')).length).toBeGreaterThan(0);
    expect(chunks.filter((file) => file.endsWith('.mjs.map')).length).toBe(chunks.filter((file) => file.endsWith('.mjs')).length);
  });

  it('bundles the authorizer', () => {
    const bundle = bundleOf(/authorizer/);
    expect(readFileSync(bundle, 'utf8')).toMatch(/export\s*\{[^}]*\bhandler\b/);
  });

  it.each([
    ['the change hook', /change hook/],
    ['the webhook hook', /webhook hook/],
    ['the delivery hook', /delivery hook/],
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
