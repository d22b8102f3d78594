// The agent command's reading of the config into the HTTP API's options (the
// config itself is checked by @csiplug/jobspec's own specs).
import { MemoryLogger } from '@csiplug/core';
import { parseAgentConfig } from '@csiplug/jobspec';
import { httpApiOptions } from './agent-command';

describe('httpApiOptions', () => {
  const parse = (body: string) => parseAgentConfig(`data_dir = "/var/lib/csiplug"\nnode_id = "n1"\n${body}\n`, 'agent.hcl');

  it('other agents name this one by its advertised host: the API takes that name, on whatever port a NAT maps', async () => {
    const advertised = await parse(
      'cluster {\n  etcd {\n    endpoints = ["http://e:2379"]\n  }\n  advertise = "https://n1.example:4646"\n}',
    );
    expect(httpApiOptions(advertised, new MemoryLogger()).allowedHosts).toEqual(['n1.example']);
    expect(httpApiOptions(await parse(''), new MemoryLogger()).allowedHosts).toEqual([]);
  });
});
