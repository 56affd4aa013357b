import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));

/** The source files esbuild puts into a Lambda's bundle, bundled the way lib/agent-state.ts does. */
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
  return Object.keys(result.metafile.inputs);
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
