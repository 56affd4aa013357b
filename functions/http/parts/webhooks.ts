import { WebhookService } from '../../core/webhooks/registry.js';
import { DynamoDbWebhookStore } from '../../store/events/webhook-store.js';
import { validateWebhookUrl, webhookSender } from '../../workers/webhook-sender.js';
import type { Part } from '../wiring.js';

/** In a Lambda, webhook URLs follow the AWS rules (public https only); locally http to loopback too. */
export const webhooks: Part<WebhookService> = (wiring) => {
  const local = !wiring.env.AWS_LAMBDA_FUNCTION_NAME;
  return new WebhookService(
    new DynamoDbWebhookStore(wiring.table),
    (url) => void validateWebhookUrl(url, { allowLoopbackHttp: local }),
    webhookSender({ allowLoopbackHttp: local }),
  );
};
