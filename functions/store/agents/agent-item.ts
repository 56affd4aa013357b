import { encodeStoredJson } from '../../core/json/json.js';
import { openSecret, sealSecret } from '../../core/kernel/sealing.js';
import type { StateFields } from '../../core/model/fields.js';
import type { AgentLifetime, AgentRecord, AgentRoute } from '../../core/model/model.js';
import { parseJsonText, secretOwner, stringOrNull } from '../table/item-codecs.js';
import * as keys from '../table/keys.js';
import type { Item } from '../table/table-client.js';

// Agents: A#<tenant> / A#<agent>. Imported as a namespace (item-codecs.ts): `agentItem.decode`.

export const key = (tenant: string, agentId: string): Item => ({ pk: keys.agents(tenant), sk: keys.agent(agentId) });

export const encode = (tenant: string, agent: AgentRecord): Item => ({
  ...key(tenant, agent.agentId),
  agentId: agent.agentId,
  parentId: agent.parentId,
  worker: agent.worker
    ? {
        ...agent.worker,
        secret: agent.worker.secret === null ? null : sealSecret(agent.worker.secret, secretOwner(key(tenant, agent.agentId))),
      }
    : undefined,
  config: encodeStoredJson(agent.config),
  stateFields: agent.stateFields ? encodeStoredJson(agent.stateFields) : undefined,
  documents: agent.documents?.shared ? { shared: agent.documents.shared } : undefined,
  routes: agent.routes ? encodeStoredJson(agent.routes) : undefined,
  lifetime: agent.lifetime ? encodeStoredJson(agent.lifetime) : undefined,
  createdAt: agent.createdAt,
  updatedAt: agent.updatedAt,
});

export function decode(item: Item): AgentRecord {
  const worker = item.worker as
    | { url?: string; secret?: string | null; timeoutMs?: number | null; messages?: { last?: number } | null }
    | undefined;
  return {
    agentId: String(item.agentId),
    parentId: stringOrNull(item.parentId),
    worker: worker?.url
      ? {
          url: worker.url,
          // A secret stored before secrets were sealed reads as it is (and is sealed when next written).
          secret: typeof worker.secret === 'string' ? openSecret(worker.secret, secretOwner(item)) : null,
          timeoutMs: worker.timeoutMs == null ? null : Number(worker.timeoutMs),
          ...(typeof worker.messages?.last === 'number' ? { messages: { last: Number(worker.messages.last) } } : {}),
        }
      : null,
    config: parseJsonText(item.config),
    stateFields: parseJsonText(item.stateFields) as StateFields | null,
    documents: (item.documents as { shared?: unknown } | undefined)?.shared === 'write' ? { shared: 'write' } : null,
    ...(item.routes === undefined ? {} : { routes: parseJsonText(item.routes) as AgentRoute[] | null }),
    ...(item.lifetime === undefined ? {} : { lifetime: parseJsonText(item.lifetime) as AgentLifetime | null }),
    createdAt: String(item.createdAt),
    updatedAt: String(item.updatedAt),
  };
}
