import { beforeAll, describe, expect, it } from 'vitest';
import { dependenciesFor } from '../../functions/http/dependencies.js';
import { createStores, type Stores } from '../../functions/store/index.js';
import { dynamoDbClient } from '../../functions/store/table/client.js';
import { createTestTable, dynamoEndpoint } from '../helpers/dynamodb.js';

/**
 * The stack's allow-list of `lambda:` workers (AGENTSTATE_ALLOWED_WORKER_ARNS), one rule held at
 * two moments: registering an agent, and each call of its worker (the list may have shrunk
 * since). As a function in AWS sees it (AWS_LAMBDA_FUNCTION_NAME set), on a real table.
 */
let stores: Stores;
const ALLOWED = 'arn:aws:lambda:eu-west-1:123456789012:function:allowed';
const OTHER = 'arn:aws:lambda:eu-west-1:123456789012:function:other';

beforeAll(async () => {
  stores = createStores(dynamoDbClient({ AGENTSTATE_DYNAMODB_ENDPOINT: dynamoEndpoint() }), await createTestTable('lambda-rule'));
});

const inAws = (allowed: string) =>
  dependenciesFor(stores, { env: { AWS_LAMBDA_FUNCTION_NAME: 'decide', AGENTSTATE_ALLOWED_WORKER_ARNS: allowed } });

describe('lambda: workers in AWS', () => {
  it('registers only the functions the stack allows', async () => {
    const deps = inAws(ALLOWED);

    const allowed = await deps.agents.putAgent('rule', 'allowed', { worker: { url: `lambda:${ALLOWED}` } });
    const refused = deps.agents.putAgent('rule', 'other', { worker: { url: `lambda:${OTHER}` } });

    expect(allowed).toBeTruthy();
    await expect(refused).rejects.toMatchObject({ code: 'invalid_request' });
    expect(await stores.agents.getAgent('rule', 'other')).toBeNull();
  });

  it('refuses to call a registered function the stack no longer allows, writing nothing', async () => {
    // Prepare: an agent registered while its function was allowed; then the list changed.
    await inAws(ALLOWED).agents.putAgent('rule', 'was-allowed', { worker: { url: `lambda:${ALLOWED}` } });
    const scope = { tenant: 'rule', sessionId: 'no-longer' };
    const later = inAws(OTHER);

    // Act
    const decided = later.decide.decide(scope, { agentId: 'was-allowed', trigger: { type: 'tick' } });

    // Assess
    await expect(decided).rejects.toMatchObject({ code: 'worker_failed' });
    expect((await later.sessions.readState(scope, {})).version).toBe(0);
  });
});
