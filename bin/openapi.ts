/**
 * `npm run openapi`: writes the OpenAPI document (functions/http/contract/) to docs/openapi.json,
 * the copy `GET /v1/openapi.json` serves. Run it after changing a route, a body schema or an
 * answer's schema; test/unit/openapi.test.ts fails while the committed copy is behind.
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { openApiDocument, openApiText } from '../functions/http/contract/document.js';

const target = fileURLToPath(new URL('../docs/openapi.json', import.meta.url));
writeFileSync(target, openApiText(openApiDocument()));
console.log(`wrote ${target}`);
