import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';

/** What one slice of work cost on the wire. */
export interface Cost {
  /** DynamoDB requests, by operation name (`Query`, `PutItem`, …). */
  requests: Record<string, number>;
  /** Requests that came back as an error, by error name (a lost race is `ConditionalCheckFailedException`). */
  errors: Record<string, number>;
  /** Consumed capacity as DynamoDB reports it (`ReturnConsumedCapacity: TOTAL`). */
  readUnits: number;
  writeUnits: number;
  /**
   * Write units of the transactions among them, estimated from item sizes by DynamoDB's
   * published rules (2 units per started KB per item), because DynamoDB Local reports 2 for any
   * TransactWriteItems whatever it holds. Included in `writeUnits` in place of the reported 2.
   */
  estimatedTransactUnits: number;
}

const READS = new Set(['GetItem', 'Query', 'Scan', 'BatchGetItem', 'TransactGetItems']);

/**
 * Counts every DynamoDB request a client sends and the capacity it consumed. It is SDK
 * middleware on the client itself, so it also sees the requests of a `DynamoDBDocumentClient`
 * built on it (the document client shares its middleware stack), and it asks every command for
 * `ReturnConsumedCapacity: 'TOTAL'`.
 */
export class Meter {
  private current: Cost = emptyCost();

  /** Installs the meter on `client` and returns the client. */
  instrument<T extends DynamoDBClient>(client: T): T {
    client.middlewareStack.add(
      (next, context) => async (args) => {
        const name = String(context.commandName ?? 'Unknown').replace(/Command$/, '');
        const input = args.input as Record<string, unknown>;
        if (input.ReturnConsumedCapacity === undefined) input.ReturnConsumedCapacity = 'TOTAL';
        this.current.requests[name] = (this.current.requests[name] ?? 0) + 1;
        try {
          const result = await next(args);
          const consumed = (result.output as { ConsumedCapacity?: unknown }).ConsumedCapacity;
          if (name === 'TransactWriteItems') {
            const estimate = transactWriteUnits(input);
            this.current.writeUnits += estimate;
            this.current.estimatedTransactUnits += estimate;
          } else {
            this.addCapacity(name, consumed);
          }
          return result;
        } catch (error) {
          const errorName = error instanceof Error ? error.name : 'Unknown';
          this.current.errors[errorName] = (this.current.errors[errorName] ?? 0) + 1;
          throw error;
        }
      },
      { step: 'initialize', name: 'benchMeter', override: true },
    );
    return client;
  }

  /** Starts a new count and returns what was counted since the last reset. */
  reset(): Cost {
    const cost = this.current;
    this.current = emptyCost();
    return cost;
  }

  /** Runs `work` and returns what it cost (the meter must not be shared with concurrent work). */
  async measure<T>(work: () => Promise<T>): Promise<{ result: T; cost: Cost }> {
    this.reset();
    const result = await work();
    return { result, cost: this.reset() };
  }

  private addCapacity(operation: string, consumed: unknown): void {
    const entries = Array.isArray(consumed) ? consumed : consumed ? [consumed] : [];
    for (const entry of entries as Array<{ CapacityUnits?: number; ReadCapacityUnits?: number; WriteCapacityUnits?: number }>) {
      const total = entry.CapacityUnits ?? 0;
      if (entry.ReadCapacityUnits !== undefined || entry.WriteCapacityUnits !== undefined) {
        this.current.readUnits += entry.ReadCapacityUnits ?? 0;
        this.current.writeUnits += entry.WriteCapacityUnits ?? 0;
      } else if (READS.has(operation)) {
        this.current.readUnits += total;
      } else {
        this.current.writeUnits += total;
      }
    }
  }
}

function emptyCost(): Cost {
  return { requests: {}, errors: {}, readUnits: 0, writeUnits: 0, estimatedTransactUnits: 0 };
}

/**
 * Write units of a TransactWriteItems by DynamoDB's rules: every item costs twice its size in
 * started KB. An Update's item is not in the request; it is taken as under 1 KB (the items
 * agentstate updates in transactions are pointers and the session item). Index writes are not
 * counted.
 */
function transactWriteUnits(input: Record<string, unknown>): number {
  const items = (input.TransactItems ?? []) as Array<Record<string, { Item?: Record<string, unknown> } | undefined>>;
  let units = 0;
  for (const item of items) {
    if (item.Put?.Item) units += 2 * Math.max(1, Math.ceil(itemSize(item.Put.Item) / 1024));
    // An Update's item is taken as under 1 KB (above); a condition check is charged like a write of its item.
    else units += 2;
  }
  return units;
}

/** An item's size as DynamoDB counts it (attribute names plus values), for native JS values. */
function itemSize(item: Record<string, unknown>): number {
  return Object.entries(item).reduce((sum, [name, value]) => sum + Buffer.byteLength(name) + valueSize(value), 0);
}

function valueSize(value: unknown): number {
  if (value === null || value === undefined || typeof value === 'boolean') return 1;
  if (typeof value === 'string') return Buffer.byteLength(value);
  if (typeof value === 'number') {
    const digits = String(Math.abs(value))
      .replace(/[^0-9]/g, '')
      .replace(/^0+/, '');
    return Math.ceil(Math.max(1, digits.length) / 2) + 1;
  }
  if (Array.isArray(value)) return 3 + value.reduce((sum: number, item) => sum + 1 + valueSize(item), 0);
  if (value instanceof Uint8Array) return value.byteLength;
  if (typeof value === 'object') {
    return 3 + Object.entries(value as object).reduce((sum, [name, item]) => sum + 1 + Buffer.byteLength(name) + valueSize(item), 0);
  }
  return 1;
}

export function totalRequests(cost: Cost): number {
  return Object.values(cost.requests).reduce((sum, count) => sum + count, 0);
}
