// The jobspecs and volume files the demo, the end-to-end tests and the
// benchmarks run: the hostpath plugin as a monolith plugin job, a workload
// with one CSI volume, and a volume on the hostpath plugin. HCL text, so
// each run goes through the same parser a user's files do.
import { CsiplugError } from '@csiplug/core';
import * as fs from 'fs';
import * as path from 'path';
import { DEFAULT_CHROOT_ENV } from '@csiplug/jobspec';

/**
 * The hostpath plugin's package is not installed: it is an optional
 * dependency of the agent (a test plugin, not something an agent needs),
 * and only the demo and the tests run it.
 */
export class HostpathPluginMissingError extends CsiplugError {
  constructor(cause: unknown) {
    super(
      'EHOSTPATH_PLUGIN_NOT_FOUND',
      'the hostpath plugin (package @csiplug/hostpath-plugin) is not installed, and the demo runs it as its CSI plugin: install @csiplug/hostpath-plugin (npm install @csiplug/hostpath-plugin) beside @csiplug/agent, or install the agent without --omit=optional',
      { cause },
    );
  }
}

/** The hostpath plugin's package dir, through symlinks; HostpathPluginMissingError when it is not installed. */
export function hostpathPluginDir(): string {
  let manifest: string;
  try {
    manifest = require.resolve('@csiplug/hostpath-plugin/package.json');
  } catch (err) {
    throw new HostpathPluginMissingError(err);
  }
  return fs.realpathSync(path.dirname(manifest));
}

/** The hostpath plugin (this repo's reference plugin) as a monolith plugin job. */
export function hostpathPluginJobHcl(
  options: {
    pluginId?: string;
    jobId?: string;
    restartDelay?: string;
    driver?: 'exec' | 'raw_exec';
    node?: string;
    extraArgs?: readonly string[];
  } = {},
): string {
  const pluginId = options.pluginId ?? 'hostpath';
  const restart = options.restartDelay
    ? `
      restart {
        attempts = 3
        interval = "10m"
        delay    = "${options.restartDelay}"
        mode     = "fail"
      }`
    : '';
  return `
job "${options.jobId ?? `${pluginId}-plugin`}" {
  group "plugin" {
    task "plugin" {
      driver = "${options.driver ?? 'raw_exec'}"
      config {
        command = ${JSON.stringify(options.node ?? 'node')}
        args = ["\${CSIPLUG_HOSTPATH_CLI}", "--endpoint", "\${CSI_ENDPOINT}", "--node-id", "\${CSIPLUG_NODE_ID}",
                "--state-dir", "\${CSIPLUG_PLUGIN_DATA_DIR}/state", "--mode", "monolith", "--log-level", "warn",
                "--name", "${pluginId}.csiplug.io"${(options.extraArgs ?? []).map((a) => `, ${JSON.stringify(a)}`).join('')}]
      }
      csi_plugin {
        id   = "${pluginId}"
        type = "monolith"
      }${restart}
      kill_signal = "SIGINT"
    }
  }
}`;
}

/**
 * A workload job: one group, volume "data" (single-node-writer) from
 * `volumeId`, one /bin/sh task running `script` (which finds the volume in
 * $CSIPLUG_VOLUME_DATA) with the volume linked at "data" in its task dir.
 */
export function workloadJobHcl(jobId: string, volumeId: string, script: string, driver: 'exec' | 'raw_exec' = 'raw_exec'): string {
  return `
job "${jobId}" {
  group "app" {
    volume "data" {
      type            = "csi"
      source          = "${volumeId}"
      access_mode     = "single-node-writer"
      attachment_mode = "file-system"
    }
    task "writer" {
      driver = "${driver}"
      config {
        command = "/bin/sh"
        args    = ["-c", ${JSON.stringify(script)}]
      }
      volume_mount {
        volume      = "data"
        destination = "data"
      }
    }
  }
}`;
}

/** A single-node-writer file-system volume on a plugin, for `volume create`. */
export function volumeHcl(id: string, pluginId = 'hostpath', capacityMin = '10MiB'): string {
  return `
id           = "${id}"
name         = "${id}"
type         = "csi"
plugin_id    = "${pluginId}"
capacity_min = "${capacityMin}"
capability {
  access_mode     = "single-node-writer"
  attachment_mode = "file-system"
}`;
}

/**
 * The host dirs an isolated hostpath plugin task must see to run: the
 * plugin's package (its CLI) and the dir whose node_modules its imports
 * resolve from (a workspace root or an installed project), each resolved
 * through symlinks, nested ones dropped. For `plugin "exec" { chroot_env }`.
 * HostpathPluginMissingError when the plugin is not installed.
 */
export function hostpathPluginCodeDirs(): string[] {
  const pkg = hostpathPluginDir();
  const grpc = fs.realpathSync(require.resolve('@grpc/grpc-js/package.json', { paths: [pkg] }));
  // The outermost node_modules (a dependency nested below another's, or a pnpm store, lies inside it).
  const parts = grpc.split(path.sep);
  const root = parts.slice(0, parts.indexOf('node_modules')).join(path.sep);
  // node itself, when it is not under a default chroot dir (nvm, /opt…): its install prefix.
  const prefix = path.dirname(path.dirname(fs.realpathSync(process.execPath)));
  const inDefault = ['/usr', '/bin', '/sbin', '/lib', '/lib64'].some((d) => prefix === d || prefix.startsWith(d + path.sep));
  // A root of "/" (node_modules at the top) cannot be bound: the package dir alone then.
  const dirs = [...new Set([pkg, ...(root ? [root] : []), ...(inDefault ? [] : [prefix])])].sort();
  return dirs.filter((d, i) => !dirs.slice(0, i).some((o) => d.startsWith(o + path.sep)));
}

/**
 * The agent config lines that show isolated tasks each of `dirs` at its own
 * path besides the default chroot: `client { chroot_env }` with the defaults
 * written out, since a chroot_env map replaces them, as in Nomad.
 */
export function chrootEnvConfigWith(dirs: readonly string[]): string {
  const entries = { ...DEFAULT_CHROOT_ENV, ...Object.fromEntries(dirs.map((d) => [d, d])) };
  const lines = Object.entries(entries).map(([host, inTask]) => `    ${JSON.stringify(host)} = ${JSON.stringify(inTask)}`);
  return `client {\n  chroot_env = {\n${lines.join('\n')}\n  }\n}\n`;
}

/** The node binary an isolated plugin task runs (its absolute path: the task's PATH is not the agent's). */
export function nodeBinary(): string {
  return fs.realpathSync(process.execPath);
}
