// The executor starts for every task start and restart: it must load node
// built-ins only, never the agent's dependencies (tsyringe, pino, @csiplug/*).
// A type-only import (`import type`) is erased by the compiler: it loads nothing.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const EXECUTOR_FILES = ['executor.ts', 'executor-protocol.ts', 'proc.ts', 'rotating-log.ts'];

function importsOf(file: string): string[] {
  const text = readFileSync(join(__dirname, file), 'utf8');
  return [...text.matchAll(/^import(?! type )[^'"]*['"]([^'"]+)['"]/gm)].map((m) => m[1]!);
}

describe('executor imports', () => {
  it.each(EXECUTOR_FILES)('%s imports node built-ins and executor files only', (file) => {
    for (const spec of importsOf(file)) {
      const allowed = spec.startsWith('node:') || EXECUTOR_FILES.includes(`${spec.replace(/^\.\//, '')}.ts`);
      expect({ file, spec, allowed }).toEqual({ file, spec, allowed: true });
    }
  });

  it('runs its main only when run as a program, so importing it starts nothing', () => {
    expect(readFileSync(join(__dirname, 'executor.ts'), 'utf8')).toMatch(/^if \(require\.main === module\)/m);
  });
});
