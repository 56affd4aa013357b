import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminCli, dynamoDbEndpointOf } from '../helpers/admin.js';
import { type ApiClient, apiClient, uniqueId } from '../helpers/api-client.js';
import { type StartedServerProcess, spawnServerProcess, startServerProcess } from '../helpers/server.js';

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

/** The local addresses a TCP port listens on, from the kernel's own table (Linux). */
function listeningAddresses(port: number): string[] {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  const addresses: string[] = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const [, local, , state] = line.trim().split(/\s+/);
      // State 0A is LISTEN.
      if (!local?.endsWith(`:${hexPort}`) || state !== '0A') continue;
      // An IPv6 socket bound to ::ffff:127.0.0.1 (Java's way) is the IPv4 loopback address too.
      const address = local.slice(0, -5);
      addresses.push(address.startsWith('0000000000000000FFFF0000') ? address.slice(24) : address);
    }
  }
  return [...new Set(addresses)];
}
const LOOPBACK_V4 = '0100007F';

/** A raw GET with headers fetch() would not let us set (Host). */
function rawGet(port: number, path: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest({ host: '127.0.0.1', port, path, headers }, (response) => {
      let body = '';
      response.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
    });
    request.on('error', reject);
    request.end();
  });
}

// Each test starts real servers (tsx, then a JVM): give them room on a small, busy CI box.
describe('npm start', { timeout: 60_000 }, () => {
  describe('while running', () => {
    let server: StartedServerProcess;
    let http: ApiClient;
    let dynamoDbPort: number;
    beforeAll(async () => {
      // HOST unset as well: what someone on the network may reach (below) is npm start's default.
      server = await startServerProcess({ env: { AGENTSTATE_API_KEYS: undefined, HOST: undefined } });
      http = apiClient(server.url);
      dynamoDbPort = Number(/DynamoDB Local: http:\/\/127\.0\.0\.1:(\d+)/.exec(server.output())?.[1]);
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

    // From network.test.ts and local-keys.test.ts (files of their own before, each starting a
    // server as this one does): their tests on this server, before the last test stops it.
    /**
     * Someone on the network, and the headers every answer carries (API.md section 1), against
     * `npm start` as a user runs it: the API and its DynamoDB Local listen on 127.0.0.1 only
     * unless HOST says otherwise (and then the banner warns); a browser page cannot reach DynamoDB
     * Local; the inspector's WebSocket URL never comes from the Host header; answers carry
     * nosniff, tenant data no-store, and a 401 WWW-Authenticate.
     */
    describe('someone on the network', () => {
      it.runIf(existsSync('/proc/net/tcp'))('cannot reach the API or DynamoDB Local: both listen on 127.0.0.1 only', () => {
        expect(listeningAddresses(server.port)).toEqual([LOOPBACK_V4]);
        expect(listeningAddresses(dynamoDbPort)).toEqual([LOOPBACK_V4]);
      });

      it('cannot use DynamoDB Local from a web page: its CORS preflight is refused', async () => {
        // Act: what a browser sends before a page's request to DynamoDB's API.
        const preflight = await fetch(`http://127.0.0.1:${dynamoDbPort}/`, {
          method: 'OPTIONS',
          headers: {
            origin: 'https://evil.example',
            'access-control-request-method': 'POST',
            'access-control-request-headers': 'x-amz-target',
          },
        });
        // Assess
        expect(preflight.headers.get('access-control-allow-origin')).toBeNull();
      });

      it('is warned about in the banner when HOST opens the API to the network', async () => {
        // Act
        const exposed = await startServerProcess({ env: { HOST: '0.0.0.0' } });
        try {
          // Assess: reachable, and the operator was told.
          expect(exposed.output()).toContain('WARNING: HOST=0.0.0.0');
          expect(exposed.output()).toContain('dev-key');
          expect((await fetch(`${exposed.url}/health`)).status).toBe(200);
          if (existsSync('/proc/net/tcp')) expect(listeningAddresses(exposed.port)).not.toEqual([LOOPBACK_V4]);
        } finally {
          await exposed.stop();
        }
      });
    });

    describe('the inspector page', () => {
      it.each([
        [{ host: 'evil.example:1234' }],
        [{ host: `localhost:${0}`, 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'https' }],
      ])('gets the WebSocket URL from the configuration, never from the request (%j)', async (headers) => {
        // Act
        const config = await rawGet(server.port, '/inspector/config.json', {
          ...headers,
          host: headers.host.replace(':0', `:${server.port}`),
        });
        // Assess
        expect(config.status).toBe(200);
        expect(JSON.parse(config.body)).toEqual({ webSocketUrl: `ws://localhost:${server.port}/v1/ws` });
        expect(config.body).not.toContain('evil');
      });
    });

    describe('response headers', () => {
      it('carry nosniff on every answer, no-store on tenant data', async () => {
        // Prepare
        const sid = uniqueId('headers');
        await http.put(`/v1/sessions/${sid}/state`, { secret: 'tenant data' });
        // Act
        const answers = {
          state: await http.get(`/v1/sessions/${sid}/state`),
          write: await http.patch(`/v1/sessions/${sid}/state`, { more: 1 }),
          notFound: await http.get(`/v1/sessions/${uniqueId('none')}`),
          badRequest: await http.get('/v1/sessions?limit=0'),
          unknownRoute: await http.get('/v1/nothing-here'),
          health: await http.get('/health', { key: null }),
          inspector: await http.get('/inspector/config.json', { key: null }),
        };
        // Assess
        for (const [name, answer] of Object.entries(answers)) {
          expect(answer.headers.get('x-content-type-options'), name).toBe('nosniff');
        }
        for (const name of ['state', 'write', 'notFound', 'badRequest'] as const) {
          expect(answers[name].headers.get('cache-control'), name).toBe('no-store');
        }
      });

      it('carry WWW-Authenticate: Bearer on a 401, with error="invalid_token" for a key nobody issued', async () => {
        // Act
        const missing = await http.get('/v1/sessions', { key: null });
        const invalid = await http.get('/v1/sessions', { key: 'not-a-key' });
        // Assess
        expect(missing.status).toBe(401);
        expect(missing.headers.get('www-authenticate')).toBe('Bearer realm="agentstate"');
        expect(invalid.status).toBe(401);
        expect(invalid.headers.get('www-authenticate')).toBe('Bearer realm="agentstate", error="invalid_token"');
        expect(invalid.headers.get('cache-control')).toBe('no-store');
      });

      it('carry them on an Idempotency-Key replay too', async () => {
        const headers = { 'idempotency-key': uniqueId('idem') };
        const sid = uniqueId('replay');
        await http.patch(`/v1/sessions/${sid}/state`, { a: 1 }, { headers });
        const replay = await http.patch(`/v1/sessions/${sid}/state`, { a: 1 }, { headers });
        expect(replay.headers.get('idempotency-replayed')).toBe('true');
        expect(replay.headers.get('x-content-type-options')).toBe('nosniff');
        expect(replay.headers.get('cache-control')).toBe('no-store');
      });
    });

    describe('keys made by the admin CLI against the local table', () => {
      it('are accepted by npm start until revoked', async () => {
        // Prepare: a key for a tenant of its own, issued the way the deploy guide shows.
        const endpoint = dynamoDbEndpointOf(server);
        const { apiKey, keyId } = JSON.parse(await adminCli(endpoint, 'keys', 'create', '--tenant', 'cli-local', '--json')) as {
          apiKey: string;
          keyId: string;
        };
        const asCli = apiClient(server.url, apiKey);

        // Act
        const written = await asCli.put('/v1/sessions/from-cli/state', { issuedBy: 'cli' });
        const seenByDevKey = await apiClient(server.url).get('/v1/sessions/from-cli');
        await adminCli(endpoint, 'keys', 'revoke', keyId);
        const afterRevoke = await asCli.get('/v1/sessions/from-cli/state');

        // Assess
        expect(written.status).toBe(200);
        expect(seenByDevKey.status).toBe(404);
        expect(afterRevoke.status).toBe(401);
        expect(afterRevoke.body.code).toBe('unauthorized');
      });
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
