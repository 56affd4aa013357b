import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { beforeTransaction, leastReadUnits, priceFailedWrite } from './capacity-rules.js';

/** What one slice of work cost on the wire. */
export interface Cost {
  /** DynamoDB requests, by operation name (`Query`, `PutItem`, …). */
  requests: Record<string, number>;
  /** Requests that came back as an error, by error name (a lost race is `ConditionalCheckFailedException`). */
  errors: Record<string, number>;
  /**
   * Consumed capacity, table and indexes: as DynamoDB Local reports it (`ReturnConsumedCapacity:
   * TOTAL`, which counts index writes) where it follows AWS's rules, and estimated by them where
   * it does not (bench/capacity-rules.ts): transactions, writes that failed their condition,
   * reads that found nothing.
   */
  readUnits: number;
  writeUnits: number;
  /**
   * The write units among them that were estimated (transactions, with their index writes, and
   * writes that failed their condition), included in `writeUnits`.
   */
  estimatedTransactUnits: number;
  /** Milliseconds the meter spent reading items to price them, which are not the work's: timings take them out. */
  estimationMs: number;
}

const READS = new Set(['GetItem', 'Query', 'Scan', 'BatchGetItem', 'TransactGetItems']);
const SINGLE_WRITES = new Set(['PutItem', 'UpdateItem', 'DeleteItem']);

/**
 * Counts every DynamoDB request a client sends and the capacity it consumed. It is SDK
 * middleware on the client itself, so it also sees the requests of a `DynamoDBDocumentClient`
 * built on it (the document client shares its middleware stack), and it asks every command for
 * `ReturnConsumedCapacity: 'TOTAL'`. What DynamoDB Local does not price as AWS would is priced
 * from the request on the wire (after serialization, so a document client's too) by the
 * recorder's rules (bench/capacity-rules.ts): both accountings give one request the same units.
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
          // A transaction is priced on the wire (below), from its items.
          if (name !== 'TransactWriteItems') this.addCapacity(name, consumed, input.ConsistentRead === true);
          return result;
        } catch (error) {
          const errorName = error instanceof Error ? error.name : 'Unknown';
          this.current.errors[errorName] = (this.current.errors[errorName] ?? 0) + 1;
          throw error;
        }
      },
      { step: 'initialize', name: 'benchMeter', override: true },
    );
    client.middlewareStack.add(
      (next, context) => async (args) => {
        const name = String(context.commandName ?? 'Unknown').replace(/Command$/, '');
        if (name !== 'TransactWriteItems' && !SINGLE_WRITES.has(name)) return next(args);
        const request = args.request as { protocol?: string; hostname?: string; port?: number; body?: unknown };
        const endpoint = `${request.protocol ?? 'http:'}//${request.hostname}${request.port ? `:${request.port}` : ''}`;
        // The serialized body: a string, or bytes in newer SDKs.
        const body = request.body instanceof Uint8Array ? new TextDecoder().decode(request.body) : String(request.body ?? '{}');
        const wire = JSON.parse(body) as Record<string, unknown>;
        if (name === 'TransactWriteItems') {
          // The meter's own reads are not the operation's time (measure.ts takes them out).
          let started = performance.now();
          const finish = await beforeTransaction(endpoint, wire);
          this.current.estimationMs += performance.now() - started;
          let result: Awaited<ReturnType<typeof next>> | undefined;
          let failure: unknown;
          try {
            result = await next(args);
          } catch (error) {
            failure = error;
          }
          started = performance.now();
          const items = await finish(result !== undefined);
          this.current.estimationMs += performance.now() - started;
          const units = items.reduce(
            (sum, item) => sum + item.writeUnits + item.indexWrites.reduce((more, write) => more + write.writeUnits, 0),
            0,
          );
          this.current.writeUnits += units;
          this.current.estimatedTransactUnits += units;
          if (failure !== undefined || !result) throw failure;
          return result;
        }
        try {
          return await next(args);
        } catch (error) {
          // AWS bills a write whose condition failed; DynamoDB Local's error says nothing of it.
          if (error instanceof Error && error.name === 'ConditionalCheckFailedException') {
            const started = performance.now();
            const units = await priceFailedWrite(endpoint, wire);
            this.current.estimationMs += performance.now() - started;
            this.current.writeUnits += units;
            this.current.estimatedTransactUnits += units;
          }
          throw error;
        }
      },
      { step: 'build', name: 'benchMeterWire', override: true },
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

  private addCapacity(operation: string, consumed: unknown, consistent: boolean): void {
    const entries = Array.isArray(consumed) ? consumed : consumed ? [consumed] : [];
    for (const entry of entries as Array<{ CapacityUnits?: number; ReadCapacityUnits?: number; WriteCapacityUnits?: number }>) {
      const total = entry.CapacityUnits ?? 0;
      if (entry.ReadCapacityUnits !== undefined || entry.WriteCapacityUnits !== undefined) {
        this.current.readUnits += entry.ReadCapacityUnits ?? 0;
        this.current.writeUnits += entry.WriteCapacityUnits ?? 0;
      } else if (READS.has(operation)) {
        // A Query that finds nothing costs its minimum on AWS; DynamoDB Local reports 0.
        this.current.readUnits += operation === 'Query' || operation === 'Scan' ? Math.max(leastReadUnits(consistent), total) : total;
      } else {
        this.current.writeUnits += total;
      }
    }
  }
}

function emptyCost(): Cost {
  return { requests: {}, errors: {}, readUnits: 0, writeUnits: 0, estimatedTransactUnits: 0, estimationMs: 0 };
}

export function totalRequests(cost: Cost): number {
  return Object.values(cost.requests).reduce((sum, count) => sum + count, 0);
}
