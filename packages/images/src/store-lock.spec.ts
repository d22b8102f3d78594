// StoreLock: prepares share it, GC holds it alone; the order of steps is
// driven by hand (gates the test opens), never by time.
import { StoreLock } from './store-lock';

function gate(): { open: () => void; opened: Promise<void> } {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { open, opened };
}

const settle = () => new Promise((r) => setImmediate(r));

it('lets prepares hold it together, and GC only when none does; a prepare that comes while GC holds it waits for GC to end', async () => {
  const lock = new StoreLock();
  const steps: string[] = [];
  const p1 = gate();
  const p2 = gate();
  const first = lock.withShared(async () => {
    steps.push('prepare 1 in');
    await p1.opened;
    steps.push('prepare 1 out');
  });
  const second = lock.withShared(async () => {
    steps.push('prepare 2 in');
    await p2.opened;
    steps.push('prepare 2 out');
  });
  const gcGate = gate();
  const gc = lock.withExclusive(async () => {
    steps.push('gc in');
    await gcGate.opened;
    steps.push('gc out');
  });
  await settle();
  expect(steps).toEqual(['prepare 1 in', 'prepare 2 in']);
  expect(lock.waiting).toBe(1);
  p1.open();
  await first;
  await settle();
  expect(steps).toEqual(['prepare 1 in', 'prepare 2 in', 'prepare 1 out']);
  p2.open();
  await second;
  await settle();
  expect(steps.at(-1)).toBe('gc in');

  const late = lock.withShared(async () => {
    steps.push('prepare 3 in');
  });
  await settle();
  expect(steps.at(-1)).toBe('gc in');
  expect(lock.waiting).toBe(1);
  gcGate.open();
  await gc;
  await late;
  expect(steps.slice(-2)).toEqual(['gc out', 'prepare 3 in']);
});

it('is released when the holder throws', async () => {
  const lock = new StoreLock();
  await expect(lock.withExclusive(async () => Promise.reject(new Error('gc failed')))).rejects.toThrow('gc failed');
  await expect(lock.withShared(async () => 'prepared')).resolves.toBe('prepared');
  await expect(lock.withShared(async () => Promise.reject(new Error('pull failed')))).rejects.toThrow('pull failed');
  await expect(lock.withExclusive(async () => 'collected')).resolves.toBe('collected');
});
