import 'vitest';

// What test/helpers/global-setup.ts provides to every test file.
declare module 'vitest' {
  export interface ProvidedContext {
    /** The run's DynamoDB Local, e.g. `http://127.0.0.1:41234`. */
    dynamoEndpoint: string;
  }
}
