// What the agent config says of the node itself, in Nomad's shape: the
// top-level `name`, `datacenter` and `region`, and `client { node_class,
// meta, network_interface }`. Interpolation reads them as `${node.…}` and
// `${meta.…}` (node-attributes.ts); NOMAD_DC and NOMAD_REGION come from them.
// In a cluster, `cluster { node_name node_class meta }` says the same of the
// node: its node_name is the node's name unless `name` is set, its class
// and meta count with client {}'s (a class or meta key given different
// values by the two is an error), and the cluster's node record gets the
// merged class and meta (agent-config.ts), so both views say the same.
// `client { chroot_env }` is the exec driver's (read by chroot-env.ts, handed
// over through readNodeConfig's readClient).
import { type ClusterOptions } from '@csiplug/core';
import type { BlockReader } from './document';
import { DEFAULT_DATACENTER, DEFAULT_REGION } from './node-attributes';

export interface NodeConfig {
  /** Nomad's `name`: node.unique.name (default: the host name; in a cluster, its node_name). */
  name: string;
  datacenter: string;
  region: string;
  /** `client { node_class }`, else the cluster's; '' when neither says. */
  nodeClass: string;
  /** `client { meta }` with the cluster's `meta`. */
  meta: Record<string, string>;
  /** `client { network_interface }`: the interface whose address is attr.unique.network.ip-address; absent: the default route's. */
  networkInterface?: string;
}

export const NODE_CONFIG_KEYS: readonly string[] = Object.freeze(['name', 'datacenter', 'region', 'client']);

const CLIENT_UNSUPPORTED: Readonly<Record<string, string>> = {
  servers: 'a csiplug agent joins no servers (a cluster is set with cluster { etcd { … } }); remove it',
  server_join: 'a csiplug agent joins no servers (a cluster is set with cluster { etcd { … } }); remove it',
  host_volume:
    'csiplug has no host volumes yet: give the task the directory through a CSI volume (the hostpath plugin serves host directories), or a raw_exec task uses host paths directly; remove it',
  options: 'csiplug\'s drivers are configured in plugin "<driver>" { … } blocks (as Nomad\'s plugin blocks); remove it',
  reserved: 'csiplug reserves no resources: tasks are not bin-packed; remove it',
  drain_on_shutdown: 'a csiplug agent leaves its tasks running when it stops (stop_tasks_on_exit = true stops them); remove it',
};

/**
 * The node's part of the agent config; `hostname` is the name when none is
 * given. `readClient` reads what else `client {}` holds (its chroot_env,
 * for the exec driver: agent-config.ts).
 */
export function readNodeConfig(
  r: BlockReader,
  hostname: string,
  cluster: ClusterOptions | undefined,
  readClient?: (client: BlockReader) => void,
): NodeConfig {
  const token = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
  const named = (key: string, fallback: string): string => {
    const value = r.string(key, fallback);
    if (!token.test(value)) r.report(key, `"${value}" must be letters, digits, ".", "_" and "-" (like "dc1")`);
    return value;
  };
  const name = r.string('name') ?? cluster?.nodeName ?? hostname;
  if (name === '' || /[\0\s/]/.test(name))
    r.report('name', `"${name}" must be a node name without spaces or slashes (default: the host name)`);
  const datacenter = named('datacenter', DEFAULT_DATACENTER);
  const region = named('region', DEFAULT_REGION);
  const c = r.block('client', ['enabled', 'node_class', 'meta', 'network_interface', 'chroot_env'], CLIENT_UNSUPPORTED);
  if (c && readClient) readClient(c);
  // Nomad's configs say `enabled = true`; a csiplug agent is always a client.
  if (c && !c.bool('enabled', true)) c.report('enabled', 'may not be false: a csiplug agent is always a client (it runs the tasks)');
  const nodeClass = c?.string('node_class') ?? cluster?.nodeClass ?? '';
  if (c?.has('node_class') && cluster?.nodeClass && cluster.nodeClass !== nodeClass)
    c.report('node_class', `is "${nodeClass}" but cluster { node_class } is "${cluster.nodeClass}": set it in one place`);
  const meta: Record<string, string> = { ...(cluster?.meta ?? {}) };
  for (const [key, value] of Object.entries(c?.stringMap('meta') ?? {})) {
    if (Object.hasOwn(meta, key) && meta[key] !== value)
      c!.report('meta', `${key} is "${value}" here but "${meta[key]}" in cluster { meta }: give it one value`);
    meta[key] = value;
  }
  const networkInterface = c?.string('network_interface');
  if (networkInterface !== undefined && !/^[^\s/\0]{1,15}$/.test(networkInterface))
    c!.report('network_interface', `"${networkInterface}" is not a network interface name (like "eth0")`);
  return { name, datacenter, region, nodeClass, meta, ...(networkInterface !== undefined ? { networkInterface } : {}) };
}
