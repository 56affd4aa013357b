import { readdirSync, readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import type { AgentStateStack } from '../../lib/agent-state-stack.js';
import { synthesize, TemplateReader } from './support.js';

/**
 * docs/deploy.md against the stack it describes: the counts it gives, the alarms it explains,
 * the outputs, the event types on the bus and the metrics the functions send. Each list comes
 * from the synthesized template or the code, so a new function, alarm, output, event type or
 * metric fails here until the page says what it is.
 */
const doc = readFileSync(new URL('../../docs/deploy.md', import.meta.url), 'utf8');
const source = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

let stack: AgentStateStack;
let reader: TemplateReader;

beforeAll(() => {
  const synthesized = synthesize();
  stack = synthesized.stack;
  reader = new TemplateReader(synthesized.template);
});

/** The rows of every table whose header row starts with `| <first>`, as arrays of cells. */
function tableRows(first: string): string[][] {
  const lines = doc.split('\n');
  const header = new RegExp(`^\\|\\s*${first}\\s*\\|`);
  const rows: string[][] = [];
  lines.forEach((line, index) => {
    if (!header.test(line)) return;
    for (const row of lines.slice(index + 2)) {
      if (!row.startsWith('|')) break;
      rows.push(
        row
          .split('|')
          .slice(1, -1)
          .map((cell) => cell.trim()),
      );
    }
  });
  expect(rows.length, `a table headed "${first}"`).toBeGreaterThan(0);
  return rows;
}

describe('docs/deploy.md', () => {
  it('counts the functions and alarms the template has, wherever it counts them', () => {
    const functions = reader.ofType('AWS::Lambda::Function').length;
    const alarms = reader.ofType('AWS::CloudWatch::Alarm').length;
    const functionCounts = [...doc.matchAll(/(\d+) functions\b/g)].map((match) => Number(match[1]));
    const alarmCounts = [...doc.matchAll(/(\d+) alarms\b/g)].map((match) => Number(match[1]));
    expect(functionCounts.length).toBeGreaterThan(0);
    expect(alarmCounts.length).toBeGreaterThan(0);
    expect(new Set(functionCounts)).toEqual(new Set([functions]));
    expect(new Set(alarmCounts)).toEqual(new Set([alarms]));
  });

  it('says what each alarm means and what to do', () => {
    const rows = tableRows('alarm').filter((row) => row.length === 3);
    const named = (id: string) => rows.some(([alarm]) => alarm?.includes(`\`${id}\``));
    const perFunction = (suffix: string) => rows.find(([alarm]) => alarm?.startsWith(`\`<Function>${suffix}\``));
    const functionRow = perFunction('Errors')?.[0] ?? '';
    const missing = stack.agentState.monitoring.alarms
      .map((alarm) => alarm.node.id)
      .filter((id) => {
        const [, fn, suffix] = /^(.+)(Errors|Throttles)$/.exec(id) ?? [];
        if (fn && suffix && perFunction(suffix) && functionRow.includes(`\`${fn}\``)) return false;
        return !named(id);
      });
    expect(missing).toEqual([]);
    for (const row of rows) expect(row[2], `what to do about ${row[0]}`).not.toBe('');
  });

  it('lists every output of the stack', () => {
    const listed = tableRows('output').map(([output]) => output?.replace(/`/g, ''));
    expect(new Set(listed)).toEqual(new Set(Object.keys(reader.template.toJSON().Outputs)));
  });

  it('names every detail-type the change hook puts on the bus', () => {
    const core = readdirSync(new URL('../../functions/core/', import.meta.url), { recursive: true, encoding: 'utf8' }).filter((file) =>
      file.endsWith('.ts'),
    );
    const types = new Set(
      core.flatMap((file) => [...source(`functions/core/${file}`).matchAll(/'([a-z]+\.changed)'/g)].map((match) => match[1])),
    );
    const listed = tableRows('detail-type').map(([type]) => type?.replace(/`/g, ''));
    expect(types.size).toBeGreaterThan(0);
    expect(new Set(listed)).toEqual(types);
  });

  it('explains every metric the functions send', () => {
    const declared = (path: string, type: string) => {
      const declaration = new RegExp(`export type ${type} =([^;]+);`).exec(source(path))?.[1] ?? '';
      return [...declaration.matchAll(/'(\w+)'/g)].map((match) => match[1]);
    };
    const metrics = new Set([
      ...declared('functions/telemetry/telemetry.ts', 'Metric'),
      ...declared('functions/core/kernel/metrics.ts', 'CoreMetric'),
    ]);
    const listed = tableRows('metric').map(([metric]) => metric?.replace(/`/g, ''));
    expect(metrics.size).toBeGreaterThan(5);
    expect(new Set(listed)).toEqual(metrics);
    // … and the dashboard shows each of them, from the namespace the functions send them to.
    const [[, dashboard] = []] = reader.ofType('AWS::CloudWatch::Dashboard');
    const body = JSON.stringify(dashboard?.Properties.DashboardBody).replace(/\\"/g, '"');
    const shown = [...metrics].filter((metric) => body.includes(`["agentstate","${metric}","service","agentstate"`));
    expect(shown).toEqual([...metrics]);
  });
});
