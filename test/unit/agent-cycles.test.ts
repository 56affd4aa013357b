import { describe, expect, it } from 'vitest';
import { AgentService } from '../../functions/core/agents/agent-service.js';
import type { AgentRecord } from '../../functions/core/model/model.js';
import type { AgentStore, SessionStore } from '../../functions/core/model/ports.js';

/**
 * A listing of the registry is read page by page while moves land, so it may show an edge a
 * move has made beside one another move has already taken away: a cycle the table never held
 * (a under b read after its move, b under a read before its own). Walking such a listing down
 * from an agent once grew without end and took the process down (V8's "invalid size error",
 * seen with 50 moves at once in test/e2e/many-at-once.test.ts).
 */
const agent = (agentId: string, parentId: string | null, stateFields: AgentRecord['stateFields'] = null): AgentRecord => ({
  agentId,
  parentId,
  worker: null,
  config: null,
  stateFields,
  createdAt: '2026-12-06T12:00:00.000Z',
  updatedAt: '2026-12-06T12:00:00.000Z',
});

describe('a registry read that shows a cycle', () => {
  it('declares fields on an agent whose listed hierarchy loops above it, and ends', async () => {
    // Prepare: the table holds d under a, a under c and c at the top; the listing shows c under a too.
    const stored = new Map([
      ['a', agent('a', 'c')],
      ['c', agent('c', null)],
      ['d', agent('d', 'a')],
    ]);
    const listed = [agent('a', 'c'), agent('c', 'a'), agent('d', 'a')];
    const agents = {
      getAgent: async (_tenant: string, agentId: string) => stored.get(agentId) ?? null,
      registryVersion: async () => 0,
      listAgents: async () => ({ items: listed }),
      putAgent: async (_tenant: string, record: AgentRecord) => {
        stored.set(record.agentId, record);
        return false;
      },
    } as unknown as AgentStore;
    const sessions = {
      listSessions: async () => ({ items: [] }),
      readTip: async () => {
        throw new Error('no session is read: none is listed');
      },
    } as unknown as Pick<SessionStore, 'listSessions' | 'readTip'>;
    const service = new AgentService({ agents, sessions }, () => {});

    // Act
    const answer = await service.putAgent('t', 'd', {
      parentId: 'a',
      stateFields: { topic: { type: 'string', read: 'public', write: 'public' } },
    });

    // Assess
    expect(answer.agent.stateFields).toEqual({ topic: { type: 'string', read: 'public', write: 'public' } });
  });
});
