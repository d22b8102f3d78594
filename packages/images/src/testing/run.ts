// Runs a test tool (openssl, umoci, skopeo) and fails with its output when
// it fails, so a broken test setup says which command and why.
import { execFile } from 'node:child_process';

export function run(file: string, args: readonly string[], options: { cwd?: string; input?: string } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(file, [...args], { cwd: options.cwd, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${file} ${args.join(' ')} failed: ${err.message}\n${stderr}`));
      else resolve(stdout);
    });
    if (options.input !== undefined) child.stdin?.end(options.input);
  });
}
