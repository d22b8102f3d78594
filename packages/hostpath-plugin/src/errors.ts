// Errors of the hostpath plugin's own machinery (mount commands, its volume
// metadata file). Handlers answer CSI callers with csiStatus errors; these
// reach a caller as INTERNAL with their message, and carry a stable code
// for the plugin's log (see @csiplug/core's error-code convention).
import { CsiplugError } from '@csiplug/core';

export class HostPathPluginError extends CsiplugError {}

/** mount(8) or umount(8) failed; says which command, with which arguments, and what it printed. */
export class MountCommandError extends HostPathPluginError {
  constructor(
    readonly command: string,
    readonly args: readonly string[],
    detail: string,
    options?: { cause?: unknown },
  ) {
    super('EMOUNT_COMMAND', `${command} ${args.join(' ')} failed: ${detail}`, options);
  }
}

/** The volume metadata file exists but cannot be read or parsed. */
export class VolumeMetadataError extends HostPathPluginError {
  constructor(
    readonly file: string,
    cause: unknown,
  ) {
    super('EVOLUME_METADATA', `cannot read volume metadata ${file}: ${(cause as Error)?.message ?? String(cause)}`, { cause });
  }
}

/** tar(1) or cp(1) — a snapshot's archive, a restore, a clone — failed or timed out; says which command and what it printed. */
export class DataCommandError extends HostPathPluginError {
  constructor(
    readonly command: string,
    readonly args: readonly string[],
    readonly detail: string,
    options?: { cause?: unknown },
  ) {
    super('EDATA_COMMAND', `${command} ${args.join(' ')} failed: ${detail}`, options);
  }

  /** The command ran out of space (ENOSPC). */
  get noSpace(): boolean {
    return /No space left on device/i.test(this.detail);
  }
}
