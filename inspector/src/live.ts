import type { StateChangedEvent } from './api.js';

export type LiveStatus = 'connecting' | 'live' | 'reconnecting' | 'offline';

export interface LiveOptions {
  webSocketUrl: string;
  apiKey: string;
  sessionId: string;
  onEvent: (event: StateChangedEvent) => void;
  onStatus: (status: LiveStatus) => void;
  /** Called once the subscription is acknowledged again after a drop: reread what was missed. */
  onResubscribed: () => void;
}

/**
 * Follows one session over the WebSocket API (API.md section 9). Live sync is a view, not a
 * log: after a drop it reconnects with backoff and tells the page to reread. The server closes
 * a connection after 10 minutes without messages, so the subscription is renewed every few
 * minutes (subscribing again is harmless).
 */
export function followSession(options: LiveOptions): () => void {
  let socket: WebSocket | undefined;
  let attempts = 0;
  let stopped = false;
  let everSubscribed = false;
  let retryTimer: ReturnType<typeof setTimeout> | undefined;
  let keepAlive: ReturnType<typeof setInterval> | undefined;

  const subscribe = () => socket?.send(JSON.stringify({ action: 'subscribe', sessionId: options.sessionId }));

  const connect = () => {
    options.onStatus(attempts === 0 ? 'connecting' : 'reconnecting');
    const url = new URL(options.webSocketUrl);
    url.searchParams.set('token', options.apiKey);
    const current = new WebSocket(url);
    socket = current;
    current.onopen = () => subscribe();
    current.onmessage = (message) => {
      let data: { type?: string; sessionId?: string };
      try {
        data = JSON.parse(String(message.data)) as typeof data;
      } catch {
        return;
      }
      if (data.type === 'subscribed' && data.sessionId === options.sessionId) {
        attempts = 0;
        options.onStatus('live');
        if (everSubscribed) options.onResubscribed();
        everSubscribed = true;
      } else if (data.type === 'state.changed' && data.sessionId === options.sessionId) {
        options.onEvent(data as StateChangedEvent);
      }
    };
    current.onclose = () => {
      if (stopped || socket !== current) return;
      attempts += 1;
      options.onStatus(attempts > 5 ? 'offline' : 'reconnecting');
      const delay = Math.min(10_000, 250 * 2 ** Math.min(attempts, 6)) * (0.5 + Math.random() / 2);
      retryTimer = setTimeout(connect, delay);
    };
  };

  connect();
  keepAlive = setInterval(() => {
    if (socket?.readyState === WebSocket.OPEN) subscribe();
  }, 4 * 60_000);

  return () => {
    stopped = true;
    clearTimeout(retryTimer);
    clearInterval(keepAlive);
    socket?.close();
  };
}
