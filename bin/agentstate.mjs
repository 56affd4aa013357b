#!/usr/bin/env node
// `npx agentstate …` (package.json "bin"): registers tsx, then runs the TypeScript CLI.
import { register } from 'tsx/esm/api';

register();
await import('./agentstate.ts');
