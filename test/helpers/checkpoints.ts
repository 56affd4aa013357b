import { type Checkpoint, emptyCheckpoint, uuid6 } from '@langchain/langgraph-checkpoint';

/** A checkpoint with these channel values, each at version `step`, and a new uuid6 id (time-ordered). */
export function checkpoint(step: number, values: Record<string, unknown>): Checkpoint {
  const made = emptyCheckpoint();
  made.id = uuid6(step);
  made.channel_values = values;
  made.channel_versions = Object.fromEntries(Object.keys(values).map((channel) => [channel, step]));
  return made;
}
