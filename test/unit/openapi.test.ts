import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { errorStatus } from '../../functions/core/kernel/errors.js';
import { openApiDocument, openApiText } from '../../functions/http/contract/document.js';
import { routes } from '../../functions/http/contract/routes.js';

/**
 * The OpenAPI document: generated from the route table and the zod schemas, committed as
 * docs/openapi.json (which GET /v1/openapi.json serves), and lint-clean under Redocly's strict
 * recommended rules. The e2e tests hold the real server's traffic to it (test/helpers/contract.ts).
 */
const root = fileURLToPath(new URL('../../', import.meta.url));
const run = promisify(execFile);
const committed = readFileSync(`${root}docs/openapi.json`, 'utf8');
const document = openApiDocument() as { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> };

describe('the OpenAPI document', () => {
  it('is committed as generated (after a change, run npm run openapi)', () => {
    // Assess
    expect(committed).toBe(openApiText(openApiDocument()));
  });

  it('states the size limits of an agent’s registration: 64 KiB of config, 128 KiB of stateFields', () => {
    const put = (document.paths['/v1/agents/{agentId}'] as Record<string, { description?: string }>).put;

    expect(put?.description).toContain('`config` holds at most 64 KiB of JSON');
    expect(put?.description).toContain('`stateFields` at most 200 fields and 128 KiB (131,072 bytes) of JSON');
  });

  it('describes every route of the route table, and nothing else', () => {
    // Prepare
    const documented = Object.entries(document.paths).flatMap(([path, methods]) =>
      Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`),
    );

    // Assess
    // A greedy `{path+}` is `{path}` in OpenAPI, which has no greedy syntax.
    expect(documented.sort()).toEqual(routes.map((route) => `${route.method} ${route.path.replace(/\{(\w+)\+\}/g, '{$1}')}`).sort());
  });

  it('names every error code of the API somewhere', () => {
    // Prepare
    const text = JSON.stringify(document);

    // Assess
    const missing = Object.keys(errorStatus).filter((code) => !text.includes(`"${code}"`));
    expect(missing).toEqual([]);
  });

  it('shows an example of every body and every answer that has a schema, each error code its own', () => {
    // Prepare: every media type of a request body or an answer that names a schema.
    type Media = { schema?: { $ref?: string; allOf?: unknown[] }; example?: unknown; examples?: Record<string, unknown> };
    type Exchange = { requestBody?: { content: Record<string, Media> }; responses: Record<string, { content?: Record<string, Media> }> };
    const shown = Object.entries(document.paths as Record<string, Record<string, Exchange>>).flatMap(([path, methods]) =>
      Object.entries(methods).flatMap(([method, exchange]) => {
        const bodies = Object.entries(exchange.requestBody?.content ?? {}).map(([type, media]) => ({
          at: `${method} ${path} ${type}`,
          media,
        }));
        const answers = Object.entries(exchange.responses).flatMap(([status, answer]) =>
          Object.entries(answer.content ?? {}).map(([type, media]) => ({ at: `${method} ${path} ${status} ${type}`, media })),
        );
        return [...bodies, ...answers].filter(({ media }) => media.schema?.$ref !== undefined || media.schema?.allOf !== undefined);
      }),
    );

    // Assess: redocly lint (below) checks that each example fits its schema.
    expect(shown.length).toBeGreaterThan(100);
    expect(shown.filter(({ media }) => media.example === undefined && media.examples === undefined).map(({ at }) => at)).toEqual([]);
    const problemAnswers = shown.filter(({ at }) => at.endsWith('application/problem+json'));
    const unshownCodes = problemAnswers.flatMap(({ at, media }) => {
      const narrowed = media.schema?.allOf?.[1] as { properties?: { code?: { enum?: string[] } } } | undefined;
      const codes = narrowed?.properties?.code?.enum ?? ['(no code enum)'];
      return codes.filter((code) => !Object.hasOwn(media.examples ?? {}, code)).map((code) => `${at} ${code}`);
    });
    expect(unshownCodes).toEqual([]);
  });

  it('passes redocly lint (recommended-strict, redocly.yaml)', async () => {
    // Act: Node 20 is what the project runs on; Redocly CLI 2.77 supports it (engines >=20.19).
    const { stdout } = await run(
      process.execPath,
      [`${root}node_modules/@redocly/cli/bin/cli.js`, 'lint', 'docs/openapi.json', '--format', 'json'],
      {
        cwd: root,
        env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
        maxBuffer: 16 * 1024 * 1024,
      },
    );

    // Assess
    const report = JSON.parse(stdout.slice(stdout.indexOf('{'))) as { totals: { errors: number; warnings: number }; problems: unknown[] };
    expect(report.problems).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
  }, 60_000);
});
