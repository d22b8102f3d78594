import { ValidationError } from '@csiplug/core';
import { parseEndpoint } from './endpoint';

describe('parseEndpoint', () => {
  it.each([
    ['unix:///run/csi/csi.sock', '/run/csi/csi.sock'],
    ['unix:/run/csi/csi.sock', '/run/csi/csi.sock'],
    ['/run/csi/csi.sock', '/run/csi/csi.sock'],
    ['/run//csi/./csi.sock', '/run/csi/csi.sock'],
  ])('%s -> %s', (input, socketPath) => {
    expect(parseEndpoint(input)).toEqual({ socketPath, target: `unix:${socketPath}`, original: input });
  });

  it.each(['', 'tcp://127.0.0.1:1000', 'relative/csi.sock', 'unix://relative.sock'])('rejects %j', (input) => {
    expect(() => parseEndpoint(input)).toThrow(ValidationError);
  });
});
