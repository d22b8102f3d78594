// The archive path policy: within allowed_host_paths (by real paths) or a
// sentence naming the path and the agent config to change.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { archivePathPolicy } from './archive-path-policy';

describe('archivePathPolicy', () => {
  it('allows a real path within allowed_host_paths, an allowed dir given through a link too', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'archive-policy-'));
    try {
      const real = path.join(dir, 'images');
      fs.mkdirSync(real);
      fs.symlinkSync(real, path.join(dir, 'link'));
      expect(archivePathPolicy([path.join(dir, 'link')])(path.join(real, 'app.tar'))).toBeUndefined();
      expect(archivePathPolicy(['/srv/images'])('/srv/images/sub/app.tar')).toBeUndefined();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses anything else, naming the path and what to add to the agent config', () => {
    expect(archivePathPolicy(['/srv/images'])('/etc/shadow')).toBe(
      `/etc/shadow is not within this agent's allowed_host_paths (/srv/images); the agent reads an image archive only from there: add its directory to plugin "docker" { config { allowed_host_paths = ["…"] } } in the agent config (volumes { enabled } is not needed for archives), or move the archive under an allowed path`,
    );
    expect(archivePathPolicy([])('/srv/images/app.tar')).toMatch(/allowed_host_paths \(none\)/);
    // A sibling whose name starts the same is not below it.
    expect(archivePathPolicy(['/srv/images'])('/srv/images2/app.tar')).toBeDefined();
  });
});
