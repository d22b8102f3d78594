// `csiplug volume register|create|deregister|delete|status|detach|init` and
// `csiplug volume snapshot create|delete|list`.
import * as fs from 'fs';
import * as path from 'path';
import type { MountUsageView, SnapshotView, VolumeView } from '@csiplug/api/client';
import { parseVolumeSpec, volumeSpecToDocument } from '@csiplug/jobspec';
import { UsageError } from './args';
import { type Command, VERBOSE_FLAG, inputName, isNotFound, type CommandContext } from './command';
import { formatKV, formatTable, formatTime, orNone, shortId, usageText } from './format';
import { PARAMETER_FLAG, SECRET_FLAG, keyValueFlag } from './csi-call-flags';
import { humanizeIBytes } from './nomad-units';
import { printList } from './print-list';

const PLUGIN_FLAG = { name: 'plugin', kind: 'string' as const, valueName: 'id', help: 'Only this plugin (its id).' };
const PER_PAGE_FLAG = {
  name: 'per-page',
  kind: 'string' as const,
  valueName: 'n',
  help: 'At most this many per page (the plugin pages the list).',
};
const PAGE_TOKEN_FLAG = {
  name: 'page-token',
  kind: 'string' as const,
  valueName: 'token',
  help: 'Go on from this token (the last page printed it).',
};

/** -plugin, -per-page and -page-token as the API's page options; a UsageError for a -per-page that is not a whole number above 0. */
function pageFlags(ctx: CommandContext): { pluginId?: string; perPage?: number; nextToken?: string } {
  const plugin = ctx.stringFlag('plugin');
  const perPage = ctx.stringFlag('per-page');
  const token = ctx.stringFlag('page-token');
  if (perPage !== undefined && (!/^\d+$/.test(perPage) || Number(perPage) === 0))
    throw new UsageError(`-per-page must be a whole number above 0, got "${perPage}"`);
  return {
    ...(plugin ? { pluginId: plugin } : {}),
    ...(perPage !== undefined ? { perPage: Number(perPage) } : {}),
    ...(token ? { nextToken: token } : {}),
  };
}

const volumeRegister: Command = {
  name: 'volume register',
  usageArgs: 'FILE',
  synopsis: 'Add an existing volume to the catalog',
  help: 'Parses the volume spec FILE (HCL or JSON; "-" reads stdin) here and registers the volume, which must already exist on its plugin (external_id is required). A volume registered already is updated, as Nomad does: its secrets, context and capabilities, and its mount options while no allocation claims it; its claims are kept. Its plugin, external id, name and parameters cannot change, nor a capability or mount option in use.',
  minArgs: 1,
  maxArgs: 1,
  api: true,
  json: true,
  async run(ctx) {
    const file = ctx.args[0]!;
    const spec = await parseVolumeSpec(await ctx.readFile(file), inputName(file));
    const client = ctx.client();
    // Registered already (as `volume create` asks): the register updates it, and the words say so, claimed or not.
    const before = await client.getVolume(spec.id).catch((err: unknown) => {
      if (isNotFound(err)) return undefined;
      throw err;
    });
    const volume = await client.registerVolume(volumeSpecToDocument(spec));
    if (ctx.json) ctx.printJson(volume);
    else if (!before) ctx.out(`Volume "${volume.id}" registered (external id ${volume.externalId})`);
    else if (volume.claims.length > 0)
      ctx.out(`Volume "${volume.id}" updated (external id ${volume.externalId}); its claims are kept: the next mount uses the new secrets`);
    else ctx.out(`Volume "${volume.id}" updated (external id ${volume.externalId})`);
    return 0;
  },
};

const volumeCreate: Command = {
  name: 'volume create',
  usageArgs: 'FILE',
  synopsis: 'Create a volume through its plugin and register it',
  help: 'Parses the volume spec FILE (HCL or JSON; "-" reads stdin) here; the agent creates the volume with its plugin\'s CreateVolume, then registers it. A volume the catalog has already is updated, as Nomad\'s create does (what `volume register` may change, then grown to a larger capacity_min).',
  minArgs: 1,
  maxArgs: 1,
  api: true,
  json: true,
  async run(ctx) {
    const file = ctx.args[0]!;
    const spec = await parseVolumeSpec(await ctx.readFile(file), inputName(file));
    const client = ctx.client();
    // The same id again updates the volume, and a larger capacity expands it (Nomad's volume create).
    const before = await client.getVolume(spec.id).catch((err: unknown) => {
      if (isNotFound(err)) return undefined;
      throw err;
    });
    const volume = await client.createVolume(volumeSpecToDocument(spec));
    if (ctx.json) ctx.printJson(volume);
    else if (before) {
      const was = before.capacityBytes !== undefined ? humanizeIBytes(before.capacityBytes) : 'unknown';
      const now = volume.capacityBytes !== undefined ? humanizeIBytes(volume.capacityBytes) : 'unknown';
      const lines = [
        before.capacityBytes === volume.capacityBytes
          ? `Volume "${volume.id}" updated (external id ${volume.externalId}, ${now}); its claims are kept`
          : `Volume "${volume.id}" expanded from ${was} to ${now}`,
      ];
      for (const o of volume.nodeExpansion ?? []) {
        lines.push(
          `  alloc ${o.allocId} (${o.name}): ${o.error !== undefined ? `node expansion failed (made when next mounted, or by running this again): ${o.error}` : o.deferred ? 'expanded on the node when next mounted' : o.noNodeExpansion ? 'nothing to do on the node (its plugin has no node-side expansion)' : `expanded on the node to ${humanizeIBytes(o.capacityBytes ?? 0)}`}`,
        );
      }
      ctx.out(lines.join('\n'));
      // A node expansion that failed is not done: say so in the exit code too.
      if ((volume.nodeExpansion ?? []).some((o) => o.error !== undefined)) return 1;
    } else ctx.out(`Created external volume ${volume.externalId} with ID ${volume.id}`);
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
  help: "Deletes the volume with its plugin's DeleteVolume, then removes it from the catalog. Refused while allocations claim it. -secret adds secrets for the plugin's call, over the volume's own.",
  minArgs: 1,
  maxArgs: 1,
  api: true,
  json: true,
  flags: [SECRET_FLAG],
  async run(ctx) {
    const id = ctx.args[0]!;
    const secrets = keyValueFlag(ctx, 'secret');
    await ctx.client().deleteVolume(id, secrets ? { secrets } : {});
    if (ctx.json) ctx.printJson({ id });
    else ctx.out(`Successfully deleted volume "${id}"`);
    return 0;
  },
};

function accessModes(v: VolumeView): string {
  return [...new Set(v.capabilities.map((c) => c.accessMode))].join(', ');
}

function describe(v: VolumeView, verbose: boolean, usage: MountUsageView[] | Error = []): string {
  const capacity = v.capacityBytes !== undefined ? humanizeIBytes(v.capacityBytes) : '<none>';
  const mount = v.mountOptions
    ? [
        v.mountOptions.fsType && `fs_type: ${v.mountOptions.fsType}`,
        v.mountOptions.mountFlags?.length && `flags: ${v.mountOptions.mountFlags.join(',')}`,
      ]
        .filter(Boolean)
        .join(' ')
    : '';
  const kv = formatKV([
    ['ID', v.id],
    ['Name', v.name],
    ['External ID', orNone(v.externalId)],
    ['Plugin ID', v.pluginId],
    ['Schedulable', String(v.schedulable)],
    ['Capacity', capacity],
    [
      'Topology',
      v.accessibleTopology?.length
        ? v.accessibleTopology
            .map((t) =>
              Object.entries(t.segments)
                .map(([k, val]) => `${k}=${val}`)
                .join(','),
            )
            .join(' or ')
        : '<any>',
    ],
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
        ['Alloc ID', 'Name', 'Desired', 'Held', 'Check', 'Used', 'Attempts', 'Since', 'Last Error'],
        v.mounts.map((m) => [
          shortId(m.allocId, verbose),
          m.name,
          m.pendingUnmount ? 'unmounted (pending)' : m.desired,
          orNone([m.claimed && 'claimed', m.staged && 'staged', m.published && 'published'].filter(Boolean).join(',')),
          orNone(m.check?.state),
          m.desired === 'mounted' && m.published
            ? usageText(usage instanceof Error ? usage : usage.find((u) => u.allocId === m.allocId && u.name === m.name))
            : '-',
          String(m.attempts),
          formatTime(m.since),
          orNone(
            m.lastError ??
              (m.check !== undefined && m.check.state !== 'ok' && m.check.state !== 'remounting' ? m.check.message : undefined),
          ),
        ]),
      )
    : 'No mounts on this node';
  return `${kv}\n\nClaims\n${claims}\n\nMounts\n${mounts}`;
}

const volumeStatus: Command = {
  name: 'volume status',
  usageArgs: '[ID]',
  synopsis: 'Show volumes, or one volume and its claims',
  help:
    'Without ID, lists every volume in the catalog. With ID, shows the volume, the allocations that claim it and, for each mount on this node, its usage (NodeGetVolumeStats). ' +
    'With -type csi, lists the volumes the plugin itself holds (ListVolumes, a page at a time), marking those registered here.',
  minArgs: 0,
  maxArgs: 1,
  api: true,
  json: true,
  flags: [
    VERBOSE_FLAG,
    { name: 'type', kind: 'string', valueName: 'csi', help: "csi: the plugin's own volumes (ListVolumes)." },
    PLUGIN_FLAG,
    PER_PAGE_FLAG,
    PAGE_TOKEN_FLAG,
  ],
  async run(ctx) {
    const client = ctx.client();
    const id = ctx.args[0];
    const type = ctx.stringFlag('type');
    if (type !== undefined && type !== 'csi') throw new UsageError(`-type must be csi, the only volume type, got "${type}"`);
    if (type === 'csi' && id === undefined) {
      const page = await client.listExternalVolumes(pageFlags(ctx));
      printList(ctx, {
        answer: page,
        items: page.Volumes,
        empty: 'No volumes on the plugin',
        header: ['External ID', 'Plugin ID', 'Capacity', 'Published To', 'Condition', 'Registered As'],
        row: (v) => [
          v.externalId,
          v.pluginId,
          v.capacityBytes !== undefined ? humanizeIBytes(v.capacityBytes) : '<none>',
          orNone(v.publishedNodeIds?.join(',')),
          v.condition ? (v.condition.abnormal ? `abnormal: ${v.condition.message}` : 'ok') : '-',
          orNone(v.volumeId),
        ],
        nextPageToken: page.NextToken,
      });
      return 0;
    }
    if (id === undefined) {
      const volumes = await client.listVolumes();
      printList(ctx, {
        answer: volumes,
        items: volumes,
        empty: 'No CSI volumes',
        header: ['ID', 'Name', 'Plugin ID', 'Schedulable', 'Access Mode', 'Claims'],
        row: (v) => [v.id, v.name, v.pluginId, String(v.schedulable), accessModes(v), String(v.claims.length)],
      });
      return 0;
    }
    const volume = await client.getVolume(id);
    const live = volume.mounts?.some((m) => m.desired === 'mounted' && m.published);
    const usage = live ? await client.volumeUsage(volume.id).catch((err: Error) => err) : [];
    if (ctx.json) ctx.printJson(live && !(usage instanceof Error) ? { ...volume, usage } : volume);
    else ctx.out(describe(volume, ctx.verbose, usage));
    return 0;
  },
};

const volumeDetach: Command = {
  name: 'volume detach',
  usageArgs: 'VOLUME NODE',
  synopsis: 'Unpublish a volume from a node whose allocations are gone',
  help: "Unmounts the volume on NODE (this agent's node) for every allocation that claims it but is gone or stopped, and releases those claims (ControllerUnpublishVolume, when the plugin publishes). Refused while a running allocation claims it.",
  minArgs: 2,
  maxArgs: 2,
  api: true,
  json: true,
  async run(ctx) {
    const result = await ctx.client().detachVolume(ctx.args[0]!, ctx.args[1]!);
    if (ctx.json) ctx.printJson(result);
    else
      ctx.out(
        result.released.length
          ? `Volume "${result.volumeId}" detached from node ${result.nodeId} (claims of ${result.released.join(', ')} released)`
          : `Volume "${result.volumeId}" had no claim on node ${result.nodeId}: nothing to detach`,
      );
    return 0;
  },
};

/** The example `volume init` writes: every field, commented. */
export const VOLUME_INIT_HCL = `# A CSI volume for "csiplug volume create" (or, with external_id, "csiplug volume register").
# Nomad's volume specification: https://developer.hashicorp.com/nomad/docs/other-specifications/volume

id        = "database"        # the catalog's id (path-safe)
name      = "database"        # what the plugin is asked to call it
type      = "csi"
plugin_id = "hostpath"        # the csi_plugin id of the plugin job

# Register an existing volume by the plugin's id for it instead of creating one:
# external_id = "0b2d8c6e-…"

# Create from a snapshot, or as a copy of a volume (the plugin's ids; give at most one):
# snapshot_id = "snap-…"
# clone_id    = "0b2d8c6e-…"

# Size: at least capacity_min, at most capacity_max. "volume create" again with a larger
# capacity_min expands the volume (it never shrinks).
capacity_min = "1GiB"
capacity_max = "2GiB"

# How allocs may use it; the job's volume block picks one.
capability {
  access_mode     = "single-node-writer"
  attachment_mode = "file-system"
}

mount_options {
  mount_flags = ["noatime"]
}

# Where the volume must (required) or should (preferred) be reachable from.
# topology_request {
#   required {
#     topology {
#       segments = { "topology.hostpath.csiplug.io/node" = "node-1" }
#     }
#   }
# }

# Passed to the plugin as they are.
parameters {}
secrets {}
context {}
`;

const volumeInit: Command = {
  name: 'volume init',
  usageArgs: '[FILE]',
  synopsis: 'Write a commented example volume file',
  help: 'Writes an example volume specification, every field commented, to FILE (default volume.hcl); refuses to overwrite a file.',
  minArgs: 0,
  maxArgs: 1,
  api: false,
  json: false,
  async run(ctx) {
    const file = path.resolve(ctx.io.cwd ?? process.cwd(), ctx.args[0] ?? 'volume.hcl');
    try {
      fs.writeFileSync(file, VOLUME_INIT_HCL, { flag: 'wx', mode: 0o644 });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST')
        throw new UsageError(`${file} exists already; give another FILE, or remove it first`);
      throw err;
    }
    ctx.out(`Example volume specification written to ${file}`);
    return 0;
  },
};

function describeSnapshot(s: SnapshotView): string[] {
  return [
    s.id,
    s.pluginId,
    orNone(s.sourceVolumeId ?? s.externalSourceVolumeId),
    humanizeIBytes(s.sizeBytes),
    formatTime(s.createTime),
    String(s.ready),
  ];
}

const SNAPSHOT_HEADER = ['Snapshot ID', 'Plugin ID', 'Source Volume', 'Size', 'Created', 'Ready'];

const snapshotCreate: Command = {
  name: 'volume snapshot create',
  usageArgs: 'VOLUME [NAME]',
  synopsis: 'Snapshot a volume through its plugin',
  help: "Takes a snapshot of VOLUME with its plugin's CreateSnapshot; NAME defaults to <volume>-snapshot-<time>. The plugin's controller must offer CREATE_DELETE_SNAPSHOT. -secret and -parameter go to the plugin's call (the secrets over the volume's own).",
  minArgs: 1,
  maxArgs: 2,
  api: true,
  json: true,
  flags: [SECRET_FLAG, PARAMETER_FLAG],
  async run(ctx) {
    const secrets = keyValueFlag(ctx, 'secret');
    const parameters = keyValueFlag(ctx, 'parameter');
    const snap = await ctx.client().createSnapshot(ctx.args[0]!, ctx.args[1], {
      ...(secrets ? { secrets } : {}),
      ...(parameters ? { parameters } : {}),
    });
    if (ctx.json) ctx.printJson(snap);
    else
      ctx.out(`Snapshotted volume ${ctx.args[0]} with snapshot ID ${snap.id}\n\n${formatTable(SNAPSHOT_HEADER, [describeSnapshot(snap)])}`);
    return 0;
  },
};

const snapshotDelete: Command = {
  name: 'volume snapshot delete',
  usageArgs: 'PLUGIN SNAPSHOT',
  synopsis: 'Delete a snapshot through its plugin',
  help: "Deletes SNAPSHOT (the plugin's id for it) with PLUGIN's DeleteSnapshot; one that is gone already counts as deleted. -secret goes to the plugin's call.",
  minArgs: 2,
  maxArgs: 2,
  api: true,
  json: true,
  flags: [SECRET_FLAG],
  async run(ctx) {
    const secrets = keyValueFlag(ctx, 'secret');
    await ctx.client().deleteSnapshot(ctx.args[0]!, ctx.args[1]!, secrets ? { secrets } : {});
    if (ctx.json) ctx.printJson({ pluginId: ctx.args[0], snapshotId: ctx.args[1] });
    else ctx.out(`Deleted snapshot ${ctx.args[1]} of plugin ${ctx.args[0]}`);
    return 0;
  },
};

const snapshotList: Command = {
  name: 'volume snapshot list',
  usageArgs: '',
  synopsis: "List a plugin's snapshots",
  help: "Lists the snapshots the plugin holds (ListSnapshots), a page at a time. -plugin is needed when more than one plugin lists snapshots. A plugin that does not list its snapshots is an error naming it, never an empty list. -secret goes to the plugin's call.",
  minArgs: 0,
  maxArgs: 0,
  api: true,
  json: true,
  flags: [PLUGIN_FLAG, PER_PAGE_FLAG, PAGE_TOKEN_FLAG, SECRET_FLAG],
  async run(ctx) {
    const secrets = keyValueFlag(ctx, 'secret');
    const page = await ctx.client().listSnapshots({ ...pageFlags(ctx), ...(secrets ? { secrets } : {}) });
    printList(ctx, {
      answer: page,
      items: page.Snapshots,
      empty: 'No snapshots',
      header: SNAPSHOT_HEADER,
      row: describeSnapshot,
      nextPageToken: page.NextToken,
    });
    return 0;
  },
};

export const VOLUME_COMMANDS: Command[] = [
  volumeRegister,
  volumeCreate,
  volumeDeregister,
  volumeDelete,
  volumeStatus,
  volumeDetach,
  volumeInit,
  snapshotCreate,
  snapshotDelete,
  snapshotList,
];
