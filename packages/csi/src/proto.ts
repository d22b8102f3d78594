// Loads the CSI wire contract once. The .proto ships inside the package
// (dist/proto/csi.proto, copied by the build) and is found relative to this
// compiled module, so an installed tarball works without the repository.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { CsiProtoMissingError, UnknownCsiMethodError } from './errors';
import type { ProtoGrpcType } from './generated/csi';

/**
 * The one set of proto-loader options used everywhere (client, server,
 * generated types — scripts/gen-types.sh passes the same flags). camelCase
 * field names, 64-bit integers as decimal strings, enums as their names,
 * defaults filled in, and a virtual field naming the set member of a oneof.
 */
export const PROTO_LOADER_OPTIONS: Readonly<protoLoader.Options> = Object.freeze({
  keepCase: false,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
});

/** Full gRPC service names of the three CSI services csiplug speaks. */
export const CSI_SERVICES = {
  identity: 'csi.v1.Identity',
  controller: 'csi.v1.Controller',
  node: 'csi.v1.Node',
} as const;
export type CsiServiceKey = keyof typeof CSI_SERVICES;

/** Absolute path of csi.proto: inside the package when built, the repository copy when run from source. */
export function csiProtoPath(): string {
  const candidates = [
    path.join(__dirname, 'proto', 'csi.proto'), // dist/proto/csi.proto
    path.join(__dirname, '..', '..', '..', 'proto', 'csi', 'v1', 'csi.proto'), // packages/csi/src -> repo/proto
  ];
  for (const c of candidates) if (fs.existsSync(c)) return c;
  throw new CsiProtoMissingError(candidates);
}

let cachedDefinition: protoLoader.PackageDefinition | undefined;
let cachedGrpc: ProtoGrpcType | undefined;

/** The proto-loader package definition of csi.proto (loaded once). */
export function csiPackageDefinition(): protoLoader.PackageDefinition {
  if (!cachedDefinition) {
    const file = csiProtoPath();
    cachedDefinition = protoLoader.loadSync(path.basename(file), { ...PROTO_LOADER_OPTIONS, includeDirs: [path.dirname(file)] });
  }
  return cachedDefinition;
}

/** The typed grpc-js object tree (`csi.v1.Identity`, …) for csi.proto. */
export function csiGrpcObject(): ProtoGrpcType {
  if (!cachedGrpc) cachedGrpc = grpc.loadPackageDefinition(csiPackageDefinition()) as unknown as ProtoGrpcType;
  return cachedGrpc;
}

/** The method definition (path, serializers) of one RPC. */
export function csiMethodDefinition(service: CsiServiceKey, rpc: string): protoLoader.MethodDefinition<object, object> {
  const svc = csiPackageDefinition()[CSI_SERVICES[service]] as protoLoader.ServiceDefinition | undefined;
  const def = svc?.[rpc];
  if (!def) throw new UnknownCsiMethodError(CSI_SERVICES[service], rpc);
  return def as protoLoader.MethodDefinition<object, object>;
}
