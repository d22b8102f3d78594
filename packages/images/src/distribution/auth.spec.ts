import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CredentialsConfigError } from '../errors';
import { basicAuthorization, parseWwwAuthenticate, resolveCredentials } from './auth';

describe('parseWwwAuthenticate', () => {
  it('reads a Docker Hub bearer challenge', () => {
    expect(
      parseWwwAuthenticate(
        'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/busybox:pull"',
      ),
    ).toEqual([
      {
        scheme: 'bearer',
        params: { realm: 'https://auth.docker.io/token', service: 'registry.docker.io', scope: 'repository:library/busybox:pull' },
      },
    ]);
  });

  it('reads Basic, unquoted tokens, escapes, and several challenges', () => {
    expect(parseWwwAuthenticate('Basic realm="Registry Realm"')).toEqual([{ scheme: 'basic', params: { realm: 'Registry Realm' } }]);
    expect(parseWwwAuthenticate('Bearer realm=https://a/t, service=x, Basic realm="a\\"b"')).toEqual([
      { scheme: 'bearer', params: { realm: 'https://a/t', service: 'x' } },
      { scheme: 'basic', params: { realm: 'a"b' } },
    ]);
  });

  it('ignores unknown schemes and garbage without throwing', () => {
    expect(parseWwwAuthenticate('Negotiate abc')).toEqual([]);
    expect(parseWwwAuthenticate('"""')).toEqual([]);
    expect(parseWwwAuthenticate('')).toEqual([]);
  });

  it('builds a Basic header', () => {
    expect(basicAuthorization({ username: 'u', password: 'p:w' })).toBe(`Basic ${Buffer.from('u:p:w').toString('base64')}`);
  });
});

describe('resolveCredentials', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'images-auth-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  const config = (doc: unknown) => {
    const file = join(dir, 'config.json');
    writeFileSync(file, typeof doc === 'string' ? doc : JSON.stringify(doc));
    return file;
  };

  it("takes the task's auth block first", () => {
    const file = config({ auths: { 'r.io': { auth: Buffer.from('cfg:pw').toString('base64') } } });
    expect(resolveCredentials('r.io', { username: 'job', password: 'x' }, file)).toEqual({
      username: 'job',
      password: 'x',
      source: "the task's auth block",
    });
  });

  it('skips a task auth block for another server_address', () => {
    const file = config({ auths: { 'https://r.io': { username: 'cfg', password: 'pw' } } });
    expect(resolveCredentials('r.io', { username: 'job', password: 'x', server_address: 'other.io' }, file)).toMatchObject({
      username: 'cfg',
      password: 'pw',
    });
  });

  it('reads auths.<host>.auth (base64) and Docker Hub under its v1 key', () => {
    const file = config({ auths: { 'https://index.docker.io/v1/': { auth: Buffer.from('hub:s3:cret').toString('base64') } } });
    expect(resolveCredentials('docker.io', undefined, file)).toMatchObject({ username: 'hub', password: 's3:cret' });
    expect(resolveCredentials('r.io', undefined, file)).toBeUndefined();
  });

  it('is anonymous without a config file', () => {
    expect(resolveCredentials('r.io', undefined, join(dir, 'missing.json'))).toBeUndefined();
    expect(resolveCredentials('r.io', undefined, undefined)).toBeUndefined();
  });

  it('refuses a corrupt config and a credential helper, naming the file', () => {
    expect(() => resolveCredentials('r.io', undefined, config('{nope'))).toThrow(CredentialsConfigError);
    const file = config({ credHelpers: { 'r.io': 'ecr-login' } });
    expect(() => resolveCredentials('r.io', undefined, file)).toThrow(/docker-credential-ecr-login.*not supported/);
    expect(() => resolveCredentials('r.io', undefined, file)).toThrow(file);
  });
});
