/**
 * A support desk where the state decides which agent answers (API.md section 13): `support`
 * talks with the customer until an order is named, then its route hands each decision to
 * `billing`, which alone can read the card on file. One module serves both agents: agentstate
 * tells a worker which agent it decides as (`agent_id`), who routed the decision to it
 * (`routed_from`) and how (`routing`), and shows it the state as that agent may read it.
 *
 * Register it as both agents' worker (locally by path, as the README's walk-through does):
 *
 *   support   stateFields: order_id (public)       routes: [{"when": {"order_id": {"$exists": true}}, "to": "billing"}]
 *   └─ billing   stateFields: card (private to billing)
 *
 * `support` never sees `card`, not in its DecisionRequest, not in a decision's answer; its route
 * could not even name it (registration refuses a route on a field its agent cannot read).
 */

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type State = { [field: string]: Json };

/** The part of a DecisionRequest this worker reads (the whole is in examples/worker.ts). */
interface DecisionRequest {
  agent_id: string | null;
  routed_from: string | null;
  routing: Array<{ from: string; to: string; via: 'route' | 'handoff' }>;
  trigger: { type: string };
  state: Json;
}

interface DecisionResponse {
  state?: State;
  messages?: Array<{ role: string; content: string }>;
}

/** The card a real billing agent would look up for the customer; a fixed one here. */
const CARD_ON_FILE = 'visa ending 4242';

export function decide(request: DecisionRequest): DecisionResponse {
  const state: State = request.state !== null && typeof request.state === 'object' && !Array.isArray(request.state) ? request.state : {};
  if (request.trigger.type !== 'client.messages') return {};
  if (request.agent_id === 'billing') {
    // Only billing's view holds the card; it keeps it in the state for the next turn.
    const card = typeof state.card === 'string' ? state.card : CARD_ON_FILE;
    return {
      state: { ...state, card },
      messages: [
        { role: 'assistant', content: `Billing here (sent by ${request.routed_from}): order ${state.order_id} is refunded to your card.` },
      ],
    };
  }
  return { messages: [{ role: 'assistant', content: 'Which order is it about? Tell me its id and I will pass you on.' }] };
}
