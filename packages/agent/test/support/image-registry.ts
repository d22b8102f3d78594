// A real registry the agent trusts as Docker would, for the image e2e tests:
// Debian's docker-registry on loopback with TLS and basic auth (TestRegistry),
// its CA put at /etc/docker/certs.d/<host:port>/ca.crt where the agent's
// registry trust reads it, and images pushed into it — the hostpath plugin's
// own image through its build tool (what `npm run image:hostpath -- --push`
// runs), or a small image of host binaries. stop() removes only this
// registry's trust dir (other tests may trust theirs meanwhile) and the registry.
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { TestRegistry, buildTestImage, hostBinariesLayer } from '@csiplug/images/testing';

const REPO = path.resolve(__dirname, '..', '..', '..', '..');
const IMAGE_TOOL = path.join(REPO, 'packages', 'hostpath-plugin', 'image');
const DOCKER_CERTS = '/etc/docker/certs.d';

export class TrustedRegistry {
  private constructor(
    readonly registry: TestRegistry,
    /** /etc/docker/certs.d/<host:port>: the agent's trust of this registry. */
    readonly trustDir: string,
  ) {}

  static async start(): Promise<TrustedRegistry> {
    const registry = await TestRegistry.start();
    const trustDir = path.join(DOCKER_CERTS, registry.host);
    fs.mkdirSync(trustDir, { recursive: true });
    fs.copyFileSync(registry.caCertPath, path.join(trustDir, 'ca.crt'));
    return new TrustedRegistry(registry, trustDir);
  }

  get host(): string {
    return this.registry.host;
  }

  /** The job's `auth {}` block lines for this registry's user. */
  get authHcl(): string {
    return `auth {\n          username = "${this.registry.username}"\n          password = "${this.registry.password}"\n        }`;
  }

  /** The hostpath plugin's version: its image's default tag. */
  static hostpathVersion(): string {
    return (JSON.parse(fs.readFileSync(path.join(REPO, 'packages', 'hostpath-plugin', 'package.json'), 'utf8')) as { version: string })
      .version;
  }

  /**
   * Builds the hostpath plugin's image with its build tool and pushes it as
   * `repoTag` (the tool's own output checked); answers the full reference.
   * `sourceDateEpoch` (the tool's SOURCE_DATE_EPOCH, default 0) sets every
   * time in the image: another value gives another build, digests and all.
   */
  pushHostpathImage(repoTag = `csiplug/hostpath-plugin:${TrustedRegistry.hostpathVersion()}`, sourceDateEpoch = 0): string {
    const image = `${this.host}/${repoTag}`;
    const layout = fs.mkdtempSync(path.join(this.registry.dir, 'layout-'));
    execFileSync(path.join(REPO, 'node_modules', '.bin', 'tsc'), ['-p', path.join(IMAGE_TOOL, 'tsconfig.json')], { stdio: 'pipe' });
    const out = execFileSync(
      process.execPath,
      [
        path.join(IMAGE_TOOL, 'dist', 'cli.js'),
        '--out',
        layout,
        '--push',
        image,
        '--dest-cert-dir',
        this.trustDir,
        '--dest-creds',
        `${this.registry.username}:${this.registry.password}`,
      ],
      { encoding: 'utf8', env: { ...process.env, SOURCE_DATE_EPOCH: String(sourceDateEpoch) } },
    );
    if (!out.includes(`pushed:   docker://${image}`)) throw new Error(`image:hostpath did not push ${image}:\n${out}`);
    return image;
  }

  /** Pushes a small image of host binaries (`binaries`, entrypoint `entrypoint`) as `repoTag`; answers the full reference. */
  async pushBinariesImage(repoTag: string, binaries: string[], entrypoint: string[]): Promise<string> {
    const layout = path.join(fs.mkdtempSync(path.join(this.registry.dir, 'layout-')), 'oci');
    await buildTestImage(layout, 'app', { layers: [await hostBinariesLayer(binaries)], entrypoint });
    await this.registry.push({ layoutDir: layout, tag: 'app' }, repoTag);
    return `${this.host}/${repoTag}`;
  }

  async stop(): Promise<void> {
    fs.rmSync(this.trustDir, { recursive: true, force: true });
    await this.registry.stop();
  }
}
