// Checking and normalising registrations: what register() accepts and what a
// restore reads back. Records are frozen so they can be shared between the
// registry, its snapshots and the state DB without copying.
import { ValidationError, assertPathSafeId, sameStringMap } from '@csiplug/core';
import { UnknownPluginTypeError } from './errors';
import type { PluginRegistration, RegisteredPlugin } from './plugin-types';
import type { PluginRegistrationRecord } from './registry-store';

export function assertKnownType(type: unknown, known: ReadonlySet<string>, knownList: readonly string[]): asserts type is string {
  if (typeof type !== 'string' || type.length === 0) throw new ValidationError('plugin type is required', 'type');
  if (!known.has(type)) throw new UnknownPluginTypeError(type, knownList);
}

export function assertPluginName(name: unknown): asserts name is string {
  assertPathSafeId(name, 'plugin name');
}

export function assertAllocId(allocId: unknown): asserts allocId is string {
  assertPathSafeId(allocId, 'alloc id');
}

function checkSocketPath(socketPath: unknown, where: string): string {
  if (typeof socketPath !== 'string' || socketPath.length === 0)
    throw new ValidationError(`${where}: socket path is required`, 'socketPath');
  if (socketPath.includes('\0')) throw new ValidationError(`${where}: socket path may not contain NUL`, 'socketPath');
  return socketPath;
}

function checkOptions(options: unknown, where: string): Readonly<Record<string, string>> {
  if (options === undefined || options === null) return Object.freeze({});
  if (typeof options !== 'object' || Array.isArray(options))
    throw new ValidationError(`${where}: options must be an object of strings`, 'options');
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(options)) {
    if (typeof v !== 'string') throw new ValidationError(`${where}: option "${k}" must be a string, got ${typeof v}`, 'options');
    out[k] = v;
  }
  return Object.freeze(out);
}

/** Validates `input` and returns it as a frozen record. */
export function toRecord(
  input: PluginRegistration,
  known: ReadonlySet<string>,
  knownList: readonly string[],
): Readonly<PluginRegistrationRecord> {
  if (typeof input !== 'object' || input === null) throw new ValidationError('a plugin registration is required');
  assertKnownType(input.type, known, knownList);
  assertPluginName(input.name);
  assertAllocId(input.allocId);
  const where = `plugin "${input.name}" of type ${input.type} (alloc ${input.allocId})`;
  if (input.version !== undefined && typeof input.version !== 'string')
    throw new ValidationError(`${where}: version must be a string`, 'version');
  return Object.freeze({
    type: input.type,
    name: input.name,
    version: input.version ?? '',
    allocId: input.allocId,
    socketPath: checkSocketPath(input.socketPath, where),
    options: checkOptions(input.options, where) as Record<string, string>,
  });
}

/** Whether two records of the same alloc carry the same connection info and metadata. */
export function sameInfo(a: PluginRegistrationRecord, b: PluginRegistrationRecord): boolean {
  return a.version === b.version && a.socketPath === b.socketPath && sameStringMap(a.options, b.options);
}

/** The frozen view handed to callers. */
export function toView(record: Readonly<PluginRegistrationRecord>, restored: boolean): RegisteredPlugin {
  return Object.freeze({ ...record, options: record.options, restored });
}
