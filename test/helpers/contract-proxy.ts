import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { contractViolations, type Exchange } from './contract.js';

/**
 * A proxy in front of a server the tests started, that holds every exchange to the OpenAPI
 * document (contract.ts). Answers pass through unchanged; an answer that breaks the contract also
 * carries `x-contract-violation`, so the test helper that made the request fails on the spot
 * (api-client.ts), and every violation is kept for `violations()`, so a request made any other
 * way fails its file when the server stops (e2e.ts). WebSocket upgrades are piped through.
 */
export interface ContractProxy {
  url: string;
  /**
   * Holds one exchange made with the server directly to the document, as the proxy holds those
   * it passes, and keeps what it breaks with theirs; answers that. For the tests' own client
   * (api-client.ts), which knows the whole exchange, so that its requests need not pass here.
   */
  check(exchange: Exchange): string[];
  violations(): string[];
  close(): Promise<void>;
}

export const VIOLATION_HEADER = 'x-contract-violation';

export async function startContractProxy(target: string): Promise<ContractProxy> {
  const upstream = new URL(target);
  const seen: string[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const requestBody = Buffer.concat(chunks);
      const forwarded = httpRequest(
        { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
        (answer) => {
          const body: Buffer[] = [];
          answer.on('data', (chunk: Buffer) => body.push(chunk));
          answer.on('end', () => {
            const responseBody = Buffer.concat(body);
            const violations = contractViolations({
              method: req.method ?? 'GET',
              url: req.url ?? '/',
              requestContentType: req.headers['content-type'],
              requestBody: requestBody.toString('utf8'),
              status: answer.statusCode ?? 0,
              responseContentType: header(answer.headers, 'content-type'),
              responseBody: responseBody.toString('utf8'),
            });
            seen.push(...violations);
            const headers = { ...answer.headers };
            if (violations.length > 0) headers[VIOLATION_HEADER] = encodeURIComponent(violations.join('\n'));
            res.writeHead(answer.statusCode ?? 502, headers);
            res.end(responseBody);
          });
          answer.on('error', () => req.socket.destroy());
        },
      );
      // The server went away: so does the connection, as it would without the proxy.
      forwarded.on('error', () => req.socket.destroy());
      forwarded.end(requestBody);
    });
  });
  server.on('upgrade', (req, socket, head) => {
    const link = connect(Number(upstream.port), upstream.hostname, () => {
      const lines = [`${req.method} ${req.url} HTTP/1.1`];
      for (let index = 0; index < req.rawHeaders.length; index += 2) lines.push(`${req.rawHeaders[index]}: ${req.rawHeaders[index + 1]}`);
      link.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (head.length > 0) link.write(head);
      socket.pipe(link).pipe(socket);
    });
    link.on('error', () => socket.destroy());
    socket.on('error', () => link.destroy());
    socket.on('close', () => link.destroy());
    link.on('close', () => socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://localhost:${port}`,
    check: (exchange) => {
      const violations = contractViolations(exchange);
      seen.push(...violations);
      return violations;
    },
    violations: () => [...seen],
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}
