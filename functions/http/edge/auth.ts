import { createHash, timingSafeEqual } from 'node:crypto';
import { AgentStateError } from '../../core/kernel/errors.js';
import { isValidTenantId } from '../../core/kernel/ids.js';

/** What a key grants: its tenant and, when the key is limited to some agents, those agents. */
export interface Grant {
  tenant: string;
  agents: string[] | null;
}

/** Resolves an API key to what it grants, or null for a key nobody issued. */
export type KeyResolver = (apiKey: string) => Promise<Grant | null>;

export const DEFAULT_LOCAL_KEYS = 'local:dev-key';

const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest();

/**
 * Keys from `AGENTSTATE_API_KEYS`: comma-separated `tenant:key` pairs. Only digests are kept,
 * and they are compared in constant time, so the map leaks nothing through timing.
 */
export function keysFromEnv(value: string | undefined): KeyResolver {
  const pairs = parseKeyPairs(value ?? DEFAULT_LOCAL_KEYS).map(({ tenant, key }) => ({ tenant, digest: digest(key) }));
  return async (apiKey) => {
    const presented = digest(apiKey);
    let tenant: string | null = null;
    for (const pair of pairs) {
      if (timingSafeEqual(pair.digest, presented)) tenant = pair.tenant;
    }
    return tenant === null ? null : { tenant, agents: null };
  };
}

export function parseKeyPairs(value: string): Array<{ tenant: string; key: string }> {
  return value
    .split(',')
    .map((pair) => pair.trim())
    .filter((pair) => pair.length > 0)
    .map((pair) => {
      const colon = pair.indexOf(':');
      const tenant = pair.slice(0, colon);
      const key = pair.slice(colon + 1);
      if (colon <= 0 || key.length === 0 || !isValidTenantId(tenant)) {
        throw new Error(`AGENTSTATE_API_KEYS: "${pair.slice(0, 40)}" is not a tenant:key pair with a valid tenant id`);
      }
      return { tenant, key };
    });
}

/** The bearer token of an `Authorization` header, or null when there is none. */
export function bearerToken(header: string | undefined): string | null {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  return match ? (match[1] as string) : null;
}

export function unauthorized(): AgentStateError {
  return new AgentStateError('unauthorized', 'send a valid API key as "Authorization: Bearer <key>"');
}
