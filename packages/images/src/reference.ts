// Image references as Docker parses them (`busybox` is
// docker.io/library/busybox:latest; `oci-archive:/path.tar`,
// `docker-archive:/path.tar` are offline sources). The parser is pure and
// lives in core's vocabulary, so the jobspec checks a task's `image` with
// the same rules at validate; this package keeps its names.
export {
  DOCKER_HUB,
  DOCKER_HUB_API_HOST,
  DOCKER_HUB_CONFIG_KEY,
  parseImageReference,
  parseRegistryReference,
  registryApiHost,
  repositoryName,
  type ArchiveReference,
  type ImageReference,
  type RegistryReference,
} from '@csiplug/core';
