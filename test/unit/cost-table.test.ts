import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { costRows, costTable, PRICES } from '../../bench/cost.js';
import type { Row } from '../../bench/operations.js';

/**
 * The bench's cost table (docs/benchmarks.md, "What it costs in AWS") prices measured requests
 * and units; these tests hold its arithmetic and its prices to what AWS bills and to the prices
 * docs/deploy.md quotes, so the two pages cannot drift apart.
 */

const handlerRow = (name: string, values: { median: number; requests: number; rcu: number; wcu: number }): Row => ({
  name,
  layer: 'handler',
  median: values.median,
  p99: values.median,
  ratio: 1,
  baseline: 'GetItem',
  requests: `${values.requests} Query`,
  requestCount: String(values.requests),
  rcu: String(values.rcu),
  wcu: String(values.wcu),
  estimated: false,
});

const cells = (table: string, operation: string) =>
  (table.split('\n').find((line) => line.startsWith(`| ${operation} |`)) ?? '')
    .split('|')
    .slice(1, -1)
    .map((cell) => cell.trim());

describe('the cost table', () => {
  it('prices a measured read: one HTTP request, one invocation at 512 MB, its read units', () => {
    // Prepare: a GET that took 1 ms here with one Query and 1 RCU.
    const rows = costRows([handlerRow('GET state (head)', { median: 1, requests: 1, rcu: 1, wcu: 0 })], []);

    // Act
    const row = cells(costTable(rows), 'GET state (head)');

    // Assess: 1 + 3 ms for the round trip to DynamoDB in AWS = 4 ms billed;
    // Lambda 0.20 + 4 ms × 0.5 GB × 0.0000133334 × 1e6 = 0.2267; DynamoDB 1 × 0.125.
    expect(row[4]).toBe('4');
    expect(row.slice(5, 9)).toEqual(['1.00', '0.23', '0.13', '**1.35**']);
    // The floor is the same single read with no code: the same 4 ms, so the row is at its floor.
    expect(row[10]).toBe('1.35');
    expect(row[11]).toBe('1.00×');
  });

  it('counts write units at five times read units, and shows how far a write is above its floor', () => {
    const rows = costRows([handlerRow('POST messages (append 1)', { median: 2, requests: 3, rcu: 2, wcu: 2 })], []);

    const row = cells(costTable(rows), 'POST messages (append 1)');

    // 2 + 3 × 3 = 11 ms; DynamoDB 2 × 0.125 + 2 × 0.625 = 1.50; floor 1 RCU + 1 WCU in 8 ms.
    expect(row[4]).toBe('11');
    expect(row[7]).toBe('1.50');
    // Lambda 0.20 + 11 × 0.5 × 0.0133334 = 0.2733; total 2.77. Floor: 1.00 + 0.2533 + 0.75 = 2.00.
    expect(row[8]).toBe('**2.77**');
    expect(row[9]).toBe('2 / 1 / 1');
    expect(row[10]).toBe('2.00');
    expect(row[11]).toBe('1.38×');
  });

  it('leaves out what it has no floor for (raw rows, the service alone, unpriced operations)', () => {
    const rows = costRows(
      [
        { ...handlerRow('GET state (head)', { median: 1, requests: 1, rcu: 1, wcu: 0 }), layer: 'raw' },
        handlerRow('GET versions (first page, 50 × 1 KB)', { median: 1, requests: 1, rcu: 6, wcu: 0 }),
      ],
      [],
    );
    expect(rows).toEqual([]);
  });
});

describe('the prices', () => {
  it('are the ones docs/deploy.md quotes', () => {
    const deploy = readFileSync(new URL('../../docs/deploy.md', import.meta.url), 'utf8');
    const line = (service: string) => deploy.split('\n').find((text) => text.startsWith(`| ${service}`)) ?? '';
    expect(line('API Gateway HTTP API')).toContain(`USD ${PRICES.httpApiPerMillionRequests.toFixed(2)} per million requests`);
    expect(line('Lambda arm64')).toContain(`USD ${PRICES.lambdaPerMillionRequests.toFixed(2)} per million requests`);
    expect(line('Lambda arm64')).toContain(`USD ${PRICES.lambdaPerGbSecond} per GB-second`);
    expect(line('DynamoDB on-demand')).toContain(`USD ${PRICES.dynamoDbPerMillionWriteUnits} per million write request units`);
    expect(line('DynamoDB on-demand')).toContain(`USD ${PRICES.dynamoDbPerMillionReadUnits} per million read request units`);
  });
});
