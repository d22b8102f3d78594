// The contract of the check every VolumeSpec handed to the catalog goes
// through (token IVolumeSpecValidator). VolumeSpec is a volume as `csiplug
// volume register|create FILE` describes it (Nomad's shape), in its checked,
// camel-cased form. Reading spec files (HCL, JSON) is the jobspec package's
// job; the agent binds its check as the validator.
import type { VolumeSpec } from '@csiplug/core';

// The spec's shape is core's vocabulary (the jobspec package reads spec files
// into it); re-exported here, where the catalog's users name it.
export type { Topology, TopologyRequest, VolumeCapability, VolumeSpec } from '@csiplug/core';

/**
 * Checks a spec that may not have come through a parser (HTTP bodies, code)
 * and returns it in canonical form; throws core's ValidationError naming the
 * field when it is not a good spec.
 */
export type VolumeSpecValidator = (spec: unknown) => VolumeSpec;
