import type { Context } from 'aws-lambda';
import { afterEach, expect, it } from 'vitest';
import { countMetric } from '../../functions/core/kernel/metrics.js';
import { instrumented } from '../../functions/telemetry/telemetry.js';

const context = {
  functionName: 'agentstate-unit',
  functionVersion: '$LATEST',
  invokedFunctionArn: 'arn:aws:lambda:us-east-1:123456789012:function:agentstate-unit',
  memoryLimitInMB: '1024',
  awsRequestId: 'request-1',
  getRemainingTimeInMillis: () => 1_000,
} as Context;

afterEach(() => {
  delete process.env.AWS_LAMBDA_FUNCTION_NAME;
});

it('records the core’s metrics only in a Lambda: a process that once ran a handler as one prints no metric lines after', async () => {
  // Prepare: one invocation as in a Lambda builds Powertools' metrics and hands the core its
  // sink (what the bench's section 1c does before its later sections run outside a Lambda).
  const printed: string[] = [];
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: string | Uint8Array) => {
    printed.push(String(chunk));
    return true;
  }) as typeof process.stdout.write;
  try {
    process.env.AWS_LAMBDA_FUNCTION_NAME = 'agentstate-unit';
    const handler = instrumented(
      'unit',
      async () => 'ok',
      () => ({ message: 'done', level: 'info', fields: {} }),
    );
    await handler({}, context);
    delete process.env.AWS_LAMBDA_FUNCTION_NAME;
    printed.length = 0;

    // Act: the core counts races as the bench's concurrency section does, thousands of them
    // (Powertools publishes on its own once it holds 100).
    for (let n = 0; n < 500; n++) countMetric('VersionRacesRetried');
  } finally {
    process.stdout.write = write;
  }

  // Assess: before, five EMF lines ({"_aws": …}) among the bench's tables.
  expect(printed.filter((line) => line.includes('"_aws"'))).toEqual([]);
});
