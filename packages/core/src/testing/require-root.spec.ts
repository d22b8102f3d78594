import { NEEDS_ROOT_MESSAGE, requireRoot, runsAsRoot } from './require-root';

describe('requireRoot', () => {
  afterEach(() => jest.restoreAllMocks());

  it('lets a root process through', () => {
    jest.spyOn(process, 'getuid').mockReturnValue(0);
    expect(runsAsRoot()).toBe(true);
    expect(() => requireRoot()).not.toThrow();
  });

  it('fails any other user with the one message that says what to do', () => {
    jest.spyOn(process, 'getuid').mockReturnValue(1000);
    expect(runsAsRoot()).toBe(false);
    expect(() => requireRoot()).toThrow(NEEDS_ROOT_MESSAGE);
    expect(NEEDS_ROOT_MESSAGE).toBe('this test needs root: run as root (CI does)');
  });
});
