import { createServer, type Server } from 'node:http';
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dynamoDbClient } from '../../functions/store/table/client.js';

/**
 * `AGENTSTATE_DYNAMODB_MAX_IN_FLIGHT` (set by the local server, never in AWS): the production
 * client sends at most that many requests at once, and a request that waits for its turn starts
 * its bounds (a connection within 1 s, an answer within 3 s: AWS_CALL_TIMEOUTS, pinned by
 * sdk-wire-faults.test.ts) only when it is sent. The endpoint here answers one request at a
 * time, 800 ms each, as an on-disk DynamoDB Local takes its writes: 8 requests at once would
 * wait up to 6.4 s for their answers, past the 3 s bound, if all were sent together.
 */

const SERVICE_MS = 800;
let server: Server;
let endpoint: string;
let open = 0;
let mostOpen = 0;

beforeAll(async () => {
  let line = Promise.resolve();
  server = createServer((request, response) => {
    open++;
    mostOpen = Math.max(mostOpen, open);
    request.resume();
    request.on('end', () => {
      // One at a time, each in its turn.
      line = line.then(async () => {
        await new Promise((wake) => setTimeout(wake, SERVICE_MS));
        response.writeHead(200, { 'content-type': 'application/x-amz-json-1.0', 'x-amzn-requestid': 'in-flight' });
        response.end('{}');
        open--;
      });
    });
  });
  await new Promise<void>((listening) => server.listen(0, '127.0.0.1', () => listening()));
  const address = server.address();
  endpoint = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((closed) => server.close(closed));
});

describe('the production client with AGENTSTATE_DYNAMODB_MAX_IN_FLIGHT', () => {
  it('sends at most that many requests at once, and each waits for its turn outside its bounds: 8 at once all answer, at their first attempt', async () => {
    const client = dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: endpoint, AGENTSTATE_DYNAMODB_MAX_IN_FLIGHT: '2' });
    try {
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, index) =>
          client.send(new GetItemCommand({ TableName: 'in-flight', Key: { pk: { S: `k${index}` }, sk: { S: 'x' } } })),
        ),
      );

      expect(answers.map((answer) => answer.$metadata.attempts)).toEqual(Array(8).fill(1));
      expect(mostOpen).toBeLessThanOrEqual(2);
    } finally {
      client.destroy();
    }
  }, 30_000);
});
