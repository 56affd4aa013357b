import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { configDefaults, defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/** LangGraph's own conformance suite for checkpoint savers (test/langgraph/conformance.test.ts). */
const conformance = 'test/langgraph/conformance.test.ts';
/**
 * The unit files: no server and no DynamoDB Local (test/helpers/dynamodb.ts starts one on import
 * and stops it after the file, which a worker shared by files would break). They share their
 * workers (isolate: false), each loading the modules the others loaded already: the 50 ran in
 * 22.6 s and 37 s of CPU against 34-39 s and 58-74 s isolated (session 19, two runs each,
 * interleaved). That they do not depend on one another's order was checked by running all 50
 * in one worker in ten shuffled orders (--sequence.shuffle.files with seeds 11-20, the
 * ConformanceFirst sequencer left out, since a sequencer of one's own replaces the shuffling
 * one): all 1,028 tests passed each time. A unit file that changes process-wide state (an
 * environment variable, a fake clock, a spy) puts it back after itself.
 */
const unit = 'test/unit/**/*.test.ts';
/**
 * Files whose assertions need the machine to themselves: 20 writers on one session must each
 * land within the write path's 15 s retry budget, which a second file sharing two cores can
 * exhaust (it did, once in a cold-cache run with two workers). They run after the others, alone.
 */
// contended-writes.test.ts and e2e/on-disk-bursts.test.ts: 100 writers on one target at once,
// with a core kept busy on purpose. e2e/many-at-once.test.ts: among others, 50
// registrations of one agent declaring fields, which land one at a time within the 15 s retry
// budget each (5.8 s alone for that test, 13 s beside another file and a busy core); 50
// concurrent turns on one session (14.9 s and 16.2 s of the 15 s budget in two full runs beside
// other files, a few seconds alone); 60 PATCHes of one session's metadata at once (8.6 s alone);
// a LangGraph fan-out's 100 putWrites of one checkpoint, with a core kept busy. Those three were
// files of their own (turn.test.ts, whose other tests need no machine alone and are now in
// state.test.ts, metadata-at-once and langgraph/fan-out): one server for all saves their starts
// in the serial group.
// e2e/lifetime-at-once.test.ts: 50 writers on one session across its expiry and beside its
// pruning, each write within the same 15 s budget (about 13 writes a second land, alone).
// integration/expiry-race.test.ts: 50 PATCHes of one session at once, 7.4-9.7 s alone on this
// code and on the commits before it, 15.1 and 15.2 s in two full runs beside other files, where 5
// of them used up the 15 s budget and answered 409; and 20 blind writers on one session with
// appends and commits racing them (contention.test.ts before: one DynamoDB Local for both).
// integration/retention-schedule.test.ts: 50 PATCHes of one session while retention sweeps run
// over and over; one used up the 15 s budget and answered 409 in a full run of session 15 (the
// file's other five tests take about a second each).
const alone = [
  'test/integration/contended-writes.test.ts',
  'test/integration/retention-schedule.test.ts',
  'test/e2e/on-disk-bursts.test.ts',
  'test/e2e/many-at-once.test.ts',
  'test/e2e/lifetime-at-once.test.ts',
  'test/integration/expiry-race.test.ts',
];

/**
 * vitest's order, but with the conformance suite first. vitest runs the files of one group order
 * project by project, by name, so this one file (39 s in a full run) came after every file of
 * 'agentstate' and ran with the other worker idle for most of it: 24 s at the end of the main
 * group in the run of 95f1852. Started first, it runs beside the others.
 */
class ConformanceFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const isConformance = (file: TestSpecification) => file.moduleId.endsWith(conformance);
    return [...sorted.filter(isConformance), ...sorted.filter((file) => !isConformance(file))];
  }
}

export default defineConfig({
  // Tests import the workspace's packages by name, from source (tsconfig.json says the same to tsc).
  resolve: {
    alias: {
      '@agentstate/client': fileURLToPath(new URL('./packages/client/src/index.ts', import.meta.url)),
      '@agentstate/langgraph': fileURLToPath(new URL('./packages/langgraph/src/index.ts', import.meta.url)),
    },
  },
  test: {
    // Two files at a time at least. vitest's default is one fewer than the cores (one on this
    // 2-core box), but a file spends much of its time waiting on the processes it starts (java,
    // the servers, tsc, cdk), so two on two cores took 743 s against 955 s for one (cold cache).
    // Test files share nothing that would clash: servers and DynamoDB Locals take free ports,
    // scratch goes to mkdtemp folders, and what is written in the repository (the synth cache,
    // a workspace's dist/) is written under a lock (test/helpers/file-lock.ts).
    maxWorkers: Math.max(2, availableParallelism() - 1),
    sequence: { sequencer: ConformanceFirst },
    // Generous: the e2e tests start real servers (tsx + java) and the CI box may be small.
    testTimeout: 30_000,
    hookTimeout: 60_000,
    env: {
      // The SDK's notice that its 2027 releases need Node 22 would repeat in every worker.
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    },
    projects: [
      {
        extends: true,
        test: {
          name: 'agentstate',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, conformance, unit, ...alone],
          // Builds the inspector page and bundles the tests' server once; each file that needs
          // DynamoDB Local starts its own (test/helpers/dynamodb.ts says why none is shared).
          globalSetup: ['test/helpers/global-setup.ts'],
        },
      },
      {
        extends: true,
        test: {
          name: 'unit',
          include: [unit],
          isolate: false,
        },
      },
      {
        extends: true,
        test: {
          name: 'alone',
          include: alone,
          // After every other file, one at a time.
          sequence: { groupOrder: 1 },
          maxWorkers: 1,
          globalSetup: ['test/helpers/global-setup.ts'],
        },
      },
      {
        // @langchain/langgraph-checkpoint-validation defines its tests with vitest's globals
        // (describe, it, expect, …), so it gets a project of its own rather than turning them on
        // for every other file. It starts its own server, as a user's `npm start`.
        extends: true,
        test: { name: 'langgraph-conformance', include: [conformance], globals: true },
      },
    ],
  },
});
