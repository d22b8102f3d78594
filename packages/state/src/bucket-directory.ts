// Which nested bucket id sits under (parent, name): looked up once and
// remembered across transactions, so a hot path like
// `tx.bucket('x').put(…)` costs one statement, not two. Anything that could
// make an entry wrong (a bucket deleted, a write rolled back) forgets them
// all and moves the epoch on, which also tells Bucket handles to make sure
// their bucket still exists before they write to it.

export class BucketDirectory {
  private readonly ids = new Map<string, number>();
  private currentEpoch = 0;

  get epoch(): number {
    return this.currentEpoch;
  }

  get(parent: number, name: Buffer): number | undefined {
    return this.ids.get(`${parent}/${name.toString('latin1')}`);
  }

  remember(parent: number, name: Buffer, id: number): void {
    if (this.ids.size > 10_000) this.ids.clear();
    this.ids.set(`${parent}/${name.toString('latin1')}`, id);
  }

  invalidate(): void {
    this.ids.clear();
    this.currentEpoch++;
  }
}
