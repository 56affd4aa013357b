/**
 * The vitest configuration of an upstream run (run.ts): LangGraph's own test files, from a
 * checkout of langgraphjs outside this repository, run as LangGraph runs them (its globals, its
 * setup files, a 30 s test timeout), one file at a time. With `SAVER=agentstate`, each file's
 * `new MemorySaver()`, `new MemorySaverAssertImmutable()` and `new InMemoryStore(` become this
 * repository's saver and store (setup.ts); with `SAVER=peer`, the two savers become the peer
 * saver (setup-peer.ts) and the store stays; with `SAVER=memory` they are left as they are.
 */
import { join, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig, type Plugin } from 'vitest/config';

const checkout = process.env.LANGGRAPH_CHECKOUT;
if (!checkout) throw new Error('LANGGRAPH_CHECKOUT must name a checkout of langgraphjs (run.ts sets it)');
const here = fileURLToPath(new URL('.', import.meta.url));
const repository = join(here, '..', '..');
const core = join(checkout, 'libs', 'langgraph-core');

const saver = process.env.SAVER;

/** The rewrite of a test file's in-memory saver (and store, for ours) into the factories of a setup file. */
function rewrite(): Plugin {
  return {
    name: 'agentstate-saver',
    enforce: 'pre',
    transform(code, id) {
      if (!/\.test\.ts$/.test(id)) return null;
      const rewritten = code
        .replace(/new MemorySaverAssertImmutable\(\)/g, '(globalThis as any).__makeSaver()')
        .replace(/new MemorySaver\(\)/g, '(globalThis as any).__makeSaver()')
        .replace(/new InMemoryStore\(/g, (store) => (saver === 'agentstate' ? '(globalThis as any).__makeStore(' : store));
      return rewritten === code ? null : { code: rewritten, map: null };
    },
  };
}

/**
 * One copy of `@langchain/langgraph-checkpoint` in the whole run: the store tests of the checkout's
 * `libs/checkpoint` import its store from their own source (`../store/base.js`, `batch.js`,
 * `memory.js`), while LangGraph's sources, our saver and our store use the package installed here.
 * Two copies of a class are two classes: our store threw the installed `InvalidNamespaceError`
 * and `toThrow(InvalidNamespaceError)` checked the source's. Those imports become the installed
 * package, in every pass, so `InMemoryStore` there is the installed one too, as in the
 * langgraph-core files.
 */
function oneCheckpointPackage(): Plugin {
  const tests = join(checkout as string, 'libs', 'checkpoint', 'src', 'tests') + sep;
  const ourStore = join(repository, 'packages', 'langgraph', 'src', 'store.ts');
  return {
    name: 'one-checkpoint-package',
    enforce: 'pre',
    async resolveId(source, importer) {
      if (!importer?.startsWith(tests) || !/^\.\.\/store\/(base|batch|memory)\.js$/.test(source)) return null;
      // Resolved as our store resolves it, so both name the same file (the checkout's node_modules is a link).
      const installed = await this.resolve('@langchain/langgraph-checkpoint', ourStore, { skipSelf: true });
      if (!installed) throw new Error(`@langchain/langgraph-checkpoint does not resolve from ${ourStore}`);
      return installed;
    },
  };
}

export default defineConfig({
  root: join(checkout, 'libs'),
  plugins: [oneCheckpointPackage(), ...(saver === 'memory' ? [] : [rewrite()])],
  resolve: {
    alias: {
      '@agentstate/client': join(repository, 'packages', 'client', 'src', 'index.ts'),
      '@agentstate/langgraph': join(repository, 'packages', 'langgraph', 'src', 'index.ts'),
      '@langchain/langgraph-checkpoint-sqlite': join(here, 'sqlite-stub.ts'),
    },
  },
  test: {
    globals: true,
    environment: 'node',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    fileParallelism: false,
    maxWorkers: 1,
    setupFiles: [
      join(core, 'src', 'tests', 'setup.node.ts'),
      join(core, 'src', 'tests', 'matchers', 'setup.ts'),
      ...(saver === 'agentstate' ? [join(here, 'setup.ts')] : saver === 'peer' ? [join(here, 'setup-peer.ts')] : []),
    ],
  },
});
