// Registry authentication as Docker does it: parse a WWW-Authenticate
// challenge (Bearer realm/service/scope, or Basic), and find credentials for
// a registry — the job's `auth { username, password, server_address }`
// first, then a docker config.json (`auths.<host>.auth` base64 or
// username/password). Credential helpers (credsStore/credHelpers) are out of
// scope: a config that names one for this registry gets an error saying so.
import { readFileSync } from 'node:fs';
import { CredentialsConfigError } from '../errors';
import { DOCKER_HUB, DOCKER_HUB_CONFIG_KEY } from '../reference';

export interface AuthChallenge {
  readonly scheme: 'bearer' | 'basic';
  readonly params: Readonly<Record<string, string>>;
}

/** A task's `auth {}` block, Nomad's docker driver fields. */
export interface AuthConfig {
  readonly username?: string;
  readonly password?: string;
  readonly server_address?: string;
}

export interface Credentials {
  readonly username: string;
  readonly password: string;
  /** Where they came from, for errors: "the task's auth block", "docker config /x (auths.r.io)". */
  readonly source: string;
}

/**
 * Parses a WWW-Authenticate header into its challenges (RFC 7235: scheme,
 * then comma-separated key=value or key="quoted value" params).
 */
export function parseWwwAuthenticate(header: string): AuthChallenge[] {
  const challenges: AuthChallenge[] = [];
  let i = 0;
  const s = header;
  const skipSpace = () => {
    while (i < s.length && (s[i] === ' ' || s[i] === '\t')) i++;
  };
  while (i < s.length) {
    skipSpace();
    while (s[i] === ',') {
      i++;
      skipSpace();
    }
    const schemeMatch = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+/.exec(s.slice(i));
    if (!schemeMatch) break;
    const scheme = schemeMatch[0].toLowerCase();
    i += schemeMatch[0].length;
    const params: Record<string, string> = {};
    for (;;) {
      skipSpace();
      const keyMatch = /^([A-Za-z0-9!#$%&'*+.^_`|~-]+)\s*=\s*/.exec(s.slice(i));
      if (!keyMatch) break;
      i += keyMatch[0].length;
      let value = '';
      if (s[i] === '"') {
        i++;
        while (i < s.length && s[i] !== '"') {
          if (s[i] === '\\' && i + 1 < s.length) i++;
          value += s[i];
          i++;
        }
        i++;
      } else {
        const tokenMatch = /^[^,\s]*/.exec(s.slice(i))!;
        value = tokenMatch[0];
        i += value.length;
      }
      params[keyMatch[1]!.toLowerCase()] = value;
      skipSpace();
      if (s[i] === ',') i++;
      else break;
    }
    if (scheme === 'bearer' || scheme === 'basic') challenges.push({ scheme, params });
  }
  return challenges;
}

/** The Authorization header value for Basic. */
export function basicAuthorization(c: Pick<Credentials, 'username' | 'password'>): string {
  return `Basic ${Buffer.from(`${c.username}:${c.password}`, 'utf8').toString('base64')}`;
}

/** Strips a scheme and path from a server address: "https://r.io/v1/" → "r.io". */
function hostOf(address: string): string {
  return address
    .replace(/^[a-z]+:\/\//i, '')
    .replace(/\/.*$/, '')
    .toLowerCase();
}

function sameRegistry(address: string, registry: string): boolean {
  const host = hostOf(address);
  const wanted = registry.toLowerCase();
  if (host === wanted) return true;
  if (wanted === DOCKER_HUB) return host === 'index.docker.io' || host === 'registry-1.docker.io' || host === 'docker.io';
  return false;
}

/**
 * Credentials for `registry`: the task's auth block when it has a username
 * (and names this registry or none), else the docker config file's entry,
 * else none (anonymous).
 */
export function resolveCredentials(
  registry: string,
  auth: AuthConfig | undefined,
  dockerConfigPath: string | undefined,
): Credentials | undefined {
  if (auth?.username !== undefined && auth.username !== '') {
    if (auth.server_address === undefined || auth.server_address === '' || sameRegistry(auth.server_address, registry)) {
      return { username: auth.username, password: auth.password ?? '', source: "the task's auth block" };
    }
  }
  if (dockerConfigPath === undefined) return undefined;
  return credentialsFromDockerConfig(registry, dockerConfigPath);
}

export function credentialsFromDockerConfig(registry: string, file: string): Credentials | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new CredentialsConfigError(file, `cannot be read (${(err as Error).message})`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new CredentialsConfigError(
      file,
      `is not JSON (${(err as Error).message}); fix it or point the agent's plugin "docker" auth { config } elsewhere`,
    );
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) throw new CredentialsConfigError(file, 'is not a JSON object');
  const config = doc as { auths?: unknown; credHelpers?: unknown; credsStore?: unknown };
  const auths = config.auths !== null && typeof config.auths === 'object' ? (config.auths as Record<string, unknown>) : {};
  const key = Object.keys(auths).find((k) => sameRegistry(k, registry) || (registry === DOCKER_HUB && k === DOCKER_HUB_CONFIG_KEY));
  const entry = key !== undefined ? auths[key] : undefined;
  const where = `docker config ${file} (auths.${key ?? registry})`;
  if (entry !== null && typeof entry === 'object') {
    const e = entry as { auth?: unknown; username?: unknown; password?: unknown };
    if (typeof e.auth === 'string' && e.auth !== '') {
      const decoded = Buffer.from(e.auth, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      if (colon <= 0) throw new CredentialsConfigError(file, `auths.${key}.auth is not base64 of "username:password"`);
      return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1), source: where };
    }
    if (typeof e.username === 'string' && e.username !== '') {
      return { username: e.username, password: typeof e.password === 'string' ? e.password : '', source: where };
    }
  }
  const helpers =
    config.credHelpers !== null && typeof config.credHelpers === 'object' ? (config.credHelpers as Record<string, unknown>) : {};
  const helperKey = Object.keys(helpers).find((k) => sameRegistry(k, registry));
  const helper = helperKey !== undefined ? helpers[helperKey] : config.credsStore;
  if (typeof helper === 'string' && helper !== '') {
    throw new CredentialsConfigError(
      file,
      `names the credential helper "docker-credential-${helper}" for ${registry}; credential helpers are not supported: put the credentials in auths.${registry}.auth (base64 of user:password) or in the task's auth { username, password }`,
    );
  }
  return undefined;
}
