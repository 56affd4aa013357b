import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { benchArguments, DOC, ONLY_SECTIONS, repoRoot } from '../../bench/config.js';
import { EXPIRY_HEADING } from '../../bench/expiry.js';

/**
 * `npm run bench` takes twelve minutes and writes docs/benchmarks.md: asking it for its flags,
 * or a typo in one, must not start it. And the page the whole bench writes holds every section
 * issue 34 asks for, expiry's rows among them.
 */
describe('the bench command line', () => {
  it('prints its flags for --help and stops, before starting DynamoDB Local or a section', () => {
    // Act: the bench's own entry, as `npm run bench -- --help` runs it.
    const run = spawnSync(process.execPath, ['--import', 'tsx', 'bench/run.ts', '--help'], {
      cwd: repoRoot,
      encoding: 'utf8',
      timeout: 60_000,
    });

    // Assess: every section --only= takes is named, with the flags that write one into the page.
    expect(run.status, run.stderr).toBe(0);
    for (const section of Object.keys(ONLY_SECTIONS)) expect(run.stdout).toContain(section);
    expect(run.stdout).toContain('--only=');
    expect(run.stdout).toContain('--expiry-only');
    expect(run.stdout).toContain('--langgraph-only');
    // The banner a run prints first never came.
    expect(run.stdout).not.toContain('agentstate benchmark');
  });

  it('refuses an unknown flag or section instead of running the whole bench', () => {
    expect(benchArguments(['--onyl=expiry'])).toEqual({ help: false, unknown: ['--onyl=expiry'] });
    expect(benchArguments(['--only=expiry,retentoin'])).toEqual({ help: false, unknown: ['--only=retentoin'] });
    expect(benchArguments(['--only=expiry,retention', '--no-doc', '--quick'])).toEqual({ help: false, unknown: [] });
    expect(benchArguments(['-h'])).toEqual({ help: true, unknown: [] });
    expect(benchArguments(['--langgraph-only', '--only=langgraph-graph'])).toEqual({ help: false, unknown: [] });
  });

  it('exits 2 on an unknown flag, naming it', () => {
    const run = spawnSync(process.execPath, ['--import', 'tsx', 'bench/run.ts', '--only=expiy'], {
      cwd: repoRoot,
      encoding: 'utf8',
      timeout: 60_000,
    });

    expect(run.status).toBe(2);
    expect(run.stderr).toContain('unknown --only=expiy');
    expect(run.stdout).not.toContain('agentstate benchmark');
  });
});

describe('the bench page', () => {
  it('holds the expiry rows: a state write and two reads with and without a TTL (issue 34)', () => {
    const page = readFileSync(DOC, 'utf8');
    const start = page.indexOf(EXPIRY_HEADING);
    expect(start, `${DOC} has a section "${EXPIRY_HEADING}"`).toBeGreaterThan(0);
    const section = page.slice(start, page.indexOf('\n## ', start + 1));
    for (const operation of ['state write (PATCH …/state)', 'state read (GET …/state)', 'session read (GET /v1/sessions/{sid})']) {
      const row = section.split('\n').find((line) => line.startsWith(`| ${operation}`));
      expect(row, operation).toBeDefined();
      // Requests / RCU / WCU, without and with the TTL.
      expect(row?.match(/\d+\.\d\d \/ \d+\.\d\d \/ \d+\.\d\d/g)).toHaveLength(2);
    }
  });
});
