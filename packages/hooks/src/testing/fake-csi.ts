// A scripted CSI client for hook unit tests: probe answers come from a
// function the test controls; every call is counted.
import type { CSIClient, CSIClientFactory, ProbeResult } from '@csiplug/csi';

export type ProbeScript = () => ProbeResult | Error;

export class FakeCSIClient {
  probes = 0;
  closed = false;
  constructor(
    readonly endpoint: string,
    private readonly script: () => ProbeScript,
    private readonly info: { name: string; vendorVersion: string },
  ) {}

  async probe(): Promise<ProbeResult> {
    this.probes++;
    const answer = this.script()();
    if (answer instanceof Error) throw answer;
    return answer;
  }

  async getPluginInfo(): Promise<{ name: string; vendorVersion: string; manifest: Record<string, string> }> {
    return { ...this.info, manifest: {} };
  }

  close(): void {
    this.closed = true;
  }

  dispose(): void {
    this.close();
  }
}

export class FakeCSIClientFactory implements CSIClientFactory {
  readonly clients: FakeCSIClient[] = [];
  /** What the next probe answers; tests swap it. */
  probe: ProbeScript = () => ({ ready: true });
  info = { name: 'csi.example.org', vendorVersion: '1.2.3' };

  createClient(endpoint: string): CSIClient {
    const client = new FakeCSIClient(endpoint, () => this.probe, this.info);
    this.clients.push(client);
    return client as unknown as CSIClient;
  }

  get totalProbes(): number {
    return this.clients.reduce((n, c) => n + c.probes, 0);
  }
}
