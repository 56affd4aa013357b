import { spawn } from 'node:child_process';
import { AgentStateSaver } from '@agentstate/langgraph';
import { emptyCheckpoint, uuid6 } from '@langchain/langgraph-checkpoint';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningApi, startApi } from '../helpers/e2e.js';

/**
 * A LangGraph fan-out (issue 36): a step that sends 100 tasks at once puts their writes at the
 * same moment, 100 `putWrites` of one checkpoint, each a merge patch at its node. The saver
 * sends its writes to a session in turn, and those of one checkpoint that wait together as one
 * merge patch (saver.ts, `writeInTurn`); writers in other processes wait their turn in the
 * session's write queue (core/write/write-retry.ts) instead of racing for every place of the
 * log. Before both, 6 of 100 answered `409 "the session is changing too fast to apply this
 * write"` and the run failed. With a core busy with another process, as a shared machine is.
 * It runs alone (vitest.config.ts), after the others.
 */
let api: RunningApi;

beforeAll(async () => {
  api = await startApi();
});
afterAll(async () => {
  await api?.stop();
});

const TASKS = 100;

describe('AgentStateSaver under a fan-out', () => {
  it(`keeps all ${TASKS} writes of tasks sent at once, with the machine loaded`, async () => {
    // Prepare: a checkpoint, and a process that keeps a core busy meanwhile.
    const saver = new AgentStateSaver({ baseUrl: api.url, apiKey: 'dev-key', prefix: 'fan' });
    const thread = { configurable: { thread_id: 'fan-out', checkpoint_ns: '' } };
    const checkpoint = emptyCheckpoint();
    checkpoint.id = uuid6(1);
    checkpoint.channel_values = { topic: 'fan' };
    checkpoint.channel_versions = { topic: 1 };
    const config = await saver.put(thread, checkpoint, { source: 'loop', step: 0, parents: {} }, { topic: 1 });
    const burner = spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });

    // Act: every task's writes at the same moment, as LangGraph's loop sends a step's.
    const settled = await Promise.allSettled(
      Array.from({ length: TASKS }, (_, task) =>
        saver.putWrites(config, [['results', { task, answer: `answer ${task}` }]], `task-${task}`),
      ),
    ).finally(() => burner.kill('SIGKILL'));

    // Assess: none failed, and the checkpoint holds every task's write.
    expect(
      settled.filter((outcome) => outcome.status === 'rejected').map((outcome) => String((outcome as PromiseRejectedResult).reason)),
    ).toEqual([]);
    const tuple = await saver.getTuple(config);
    expect(tuple?.checkpoint.id).toBe(checkpoint.id);
    const tasks = new Set(tuple?.pendingWrites?.map(([task]) => task));
    expect(tasks.size).toBe(TASKS);
    expect(tuple?.pendingWrites).toContainEqual(['task-42', 'results', { task: 42, answer: 'answer 42' }]);
  }, 120_000);
});
