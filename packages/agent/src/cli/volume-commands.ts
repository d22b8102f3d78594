// `csiplug volume register|create|deregister|delete|status`.
import type { VolumeView } from '../service';
import { formatSize, parseVolumeSpec, volumeSpecToDocument } from '../spec';
import { Command, VERBOSE_FLAG, inputName } from './command';
import { formatKV, formatTable, formatTime, orNone, shortId } from './format';

const volumeRegister: Command = {
  name: 'volume register',
  usageArgs: 'FILE',
  synopsis: 'Add an existing volume to the catalog',
  help: 'Parses the volume spec FILE (HCL or JSON; "-" reads stdin) here and registers the volume, which must already exist on its plugin (external_id is required).',
  minArgs: 1,
  maxArgs: 1,
  api: true,
  json: true,
  async run(ctx) {
    const file = ctx.args[0]!;
    const spec = await parseVolumeSpec(await ctx.readFile(file), inputName(file));
    const volume = await ctx.client().registerVolume(volumeSpecToDocument(spec));
    if (ctx.json) ctx.printJson(volume);
    else ctx.out(`Volume "${volume.id}" registered (external id ${volume.externalId})`);
    return 0;
  },
};

const volumeCreate: Command = {
  name: 'volume create',
  usageArgs: 'FILE',
  synopsis: 'Create a volume through its plugin and register it',
  help: "Parses the volume spec FILE (HCL or JSON; \"-\" reads stdin) here; the agent creates the volume with its plugin's CreateVolume, then registers it.",
  minArgs: 1,
  maxArgs: 1,
  api: true,
  json: true,
  async run(ctx) {
    const file = ctx.args[0]!;
    const spec = await parseVolumeSpec(await ctx.readFile(file), inputName(file));
    const volume = await ctx.client().createVolume(volumeSpecToDocument(spec));
    if (ctx.json) ctx.printJson(volume);
    else ctx.out(`Created external volume ${volume.externalId} with ID ${volume.id}`);
    return 0;
  },
};

const volumeDeregister: Command = {
  name: 'volume deregister',
  usageArgs: 'ID',
  synopsis: 'Remove a volume from the catalog (the volume itself stays)',
  help: 'Removes the volume from the catalog; it stays on its plugin. Refused while allocations claim it, unless -force.',
  minArgs: 1,
  maxArgs: 1,
  api: true,
  json: true,
  flags: [{ name: 'force', kind: 'bool', help: 'Deregister even while claimed.' }],
  async run(ctx) {
    const id = ctx.args[0]!;
    await ctx.client().deregisterVolume(id, { force: ctx.flag('force') });
    if (ctx.json) ctx.printJson({ id });
    else ctx.out(`Successfully deregistered volume "${id}"`);
    return 0;
  },
};

const volumeDelete: Command = {
  name: 'volume delete',
  usageArgs: 'ID',
  synopsis: 'Delete a volume through its plugin and deregister it',
  help: "Deletes the volume with its plugin's DeleteVolume, then removes it from the catalog. Refused while allocations claim it.",
  minArgs: 1,
  maxArgs: 1,
  api: true,
  json: true,
  async run(ctx) {
    const id = ctx.args[0]!;
    await ctx.client().deleteVolume(id);
    if (ctx.json) ctx.printJson({ id });
    else ctx.out(`Successfully deleted volume "${id}"`);
    return 0;
  },
};

function accessModes(v: VolumeView): string {
  return [...new Set(v.capabilities.map((c) => c.accessMode))].join(', ');
}

function describe(v: VolumeView, verbose: boolean): string {
  const capacity = v.capacityBytes !== undefined ? formatSize(v.capacityBytes) : '<none>';
  const mount = v.mountOptions ? [v.mountOptions.fsType && `fs_type: ${v.mountOptions.fsType}`, v.mountOptions.mountFlags?.length && `flags: ${v.mountOptions.mountFlags.join(',')}`].filter(Boolean).join(' ') : '';
  const kv = formatKV([
    ['ID', v.id],
    ['Name', v.name],
    ['External ID', orNone(v.externalId)],
    ['Plugin ID', v.pluginId],
    ['Schedulable', String(v.schedulable)],
    ['Capacity', capacity],
    ['Capabilities', v.capabilities.map((c) => `${c.accessMode}/${c.attachmentMode}`).join(', ')],
    ['Mount Options', orNone(mount)],
    ['Created', formatTime(v.createdAt)],
  ]);
  const claims = v.claims.length
    ? formatTable(
        ['Alloc ID', 'Mode', 'Access Mode', 'Attachment Mode', 'Since'],
        v.claims.map((c) => [shortId(c.allocId, verbose), c.mode, c.accessMode, c.attachmentMode, formatTime(c.since)]),
      )
    : 'No claims';
  const mounts = v.mounts?.length
    ? formatTable(
        ['Alloc ID', 'Name', 'Desired', 'Held', 'Check', 'Attempts', 'Since', 'Last Error'],
        v.mounts.map((m) => [
          shortId(m.allocId, verbose),
          m.name,
          m.pendingUnmount ? 'unmounted (pending)' : m.desired,
          orNone([m.claimed && 'claimed', m.staged && 'staged', m.published && 'published'].filter(Boolean).join(',')),
          orNone(m.check?.state),
          String(m.attempts),
          formatTime(m.since),
          orNone(m.lastError ?? (m.check?.state === 'stale' || m.check?.state === 'plugin-away' ? m.check.message : undefined)),
        ]),
      )
    : 'No mounts on this node';
  return `${kv}\n\nClaims\n${claims}\n\nMounts\n${mounts}`;
}

const volumeStatus: Command = {
  name: 'volume status',
  usageArgs: '[ID]',
  synopsis: 'Show volumes, or one volume and its claims',
  help: 'Without ID, lists every volume in the catalog. With ID, shows the volume and the allocations that claim it.',
  minArgs: 0,
  maxArgs: 1,
  api: true,
  json: true,
  flags: [VERBOSE_FLAG],
  async run(ctx) {
    const client = ctx.client();
    const id = ctx.args[0];
    if (id === undefined) {
      const volumes = await client.listVolumes();
      if (ctx.json) ctx.printJson(volumes);
      else if (volumes.length === 0) ctx.out('No CSI volumes');
      else {
        ctx.out(
          formatTable(
            ['ID', 'Name', 'Plugin ID', 'Schedulable', 'Access Mode', 'Claims'],
            volumes.map((v) => [v.id, v.name, v.pluginId, String(v.schedulable), accessModes(v), String(v.claims.length)]),
          ),
        );
      }
      return 0;
    }
    const volume = await client.getVolume(id);
    if (ctx.json) ctx.printJson(volume);
    else ctx.out(describe(volume, ctx.verbose));
    return 0;
  },
};

export const VOLUME_COMMANDS: Command[] = [volumeRegister, volumeCreate, volumeDeregister, volumeDelete, volumeStatus];
