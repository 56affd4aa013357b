import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

/**
 * The inspector page: preact, bundled by vite into one flat folder (dist/inspector) that
 * functions/http/handlers/inspector.ts serves: `index.html` at `/`, the rest at `/inspector/<file>`.
 * Built by `npm run build:inspector`, and by `npm start` when missing or stale.
 */
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/inspector/',
  // Outside inspector/: npm start compares the build with the files there (inspector-build.ts).
  cacheDir: fileURLToPath(new URL('../node_modules/.vite-inspector', import.meta.url)),
  // JSX through vite's own transform (oxc), with preact's automatic runtime: no plugin needed.
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: fileURLToPath(new URL('../dist/inspector', import.meta.url)),
    emptyOutDir: true,
    // Flat: the HTTP API serves /inspector/{file}, one path segment.
    assetsDir: '',
    target: 'es2022',
    sourcemap: false,
    reportCompressedSize: false,
  },
  server: {
    // `npm run dev:inspector` next to `npm start`: the API calls go to the local server.
    proxy: { '/v1': { target: 'http://localhost:4000', ws: true }, '/inspector/config.json': 'http://localhost:4000' },
  },
});
