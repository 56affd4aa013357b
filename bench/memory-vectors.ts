/**
 * Section 6, semantic search (docs/api.md, "Semantic search"): a put with an embedding, and a
 * search with a vector over namespaces of 1,000 and 10,000 items with embeddings of 384
 * numbers (a small sentence model's), with and without a filter: latency, requests, RCU. The
 * ranking is exact: a search reads the codes of every embedding under its prefix (one byte a
 * number, in pages beside the items) and fetches the few items whose bound reaches the best.
 * 100,000 items is the contract's largest prefix.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { MemoryService } from '../functions/core/memory/memory-service.js';
import { embeddingCode } from '../functions/core/memory/memory-vector.js';
import { embeddingBytes, floatsOf, memoryItem } from '../functions/store/memory/memory-codecs.js';
import { codeStamp, pageIndexOf, pageKey, pagesFor } from '../functions/store/memory/memory-codes.js';
import { DynamoDbMemoryStore } from '../functions/store/memory/memory-store.js';
import * as keys from '../functions/store/table/keys.js';
import { batchPut, type Item, type TableClient } from '../functions/store/table/table-client.js';
import { jsonHeaders, log, QUICK, TENANT } from './config.js';
import { handlerRun, type Measured, measureAll, median, ms, type Operation, pad, padLeft, per, requestsText } from './measure.js';
import type { Meter } from './meter.js';

const DIMENSIONS = 384;
const SIZES = QUICK ? [1_000] : [1_000, 10_000, 100_000];

/** A deterministic pseudo-random embedding. */
function embeddingOf(seed: number): number[] {
  let state = (seed + 1) * 2654435761;
  return Array.from({ length: DIMENSIONS }, () => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return state / 2147483648 - 0.5;
  });
}

/** A value of some 200 bytes: short fields a filter decides on, and a line of text. */
function itemValue(n: number): Record<string, unknown> {
  return { topic: n % 10 === 0 ? 'travel' : 'food', n, text: `memory ${n}: ${'the user said something worth keeping. '.repeat(4)}` };
}

/**
 * `count` items with embeddings in `namespace`: the first through the service (it claims the
 * namespace's dimensions and lists it, as a client's first put does), the rest written as that
 * put writes them (memory-codecs.ts), and their codes' pages as the puts leave them
 * (memory-codes.ts), 25 to a `BatchWriteItem`: seconds, where 10,000 puts one by one took some
 * 40, and 100,000 would take minutes. What is measured is the search.
 */
async function fill(service: MemoryService, table: TableClient, namespace: string[], count: number): Promise<void> {
  await service.put(
    TENANT,
    null,
    { namespace, key: 'k0' },
    { value: itemValue(0) as never, embedding: embeddingOf(0) },
    { condition: { kind: 'none' }, author: null },
  );
  const pages = new Map<number, Item>();
  const partition = keys.memoryNamespace(TENANT, namespace);
  const stored = (n: number): Item => {
    const now = new Date(table.now()).toISOString();
    const key = `k${n}`;
    const embedding = embeddingBytes(embeddingOf(n));
    const index = pageIndexOf(key, pagesFor(DIMENSIONS));
    const page = pages.get(index) ?? { pk: partition, sk: pageKey(index), held: 0 };
    page[`c:${key}`] = embeddingCode(floatsOf(embedding));
    page[`n:${key}`] = codeStamp({ createdAt: now, version: 1 });
    page.held = Number(page.held) + 1;
    pages.set(index, page);
    return {
      ...memoryItem.key(TENANT, namespace, key),
      ...memoryItem.attributes(itemValue(n) as never, now, key, null, embedding),
      version: 1,
      createdAt: now,
    };
  };
  for (let start = 1; start < count; start += 1_000) {
    await batchPut(
      table,
      Array.from({ length: Math.min(1_000, count - start) }, (_, offset) => stored(start + offset)),
    );
  }
  // k0's page is the service's; the others are written whole (k0's code added to its own).
  const first = pageIndexOf('k0', pagesFor(DIMENSIONS));
  const own = (await table.send(new GetCommand({ TableName: table.tableName, Key: { pk: partition, sk: pageKey(first) } }))).Item;
  if (own) pages.set(first, { ...own, ...pages.get(first), held: Number(own.held) + Number(pages.get(first)?.held ?? 0) });
  const whole = [...pages.values()];
  for (let start = 0; start < whole.length; start += 1_000) await batchPut(table, whole.slice(start, start + 1_000));
}

const search = (namespace: string[], filter: object | undefined, seed: number) =>
  handlerRun(
    {
      method: 'POST',
      url: '/v1/memory/search',
      headers: jsonHeaders,
      body: JSON.stringify({ namespacePrefix: namespace, vector: embeddingOf(1_000_000 + seed), limit: 10, ...(filter ? { filter } : {}) }),
    },
    200,
  );

export async function measureVectorSearch(meter: Meter, table: TableClient): Promise<Measured[]> {
  const service = new MemoryService(new DynamoDbMemoryStore(table));
  const rows: Measured[] = [];
  const put: Operation = {
    name: `PUT memory item with an embedding (${DIMENSIONS} numbers)`,
    layer: 'handler',
    kind: 'write',
    make: (i) =>
      handlerRun(
        {
          method: 'PUT',
          url: `/v1/memory/bench/vec-rw/k${i % 50}`,
          headers: jsonHeaders,
          body: JSON.stringify({ value: itemValue(i), embedding: embeddingOf(i) }),
        },
        i < 50 ? 201 : 200,
      ),
  };
  rows.push(...(await measureAll(meter, [put], QUICK ? 20 : 40, 50)));
  for (const size of SIZES) {
    const namespace = ['bench', `vec-${size}`];
    await fill(service, table, namespace, size);
    meter.reset();
    const rounds = size >= 100_000 ? 3 : size >= 10_000 ? 5 : 20;
    rows.push(
      ...(await measureAll(
        meter,
        [
          {
            name: `search by vector over ${size} items (limit 10)`,
            layer: 'handler',
            kind: 'read',
            make: (i) => search(namespace, undefined, i),
          },
          {
            name: `search by vector over ${size} items, filter matching 10 %`,
            layer: 'handler',
            kind: 'read',
            make: (i) => search(namespace, { topic: 'travel' }, i),
          },
        ],
        rounds,
        1,
      )),
    );
  }
  for (const row of rows) {
    log(
      `  ${pad(row.operation.name, 56)} ${padLeft(ms(median(row.samples)), 9)} ms  ${pad(requestsText(row.cost, row.samples.length), 34)}` +
        ` RCU ${per(row.cost.readUnits, row.samples.length)}  WCU ${per(row.cost.writeUnits, row.samples.length)}`,
    );
  }
  return rows;
}
