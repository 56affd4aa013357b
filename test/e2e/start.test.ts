import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServerProcess, type StartedServerProcess, spawnServerProcess, startServerProcess } from '../helpers/server.js';

// `npm start` as a user runs it: a real child process, real java, real HTTP.

const auth = { authorization: 'Bearer dev-key' };

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw error;
  }
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolveListen) => {
    const probe = createServer();
    probe.once('error', () => resolveListen(false));
    probe.listen(port, () => probe.close(() => resolveListen(true)));
  });
}

// Each test starts real servers (tsx, then a JVM): give them room on a small, busy CI box.
describe('npm start', { timeout: 60_000 }, () => {
  describe('while running', () => {
    let server: ServerProcess;
    beforeAll(async () => {
      server = await startServerProcess({ env: { AGENTSTATE_API_KEYS: undefined } });
    });
    afterAll(async () => {
      await server?.stop();
    });

    it('prints its URL and the dev key, and answers /health', async () => {
      // Act
      const response = await fetch(`${server.url}/health`);

      // Assess
      expect(server.output()).toContain(`agentstate listening on http://localhost:${server.port}`);
      expect(server.output()).toContain('dev key: dev-key');
      expect(server.output()).toContain(`curl -s http://localhost:${server.port}/v1/sessions -H 'Authorization: Bearer dev-key'`);
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ ok: true });
    });

    it.runIf(existsSync('/proc/self/cmdline'))('runs DynamoDB Local on java’s quick-start tier (README)', () => {
      // Act
      const javaArguments = readFileSync(`/proc/${server.javaPid()}/cmdline`, 'utf8').split('\0');

      // Assess
      expect(javaArguments).toContain('-XX:TieredStopAtLevel=1');
    });

    it('serves the API with the printed dev key', async () => {
      const response = await fetch(`${server.url}/v1/sessions`, { headers: auth });

      expect(response.status).toBe(200);
    });

    it('refuses a second start on the same port, saying what to do', async () => {
      // Act
      const second = await spawnServerProcess({ port: server.port });
      const code = await second.exited;

      // Assess
      expect(code).not.toBe(0);
      expect(second.output()).toContain(
        `agentstate: port ${server.port} is already in use. Stop whatever uses it or start on another port: PORT=${server.port + 1} npm start`,
      );
      // The port is checked before java starts, so a clash costs no JVM start-up.
      expect(second.output()).not.toContain('java pid');
      expect((await fetch(`${server.url}/health`)).status).toBe(200);
    });

    it('exits 0 on SIGINT and leaves no java behind', async () => {
      // Prepare
      const javaPid = server.javaPid();
      expect(javaPid).toBeDefined();
      expect(isRunning(javaPid as number)).toBe(true);

      // Act
      const code = await server.stop('SIGINT');

      // Assess
      expect(code).toBe(0);
      expect(isRunning(javaPid as number)).toBe(false);
      expect(await canListen(server.port)).toBe(true);
    });
  });

  // One server for both: the key it prints does not bear on how it stops.
  describe('with two configured keys', () => {
    let server: StartedServerProcess;
    beforeAll(async () => {
      server = await startServerProcess({ env: { AGENTSTATE_API_KEYS: 'acme:acme-key-1,local:dev-key' } });
    });
    afterAll(async () => {
      await server?.stop();
    });

    it('prints the key of the first configured pair', async () => {
      const response = await fetch(`${server.url}/v1/sessions`, { headers: { authorization: 'Bearer acme-key-1' } });

      expect(server.output()).toContain('dev key: acme-key-1');
      expect(response.status).toBe(200);
    });

    it('exits 0 on SIGTERM (what process managers send) and leaves no java behind', async () => {
      // Prepare
      const javaPid = server.javaPid();
      expect(isRunning(javaPid)).toBe(true);

      // Act
      const code = await server.stop('SIGTERM');

      // Assess
      expect(code).toBe(0);
      expect(isRunning(javaPid)).toBe(false);
      expect(await canListen(server.port)).toBe(true);
    });
  });

  describe('with AGENTSTATE_DATA set to a folder', () => {
    const dataDirs: string[] = [];
    const newDataDir = async () => {
      const dataDir = await mkdtemp(join(tmpdir(), 'agentstate-data-'));
      dataDirs.push(dataDir);
      return dataDir;
    };
    /**
     * The first run of a folder, by the Ctrl-C test: its server made the table and wrote the state
     * the restart test reads. Unset when that test did not get so far (or did not run: -t), and
     * the restart test makes a first run of its own, in a folder of its own.
     */
    let firstRun: { dataDir: string; output: string } | undefined;
    afterAll(async () => {
      for (const dataDir of dataDirs) await rm(dataDir, { recursive: true, force: true });
    });

    /** Writes the state the restart test reads back. */
    const writeState = (url: string) =>
      fetch(`${url}/v1/sessions/s1/state`, {
        method: 'PUT',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ plan: 'kept across restarts' }),
      });

    it("stops cleanly on a terminal's Ctrl-C, which signals java too: no ECONNREFUSED, no stack, exit 0", async () => {
      // Prepare: a server in its own process group, as a shell runs it in the foreground, with
      // a write for the stream poller to read. It runs on the folder, as `npm start` does by
      // default, and its run is the restart test's first: one JVM start fewer.
      const dataDir = await newDataDir();
      const server = await startServerProcess({ processGroup: true, env: { AGENTSTATE_DATA: dataDir } });
      const javaPid = server.javaPid();
      const write = await writeState(server.url);
      expect(write.status).toBe(200);
      const printedBefore = server.output().length;

      // Act: SIGINT to every process of the group, as the terminal sends it.
      process.kill(-(server.child.pid as number), 'SIGINT');
      const code = await server.exited;

      // Assess
      const printedAfter = server.output().slice(printedBefore);
      expect(code).toBe(0);
      expect(printedAfter).not.toMatch(/ECONNREFUSED|\n\s+at /);
      expect(isRunning(javaPid)).toBe(false);
      expect(await canListen(server.port)).toBe(true);
      firstRun = { dataDir, output: server.output() };
    });

    it('keeps the table and its data across a restart', async () => {
      // Prepare: a first run creates the table and writes state (the Ctrl-C test's, or one of its own).
      if (!firstRun) {
        const folder = await newDataDir();
        const first = await startServerProcess({ env: { AGENTSTATE_DATA: folder } });
        expect((await writeState(first.url)).status).toBe(200);
        expect(await first.stop()).toBe(0);
        firstRun = { dataDir: folder, output: first.output() };
      }
      const { dataDir } = firstRun;
      expect(firstRun.output).toContain('table agentstate created');
      expect(firstRun.output).toContain(`data: ${dataDir}`);
      expect(existsSync(join(dataDir, 'shared-local-instance.db'))).toBe(true);

      // Act
      const second = await startServerProcess({ env: { AGENTSTATE_DATA: dataDir } });
      try {
        const read = await fetch(`${second.url}/v1/sessions/s1/state`, { headers: auth });

        // Assess
        expect(second.output()).toContain('table agentstate found');
        expect(read.status).toBe(200);
        expect(read.headers.get('etag')).toBe('"1"');
        expect(await read.json()).toMatchObject({ version: 1, state: { plan: 'kept across restarts' } });
      } finally {
        await second.stop();
      }
    });
  });

  it('explains how to install Java when there is none', async () => {
    // Prepare: a PATH with no java on it (node is not needed there: the helper runs tsx's cli
    // with this test's own node binary).
    const emptyDir = await mkdtemp(join(tmpdir(), 'agentstate-no-java-'));
    try {
      // Act
      const server = await spawnServerProcess({ env: { PATH: emptyDir, JAVA_HOME: undefined } });
      const code = await server.exited;

      // Assess
      expect(code).toBe(1);
      expect(server.output()).toContain('needs Java 17 or newer');
      expect(server.output()).toContain('sudo apt-get install -y openjdk-17-jre-headless');
      expect(server.output()).toContain('brew install openjdk@17');
      expect(await canListen(server.port)).toBe(true);
    } finally {
      await rm(emptyDir, { recursive: true, force: true });
    }
  });
});
