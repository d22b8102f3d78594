// The write claims the volume catalog records on this node, for the check
// of a `job run` (@csiplug/runner writer-claims.ts): a claim of an alloc
// that is no longer live — stopping, waiting for its unmount (perhaps for
// a node plugin that is away), restored after a restart — still makes a
// new writer of the volume wait, so it is a holder too, named with what it
// waits for.
import type { RecordedWriteClaim } from '@csiplug/runner';
import type { AgentContext } from './agent-context';

/** Every write claim in the catalog, each with what it waits for before it is let go. */
export function recordedWriteClaims(
  ctx: Pick<AgentContext, 'catalog' | 'reconciler'>,
  pluginHere: (pluginId: string) => boolean,
): RecordedWriteClaim[] {
  return ctx.catalog.listVolumes().flatMap((volume) =>
    volume.claims
      .filter((c) => c.mode === 'write')
      .map((c) => {
        const record = ctx.reconciler.list(c.allocId).find((r) => r.volumeId === volume.id);
        let waitingFor = 'its claim to be released';
        let pluginAway = false;
        if (record?.desired === 'unmounted') {
          pluginAway = !pluginHere(record.pluginId);
          waitingFor = pluginAway
            ? `its unmount, which waits for node plugin "${record.pluginId}" (not running on this node: start the job that runs it)`
            : `its unmount by node plugin "${record.pluginId}"`;
        }
        return { volumeId: volume.id, allocId: c.allocId, waitingFor, ...(pluginAway ? { pluginAway } : {}) };
      }),
  );
}
