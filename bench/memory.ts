/**
 * Section 6: memory items (docs/api.md §7c). Put and get of a 1 KB item, and search of a
 * namespace of MEMORY.items items with filters of different selectivity, each with its requests
 * and capacity units; then the same search again after the table gained a thousand other
 * namespaces and ten other tenants, which must cost the same requests.
 */

import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { MemoryService } from '../functions/core/memory/memory-service.js';
import { DynamoDbMemoryStore } from '../functions/store/memory/memory-store.js';
import { DynamoDbMemoryUpkeep } from '../functions/store/memory/memory-upkeep-store.js';
import { TableClient } from '../functions/store/table/table-client.js';
import { jsonHeaders, log, MEMORY, TENANT } from './config.js';
import { handlerRun, type Measured, measureAll, median, ms, type Operation, pad, padLeft, per, requestsText, tableRow } from './measure.js';
import { measureVectorSearch } from './memory-vectors.js';
import type { Meter } from './meter.js';

export interface MemoryResult {
  /** Encoded size of the 1 KB value the put and get rows use. */
  valueBytes: number;
  rows: Measured[];
  /** The search with a 10 % filter before and after the other namespaces and tenants. */
  flat: { small: Measured; large: Measured };
}

const BIG = ['bench', 'big'];
const itemUrl = (namespace: readonly string[], key: string) => `/v1/memory/${[...namespace, key].join('/')}`;

/**
 * A value whose stored item (the value with its keys, times, version and index attributes) is
 * just under 1 KB: a few short fields, which the index carries, and a longer note, which it
 * does not.
 */
function kilobyteValue(n: number): Record<string, unknown> {
  return {
    topic: n % 10 === 0 ? 'travel' : 'food',
    n,
    rare: n === 4321,
    source: 'bench',
    note: `item ${n}: ${'lorem ipsum dolor sit amet '.repeat(34)}`.slice(0, 640),
  };
}

/** Writes `count` items in parallel runs of 25 (straight through the service, not timed). */
async function fill(service: MemoryService, tenant: string, namespace: readonly string[], count: number): Promise<void> {
  for (let start = 0; start < count; start += 25) {
    await Promise.all(
      Array.from({ length: Math.min(25, count - start) }, (_, offset) =>
        service.put(
          tenant,
          null,
          { namespace: [...namespace], key: `k${start + offset}` },
          { value: kilobyteValue(start + offset) as never },
          { condition: { kind: 'none' }, author: null },
        ),
      ),
    );
  }
}

const search =
  (filter: object | undefined, limit = 50) =>
  () =>
    handlerRun(
      {
        method: 'POST',
        url: '/v1/memory/search',
        headers: jsonHeaders,
        body: JSON.stringify({ namespacePrefix: BIG, limit, ...(filter ? { filter } : {}) }),
      },
      200,
    );

export async function measureMemory(meter: Meter, client: DynamoDBClient, tableName: string): Promise<MemoryResult> {
  const table = new TableClient(client, tableName);
  const service = new MemoryService(new DynamoDbMemoryStore(table));
  const upkeep = new DynamoDbMemoryUpkeep(table);
  log(`\n6. Memory items (a namespace of ${MEMORY.items} items of about 1 KB)`);
  // What the change hook does after a namespace's first item: list it.
  await upkeep.registerNamespace(TENANT, BIG);
  await upkeep.registerNamespace(TENANT, ['bench', 'rw']);
  await fill(service, TENANT, BIG, MEMORY.items);
  await fill(service, TENANT, ['bench', 'rw'], 50);
  meter.reset();

  const value = (i: number) => JSON.stringify({ value: kilobyteValue(i) });
  const operations: Operation[] = [
    {
      name: 'PUT memory item (replace, item under 1 KB)',
      layer: 'handler',
      kind: 'write',
      make: (i) => handlerRun({ method: 'PUT', url: itemUrl(['bench', 'rw'], `k${i % 50}`), headers: jsonHeaders, body: value(i) }, 200),
    },
    {
      name: 'PUT memory item (new key, item under 1 KB)',
      layer: 'handler',
      kind: 'write',
      make: (i) => handlerRun({ method: 'PUT', url: itemUrl(['bench', 'rw'], `new-${i}`), headers: jsonHeaders, body: value(i) }, 201),
    },
    {
      name: 'PUT memory item with If-Match (item under 1 KB)',
      layer: 'handler',
      kind: 'write',
      make: (i) =>
        handlerRun(
          { method: 'PUT', url: itemUrl(['bench', 'rw'], 'guarded'), headers: { ...jsonHeaders, 'if-match': '*' }, body: value(i) },
          200,
        ),
    },
    {
      name: 'GET memory item (item under 1 KB)',
      layer: 'handler',
      kind: 'read',
      make: (i) => handlerRun({ method: 'GET', url: itemUrl(BIG, `k${i % MEMORY.items}`), headers: jsonHeaders }, 200),
    },
    { name: `search, no filter (limit 50)`, layer: 'handler', kind: 'read', make: search(undefined) },
    { name: `search, filter matching 10 % (limit 50)`, layer: 'handler', kind: 'read', make: search({ topic: 'travel' }) },
    {
      name: `search, range filter matching 10 % (limit 50)`,
      layer: 'handler',
      kind: 'read',
      make: search({ topic: { $in: ['travel'] }, n: { $gte: 0 } }),
    },
    { name: `search, filter matching 1 item of ${MEMORY.items}`, layer: 'handler', kind: 'read', make: search({ rare: true }) },
  ];
  // The guarded put (`If-Match: *`: the item exists) needs its item.
  await service.put(
    TENANT,
    null,
    { namespace: ['bench', 'rw'], key: 'guarded' },
    { value: kilobyteValue(0) as never },
    { condition: { kind: 'none' }, author: null },
  );
  const rows = await measureAll(meter, operations, MEMORY.iterations, 5);
  for (const row of rows) {
    log(
      `  ${pad(row.operation.name, 48)} ${padLeft(ms(median(row.samples)), 8)} ms  ${pad(requestsText(row.cost, row.samples.length), 30)}` +
        ` RCU ${per(row.cost.readUnits, row.samples.length)}  WCU ${per(row.cost.writeUnits, row.samples.length)}`,
    );
  }

  rows.push(...(await measureVectorSearch(meter, table)));

  // Flat in namespaces and tenants: the 10 % search again, after 1,000 other namespaces of this
  // tenant (siblings of the one searched) and 10 other tenants with the same namespace.
  const [small] = await measureAll(meter, [{ ...(operations[5] as Operation), name: 'small' }], MEMORY.iterations, 3);
  for (let index = 0; index < 1_000; index += 25) {
    await Promise.all(
      Array.from({ length: 25 }, async (_, offset) => {
        const namespace = ['bench', `other-${index + offset}`];
        await upkeep.registerNamespace(TENANT, namespace);
        await fill(service, TENANT, namespace, 1);
      }),
    );
  }
  for (let tenant = 0; tenant < 10; tenant++) {
    await upkeep.registerNamespace(`other-tenant-${tenant}`, BIG);
    await fill(service, `other-tenant-${tenant}`, BIG, 100);
  }
  meter.reset();
  const [large] = await measureAll(meter, [{ ...(operations[5] as Operation), name: 'large' }], MEMORY.iterations, 3);
  log(
    `  flat: 10 % search ${ms(median((small as Measured).samples))} ms ${requestsText((small as Measured).cost, (small as Measured).samples.length)}` +
      ` | +1,000 namespaces, +10 tenants ${ms(median((large as Measured).samples))} ms ${requestsText((large as Measured).cost, (large as Measured).samples.length)}`,
  );
  return {
    valueBytes: Buffer.byteLength(value(0)) - Buffer.byteLength('{"value":}'),
    rows,
    flat: { small: small as Measured, large: large as Measured },
  };
}

export function memoryTable(result: MemoryResult): string {
  const lines = ['| operation | median ms | DynamoDB requests / op | RCU / op | WCU / op |', '|---|---:|---|---:|---:|'];
  for (const { operation, samples, cost } of result.rows) {
    lines.push(
      tableRow([
        operation.name,
        ms(median(samples)),
        requestsText(cost, samples.length),
        per(cost.readUnits, samples.length),
        per(cost.writeUnits, samples.length),
      ]),
    );
  }
  return lines.join('\n');
}

export function memoryFlatTable(result: MemoryResult): string {
  const { small, large } = result.flat;
  const shape = (measured: Measured) => requestsText(measured.cost, measured.samples.length);
  return [
    '| search (filter matching 10 %, limit 50) | median ms | requests | RCU / op |',
    '|---|---:|---|---:|',
    tableRow([
      `one namespace of ${MEMORY.items} items, one tenant`,
      ms(median(small.samples)),
      shape(small),
      per(small.cost.readUnits, small.samples.length),
    ]),
    tableRow([
      'the same, beside 1,000 other namespaces and 10 other tenants',
      ms(median(large.samples)),
      shape(large),
      per(large.cost.readUnits, large.samples.length),
    ]),
  ].join('\n');
}
