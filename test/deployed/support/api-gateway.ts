import { randomBytes } from 'node:crypto';
import type { DeployedFunction, Deployment, TemplateResource } from './deployment.js';
import type { Invocation, LambdaService } from './lambda.js';

/** What a client gets back from the emulated API Gateway. */
export interface GatewayResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  json: any;
  /** The integration's invocation, when a function answered (its logs, its request id). */
  invocation?: Invocation;
}

interface HttpRoute {
  method: string;
  segments: string[];
  integration: DeployedFunction;
  authorizer?: { fn: DeployedFunction; identitySource: string[]; ttlSeconds: number; simple: boolean };
}

/**
 * An HTTP API as API Gateway serves it, built from the template's routes, integrations and
 * authorizer: it picks the route (the most specific match), runs the REQUEST authorizer with
 * the payload 2.0 authorizer event (caching its answer per identity source for the
 * authorizer's TTL, and answering `401 {"message":"Unauthorized"}` itself when the identity
 * source is missing), invokes the route's function with the payload 2.0 event and maps its
 * answer back (AWS API Gateway developer guide, "Working with AWS Lambda proxy integrations
 * for HTTP APIs" and "Working with AWS Lambda authorizers for HTTP APIs").
 */
export class HttpApiGateway {
  private readonly routes: HttpRoute[] = [];
  private readonly authorizerCache = new Map<string, { expires: number; context: unknown }>();
  private readonly apiId: string;
  authorizerCalls = 0;

  constructor(
    private readonly deployment: Deployment,
    private readonly lambda: LambdaService,
  ) {
    const [api] = deployment.ofType('AWS::ApiGatewayV2::Api').filter(([, resource]) => resource.Properties.ProtocolType === 'HTTP');
    const [apiLogicalId] = api as [string, TemplateResource];
    this.apiId = deployment.ref(apiLogicalId);
    const functionOf = (arnValue: unknown) => {
      const arn = deployment.resolve(arnValue) as string;
      const fn = deployment.functions().find((candidate) => arn.includes(deployment.getAtt(candidate.logicalId, 'Arn')));
      if (!fn) throw new Error(`no function for ${arn}`);
      return fn;
    };
    for (const [, route] of deployment.ofType('AWS::ApiGatewayV2::Route')) {
      if (route.Properties.ApiId?.Ref !== apiLogicalId) continue;
      const integrationId = String(deployment.resolve(route.Properties.Target)).replace(/^integrations\//, '');
      const integration = deployment.resource(reverseRef(deployment, integrationId));
      if (integration.Properties.PayloadFormatVersion !== '2.0') throw new Error('only payload format 2.0 is emulated');
      const [method, path] = String(route.Properties.RouteKey).split(' ') as [string, string];
      const httpRoute: HttpRoute = {
        method,
        segments: path.split('/').slice(1),
        integration: functionOf(integration.Properties.IntegrationUri),
      };
      if (route.Properties.AuthorizationType === 'CUSTOM') {
        const authorizer = deployment.resource(route.Properties.AuthorizerId.Ref as string).Properties;
        if (authorizer.AuthorizerType !== 'REQUEST' || authorizer.AuthorizerPayloadFormatVersion !== '2.0') {
          throw new Error('only REQUEST authorizers with payload 2.0 are emulated');
        }
        httpRoute.authorizer = {
          fn: functionOf(authorizer.AuthorizerUri),
          identitySource: authorizer.IdentitySource as string[],
          ttlSeconds: Number(authorizer.AuthorizerResultTtlInSeconds ?? 0),
          simple: authorizer.EnableSimpleResponses === true,
        };
      }
      this.routes.push(httpRoute);
    }
  }

  async request(
    method: string,
    target: string,
    options: { headers?: Record<string, string>; body?: string; clockOffsetMs?: number; variables?: Record<string, string> } = {},
  ): Promise<GatewayResponse> {
    const url = new URL(target, 'https://api.example');
    const headers = Object.fromEntries(Object.entries(options.headers ?? {}).map(([name, value]) => [name.toLowerCase(), value]));
    if (options.body !== undefined) headers['content-length'] = String(Buffer.byteLength(options.body));
    const match = this.match(method, url.pathname);
    if (!match) return answer(404, { message: 'Not Found' });
    const { route, pathParameters } = match;
    const routeKey = `${route.method} /${route.segments.join('/')}`;
    const base = this.baseEvent({ routeKey, url, method, headers, pathParameters });

    let authorizerContext: unknown;
    if (route.authorizer) {
      const identity = route.authorizer.identitySource.map((source) => headers[source.replace(/^\$request\.header\./i, '').toLowerCase()]);
      if (identity.some((value) => value === undefined || value === '')) return answer(401, { message: 'Unauthorized' });
      const cacheKey = identity.join('\u0000');
      const cached = this.authorizerCache.get(cacheKey);
      if (cached && cached.expires > Date.now()) {
        authorizerContext = cached.context;
      } else {
        this.authorizerCalls += 1;
        const verdict = await this.lambda.invoke(route.authorizer.fn, {
          version: '2.0',
          type: 'REQUEST',
          routeArn: `arn:aws:execute-api:${this.deployment.region}:${this.deployment.account}:${this.apiId}/$default/${method}${url.pathname}`,
          identitySource: identity,
          ...base,
        });
        if (verdict.error || !route.authorizer.simple) return answer(500, { message: 'Internal Server Error' }, verdict);
        if (verdict.result?.isAuthorized !== true) return answer(403, { message: 'Forbidden' }, verdict);
        authorizerContext = verdict.result.context ?? {};
        if (route.authorizer.ttlSeconds > 0) {
          this.authorizerCache.set(cacheKey, { expires: Date.now() + route.authorizer.ttlSeconds * 1000, context: authorizerContext });
        }
      }
    }

    const event = {
      version: '2.0',
      ...base,
      requestContext: {
        ...base.requestContext,
        ...(route.authorizer ? { authorizer: { lambda: authorizerContext } } : {}),
      },
      ...(options.body !== undefined ? bodyOf(options.body, headers['content-type']) : { isBase64Encoded: false }),
    };
    const invocation = await this.lambda.invoke(route.integration, event, {
      clockOffsetMs: options.clockOffsetMs ?? 0,
      ...(options.variables ? { variables: options.variables } : {}),
    });
    // A request too large for Lambda's payload is API Gateway's own 413 (docs/api.md, "Body
    // limits"); any other failure of the invocation (a crash, a timeout, an answer too large for
    // Lambda's payload) is its bare 500.
    if (invocation.error?.errorType === 'RequestTooLargeException') return answer(413, { message: 'Request Entity Too Large' }, invocation);
    if (invocation.error) return answer(500, { message: 'Internal Server Error' }, invocation);
    return responseOf(invocation);
  }

  /**
   * The most specific route for a method and path: literal segments beat `{parameters}`, and
   * both beat a last greedy `{name+}`, which takes every remaining segment (at least one).
   */
  private match(method: string, path: string): { route: HttpRoute; pathParameters: Record<string, string> } | undefined {
    // What API Gateway hands on is the path as sent; parameters stay percent-encoded.
    const segments = path.split('/').slice(1);
    let best: { route: HttpRoute; pathParameters: Record<string, string>; score: number } | undefined;
    for (const route of this.routes) {
      if (route.method !== method && route.method !== 'ANY') continue;
      const greedy = /^\{(\w+)\+\}$/.exec(route.segments[route.segments.length - 1] ?? '')?.[1];
      const fixed = greedy ? route.segments.slice(0, -1) : route.segments;
      if (greedy ? segments.length <= fixed.length : fixed.length !== segments.length) continue;
      const pathParameters: Record<string, string> = {};
      let score = greedy ? -0.5 : 0;
      const fits = fixed.every((segment, index) => {
        const actual = segments[index] as string;
        const parameter = /^\{(\w+)\}$/.exec(segment);
        if (parameter) {
          if (actual === '') return false;
          pathParameters[parameter[1] as string] = actual;
          return true;
        }
        score += 1;
        return segment === actual;
      });
      const rest = segments.slice(fixed.length);
      if (greedy) {
        if (rest.some((part) => part === '')) continue;
        pathParameters[greedy] = rest.join('/');
      }
      if (fits && (!best || score > best.score)) best = { route, pathParameters, score };
    }
    return best;
  }

  private baseEvent(request: {
    routeKey: string;
    url: URL;
    method: string;
    headers: Record<string, string>;
    pathParameters: Record<string, string>;
  }) {
    const { url, headers } = request;
    const now = new Date();
    const rawQueryString = url.search.replace(/^\?/, '');
    const query: Record<string, string> = {};
    for (const [name, value] of url.searchParams) query[name] = name in query ? `${query[name]},${value}` : value;
    const domainName = `${this.apiId}.execute-api.${this.deployment.region}.amazonaws.com`;
    return {
      routeKey: request.routeKey,
      // HTTP APIs hand on the path decoded; its parameters stay as sent.
      rawPath: safeDecodeUri(url.pathname),
      rawQueryString,
      headers: { ...headers, host: domainName, 'x-forwarded-proto': 'https', 'x-forwarded-port': '443' },
      ...(rawQueryString ? { queryStringParameters: query } : {}),
      ...(Object.keys(request.pathParameters).length > 0 ? { pathParameters: request.pathParameters } : {}),
      requestContext: {
        accountId: this.deployment.account,
        apiId: this.apiId,
        domainName,
        domainPrefix: this.apiId,
        http: {
          method: request.method,
          path: safeDecodeUri(url.pathname),
          protocol: 'HTTP/1.1',
          sourceIp: '203.0.113.7',
          userAgent: headers['user-agent'] ?? 'test',
        },
        requestId: randomBytes(12).toString('base64').replace(/[+/=]/g, 'x'),
        routeKey: request.routeKey,
        stage: '$default',
        time: now.toUTCString(),
        timeEpoch: now.getTime(),
      },
    };
  }
}

/** A body as HTTP APIs pass it: text for text and JSON types, base64 for anything else. */
function bodyOf(body: string, contentType: string | undefined): { body: string; isBase64Encoded: boolean } {
  const textual = /^(text\/|application\/(json|xml|javascript)\b)/i.test(contentType ?? '');
  return textual ? { body, isBase64Encoded: false } : { body: Buffer.from(body, 'utf8').toString('base64'), isBase64Encoded: true };
}

/** Payload 2.0 responses: an object with `statusCode` is the response; anything else is a JSON 200. */
function responseOf(invocation: Invocation): GatewayResponse {
  const result = invocation.result;
  if (result === null || typeof result !== 'object' || !('statusCode' in result)) {
    return answer(200, result, invocation);
  }
  const headers = Object.fromEntries(Object.entries(result.headers ?? {}).map(([name, value]) => [name.toLowerCase(), String(value)]));
  const body = result.isBase64Encoded ? Buffer.from(String(result.body ?? ''), 'base64').toString('utf8') : String(result.body ?? '');
  let json: unknown;
  try {
    json = body ? JSON.parse(body) : undefined;
  } catch {
    json = undefined;
  }
  return { status: Number(result.statusCode), headers, body, json, invocation };
}

function answer(status: number, json: unknown, invocation?: Invocation): GatewayResponse {
  const body = JSON.stringify(json);
  return { status, headers: { 'content-type': 'application/json' }, body, json, ...(invocation ? { invocation } : {}) };
}

function safeDecodeUri(path: string): string {
  try {
    return decodeURIComponent(path);
  } catch {
    return path;
  }
}

/** The logical id of the resource whose `Ref` resolved to `physical`. */
function reverseRef(deployment: Deployment, physical: string): string {
  const found = Object.keys(deployment.template.Resources).find((logicalId) => deployment.ref(logicalId) === physical);
  if (!found) throw new Error(`no resource is ${physical}`);
  return found;
}

/**
 * The WebSocket API's routes as API Gateway calls them (developer guide, "WebSocket APIs":
 * `$connect`, `$disconnect`, and messages routed by the route selection expression, here
 * `$request.body.action`, to a route of that key or else `$default`).
 */
export class WebSocketGateway {
  private readonly fn: DeployedFunction;
  private readonly apiId: string;
  private readonly routeKeys: Set<string>;
  private readonly selection: string;

  constructor(
    private readonly deployment: Deployment,
    private readonly lambda: LambdaService,
  ) {
    const [api] = deployment.ofType('AWS::ApiGatewayV2::Api').filter(([, resource]) => resource.Properties.ProtocolType === 'WEBSOCKET');
    const [apiLogicalId, resource] = api as [string, TemplateResource];
    this.apiId = deployment.ref(apiLogicalId);
    this.selection = String(resource.Properties.RouteSelectionExpression);
    const routes = deployment.ofType('AWS::ApiGatewayV2::Route').filter(([, route]) => route.Properties.ApiId?.Ref === apiLogicalId);
    this.routeKeys = new Set(routes.map(([, route]) => String(route.Properties.RouteKey)));
    this.fn = deployment.functionNamed(/the WebSocket API/);
  }

  private context(connectionId: string, routeKey: string, eventType: string) {
    const now = Date.now();
    return {
      routeKey,
      eventType,
      extendedRequestId: randomBytes(8).toString('hex'),
      requestTime: new Date(now).toUTCString(),
      messageDirection: 'IN',
      stage: 'v1',
      connectedAt: now,
      requestTimeEpoch: now,
      identity: { sourceIp: '203.0.113.7', userAgent: 'test' },
      requestId: randomBytes(8).toString('hex'),
      domainName: `${this.apiId}.execute-api.${this.deployment.region}.amazonaws.com`,
      connectionId,
      apiId: this.apiId,
    };
  }

  connect(connectionId: string, query: Record<string, string>): Promise<Invocation> {
    const multi = Object.fromEntries(Object.entries(query).map(([name, value]) => [name, [value]]));
    return this.lambda.invoke(this.fn, {
      headers: { Host: `${this.apiId}.execute-api.${this.deployment.region}.amazonaws.com`, 'Sec-WebSocket-Version': '13' },
      multiValueHeaders: { Host: [`${this.apiId}.execute-api.${this.deployment.region}.amazonaws.com`], 'Sec-WebSocket-Version': ['13'] },
      queryStringParameters: query,
      multiValueQueryStringParameters: multi,
      requestContext: this.context(connectionId, '$connect', 'CONNECT'),
      isBase64Encoded: false,
    });
  }

  /** `clockOffsetMs`: the function runs with its clock that far ahead (lambda.ts). */
  send(connectionId: string, body: string, options: { clockOffsetMs?: number } = {}): Promise<Invocation> {
    if (this.selection !== '$request.body.action') throw new Error(`route selection ${this.selection} is not emulated`);
    let action: unknown;
    try {
      action = (JSON.parse(body) as { action?: unknown }).action;
    } catch {
      action = undefined;
    }
    const routeKey = typeof action === 'string' && this.routeKeys.has(action) ? action : '$default';
    return this.lambda.invoke(
      this.fn,
      {
        requestContext: { ...this.context(connectionId, routeKey, 'MESSAGE'), messageId: randomBytes(8).toString('hex') },
        body,
        isBase64Encoded: false,
      },
      options,
    );
  }

  disconnect(connectionId: string): Promise<Invocation> {
    return this.lambda.invoke(this.fn, {
      headers: { Host: `${this.apiId}.execute-api.${this.deployment.region}.amazonaws.com` },
      multiValueHeaders: { Host: [`${this.apiId}.execute-api.${this.deployment.region}.amazonaws.com`] },
      requestContext: {
        ...this.context(connectionId, '$disconnect', 'DISCONNECT'),
        disconnectStatusCode: 1001,
        disconnectReason: 'Going away',
      },
      isBase64Encoded: false,
    });
  }
}
