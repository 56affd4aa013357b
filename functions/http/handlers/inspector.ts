import { readFile } from 'node:fs/promises';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { AgentStateError } from '../../core/kernel/errors.js';
import { json } from '../edge/responses.js';
import { createPublicHandler } from '../public.js';

/**
 * The inspector page (docs/inspector.md): `GET /` is its `index.html`, `GET /inspector/{file}`
 * its hashed scripts and styles, both built by vite from inspector/ into one flat folder, and
 * `GET /inspector/config.json` tells the page where the WebSocket API is. No key is needed:
 * the files hold no data, and the page asks for a key and sends it to the API itself.
 *
 * Where the files are: `AGENTSTATE_INSPECTOR_DIR` (in AWS the stack copies them next to this
 * function's bundle and sets it), else `dist/inspector` of this repository (`npm start` builds
 * it there; functions/local/inspector-build.ts).
 */
export const handler = createPublicHandler({
  'GET /': async () => serveFile('index.html'),
  'GET /inspector/{file}': async (input) => {
    const file = input.path('file');
    if (file === CONFIG_FILE) return config();
    // Flat names only: nothing outside the folder, no dotfiles.
    if (!/^[\w-][\w.-]*$/.test(file)) throw notFound(file);
    return serveFile(file);
  },
});

const CONFIG_FILE = 'config.json';

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.json': 'application/json',
  '.map': 'application/json',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
};

/** Text served as is; anything else base64, as API Gateway wants binary bodies. */
const TEXT_TYPES = new Set(['.html', '.js', '.css', '.svg', '.json', '.map']);

const SECURITY_HEADERS = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

function inspectorDir(): string {
  return process.env.AGENTSTATE_INSPECTOR_DIR || fileURLToPath(new URL('../../../dist/inspector', import.meta.url));
}

async function serveFile(file: string): Promise<APIGatewayProxyStructuredResultV2> {
  const extension = extname(file);
  const contentType = CONTENT_TYPES[extension];
  if (!contentType) throw notFound(file);
  let body: Buffer;
  try {
    body = await readFile(join(inspectorDir(), file));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    if (file === 'index.html') return notBuilt();
    throw notFound(file);
  }
  const isPage = file === 'index.html';
  return {
    statusCode: 200,
    headers: {
      'content-type': contentType,
      // Scripts and styles have content hashes in their names; the page itself must be fresh
      // so that it names the current ones.
      'cache-control': isPage ? 'no-cache' : 'public, max-age=31536000, immutable',
      ...SECURITY_HEADERS,
      ...(isPage ? { 'content-security-policy': CONTENT_SECURITY_POLICY } : {}),
    },
    ...(TEXT_TYPES.has(extension) ? { body: body.toString('utf8') } : { body: body.toString('base64'), isBase64Encoded: true }),
  };
}

/**
 * The page loads only its own files and talks only to this API and a WebSocket API (ws: and
 * wss:, since in AWS the WebSocket API has a host of its own); no inline scripts, no framing.
 */
const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "connect-src 'self' ws: wss:",
  "img-src 'self' data:",
  "style-src 'self'",
  "script-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'none'",
].join('; ');

/**
 * `{webSocketUrl}`: where the page sends its user's API key to follow a session. It comes from
 * configuration only, never from the request (a `Host` or `X-Forwarded-*` header is the
 * caller's to choose, and a cache could keep its answer for others): in AWS the stack's
 * WebSocket API (`AGENTSTATE_WEBSOCKET_URL`, the output `WebSocketUrl`); locally the server
 * sets it to its own address. Unset, the page has no live sync (`null`).
 */
function config(): APIGatewayProxyStructuredResultV2 {
  const webSocketUrl = process.env.AGENTSTATE_WEBSOCKET_URL || null;
  return json(200, { webSocketUrl }, { 'cache-control': 'no-cache', ...SECURITY_HEADERS });
}

function notBuilt(): APIGatewayProxyStructuredResultV2 {
  return {
    statusCode: 503,
    headers: { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-cache', ...SECURITY_HEADERS },
    body: 'The agentstate inspector is not built. Run `npm run build:inspector` (npm start does it when needed).\n',
  };
}

function notFound(file: string): AgentStateError {
  return new AgentStateError('not_found', `no inspector file ${file}`);
}
