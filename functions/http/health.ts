import { createPublicHandler } from './public.js';
import { json } from './responses.js';

/** `GET /health`: no key needed, touches nothing, for load balancers and `npm start` checks. */
export const handler = createPublicHandler({ 'GET /health': async () => json(200, { ok: true }) });
