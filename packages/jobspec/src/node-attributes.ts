// Nomad's node attributes and identity as `${…}` interpolation sees them:
// the names a jobspec may use (`${attr.kernel.name}`, `${node.unique.name}`,
// `${meta.rack}`), with Nomad's meanings, and the values one node has for
// them. Pure: the fingerprint that reads the machine is the runner's
// (node-fingerprint.ts); the agent config says the node's name, datacenter,
// region, class and meta (node-config.ts).
//
// These values are for interpolation only, as in Nomad: they are never put
// in a task's environment (a name with dots is no environment name).

/** Nomad's defaults for the agent's `datacenter` and `region`. */
export const DEFAULT_DATACENTER = 'dc1';
export const DEFAULT_REGION = 'global';

/** `${attr.<name>}`: the attributes csiplug fingerprints, each with Nomad's meaning. */
export const NODE_ATTRIBUTES: Readonly<Record<string, string>> = Object.freeze({
  'unique.hostname': "the machine's host name",
  'unique.network.ip-address':
    'the first address of the interface of the default route (or of client { network_interface }), link-local only when it has no other',
  'kernel.name': 'the OS as Go names it ("linux")',
  'kernel.version': 'the kernel release (uname -r)',
  'kernel.arch': 'the machine (uname -m, like "x86_64")',
  'cpu.arch': 'the CPU architecture as Go names it (GOARCH: "amd64", "arm64"…)',
  'cpu.numcores': 'the number of CPU cores',
  'memory.totalbytes': 'the memory of the machine, bytes',
  'os.name': 'the distribution (ID of /etc/os-release, like "debian")',
  'os.version': 'its version (VERSION_ID of /etc/os-release)',
});

/** `${node.<field>}`: the node's identity, from the agent config. */
export const NODE_FIELDS: Readonly<Record<string, string>> = Object.freeze({
  'unique.id': "the agent's node_id",
  'unique.name': "the agent's name (default: the host name; in a cluster, cluster { node_name })",
  datacenter: "the agent's datacenter (default dc1)",
  region: "the agent's region (default global)",
  class: 'client { node_class } (or cluster { node_class }); empty when unset',
});

/** What one node is, for interpolation. */
export interface NodeAttributes {
  /** node.unique.id */
  id: string;
  /** node.unique.name */
  name: string;
  datacenter: string;
  region: string;
  /** node.class ('' when unset, as Nomad's). */
  nodeClass: string;
  /** attr.<name> → value, for the names of NODE_ATTRIBUTES this node has (one it cannot tell is left out). */
  attributes: Readonly<Record<string, string>>;
  /** meta.<key> → value: the agent's client { meta } (and cluster { meta }). */
  meta: Readonly<Record<string, string>>;
}

/** The interpolation map of a node: `attr.<name>`, `node.<field>` and `meta.<key>` keys. */
export function nodeValues(node: NodeAttributes): Record<string, string> {
  const values: Record<string, string> = {
    'node.unique.id': node.id,
    'node.unique.name': node.name,
    'node.datacenter': node.datacenter,
    'node.region': node.region,
    'node.class': node.nodeClass,
  };
  for (const [name, value] of Object.entries(node.attributes)) if (Object.hasOwn(NODE_ATTRIBUTES, name)) values[`attr.${name}`] = value;
  for (const [key, value] of Object.entries(node.meta)) values[`meta.${key}`] = value;
  return values;
}

/** What a `${attr.…}`, `${node.…}` or `${meta.…}` name is: undefined when it has none of those prefixes. */
export function nodeNameProblem(name: string): { known: true } | { known: false; problem: string } | undefined {
  if (name.startsWith('attr.')) {
    const attr = name.slice('attr.'.length);
    return Object.hasOwn(NODE_ATTRIBUTES, attr)
      ? { known: true }
      : {
          known: false,
          problem: `attr.${attr} is not a node attribute csiplug has (attr.${Object.keys(NODE_ATTRIBUTES).join(', attr.')})`,
        };
  }
  if (name.startsWith('node.')) {
    const field = name.slice('node.'.length);
    return Object.hasOwn(NODE_FIELDS, field)
      ? { known: true }
      : { known: false, problem: `node.${field} is not a node field (node.${Object.keys(NODE_FIELDS).join(', node.')})` };
  }
  if (name.startsWith('meta.')) {
    const key = name.slice('meta.'.length);
    return key !== '' && !/\s/.test(key)
      ? { known: true }
      : { known: false, problem: `"${name}" names no meta key: write \${meta.<key>} with a key of the agent's client { meta }` };
  }
  return undefined;
}
