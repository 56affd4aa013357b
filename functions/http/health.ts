import { createHttpHandler, json } from './api.js';

/** `GET /health`: no key needed, touches nothing, for load balancers and `npm start` checks. */
export const handler = createHttpHandler({ 'GET /health': async () => json(200, { ok: true }) }, { public: true });
