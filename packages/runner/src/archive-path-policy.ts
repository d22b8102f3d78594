// Which image archives (`oci-archive:PATH`, `docker-archive:PATH`) this
// agent reads for a job. The agent reads the archive as root, and a job
// names the path: without a policy any job could make it read any host file
// (and see what it makes of it in a task event). An archive's real path
// must be within plugin "docker" { config { allowed_host_paths } }, the same
// list and the same check (withinAllowedHostPaths) as a host-path bind's
// source. volumes { enabled } is not needed: that setting lets a task SEE
// and WRITE host paths inside its container, while an archive is only read
// by the agent, checked as an image and copied into the store; nothing of
// the host path is mounted into the task. The images package applies the
// policy to the path's real path before anything is opened and again to
// what was opened (archive-catalog.ts), so a link out of an allowed dir is
// refused.
import { withinAllowedHostPaths } from './image-policy';

/** The policy the agent gives its image service: a sentence saying which path and what to add, or undefined when allowed. */
export function archivePathPolicy(allowedHostPaths: readonly string[]): (realPath: string) => string | undefined {
  return (realPath) =>
    withinAllowedHostPaths(realPath, allowedHostPaths)
      ? undefined
      : `${realPath} is not within this agent's allowed_host_paths (${allowedHostPaths.join(', ') || 'none'}); the agent reads an image archive only from there: add its directory to plugin "docker" { config { allowed_host_paths = ["…"] } } in the agent config (volumes { enabled } is not needed for archives), or move the archive under an allowed path`;
}
