// Linux capabilities as an isolated (exec) task gets them: Nomad's default
// set, every capability runc knows, and the one spelling of a capability's
// name. The jobspec reader checks a task's cap_add / cap_drop and the agent
// config's allowed caps with them; the exec driver builds the task's OCI
// config from them.
import { ValidationError } from '../errors';

/** Nomad's default capability set for isolated tasks (its exec driver's allow_caps default). */
export const DEFAULT_TASK_CAPS: readonly string[] = [
  'CAP_AUDIT_WRITE',
  'CAP_CHOWN',
  'CAP_DAC_OVERRIDE',
  'CAP_FOWNER',
  'CAP_FSETID',
  'CAP_KILL',
  'CAP_MKNOD',
  'CAP_NET_BIND_SERVICE',
  'CAP_SETFCAP',
  'CAP_SETGID',
  'CAP_SETPCAP',
  'CAP_SETUID',
  'CAP_SYS_CHROOT',
];

/** Every capability runc 1.1 knows, for a privileged task. */
export const ALL_CAPS: readonly string[] = [
  'CAP_CHOWN',
  'CAP_DAC_OVERRIDE',
  'CAP_DAC_READ_SEARCH',
  'CAP_FOWNER',
  'CAP_FSETID',
  'CAP_KILL',
  'CAP_SETGID',
  'CAP_SETUID',
  'CAP_SETPCAP',
  'CAP_LINUX_IMMUTABLE',
  'CAP_NET_BIND_SERVICE',
  'CAP_NET_BROADCAST',
  'CAP_NET_ADMIN',
  'CAP_NET_RAW',
  'CAP_IPC_LOCK',
  'CAP_IPC_OWNER',
  'CAP_SYS_MODULE',
  'CAP_SYS_RAWIO',
  'CAP_SYS_CHROOT',
  'CAP_SYS_PTRACE',
  'CAP_SYS_PACCT',
  'CAP_SYS_ADMIN',
  'CAP_SYS_BOOT',
  'CAP_SYS_NICE',
  'CAP_SYS_RESOURCE',
  'CAP_SYS_TIME',
  'CAP_SYS_TTY_CONFIG',
  'CAP_MKNOD',
  'CAP_LEASE',
  'CAP_AUDIT_WRITE',
  'CAP_AUDIT_CONTROL',
  'CAP_SETFCAP',
  'CAP_MAC_OVERRIDE',
  'CAP_MAC_ADMIN',
  'CAP_SYSLOG',
  'CAP_WAKE_ALARM',
  'CAP_BLOCK_SUSPEND',
  'CAP_AUDIT_READ',
  'CAP_PERFMON',
  'CAP_BPF',
  'CAP_CHECKPOINT_RESTORE',
];

/** "sys_admin", "SYS_ADMIN" or "CAP_SYS_ADMIN" → "CAP_SYS_ADMIN"; throws for a name no kernel has. */
export function capabilityName(name: string): string {
  const upper = name.trim().toUpperCase();
  const full = upper.startsWith('CAP_') ? upper : `CAP_${upper}`;
  if (!ALL_CAPS.includes(full)) throw new ValidationError(`"${name}" is not a Linux capability`, 'cap');
  return full;
}
