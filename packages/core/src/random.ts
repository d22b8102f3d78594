// Randomness is injected like time, so jitter is reproducible in tests.

export interface Random {
  /** A number in [0, 1). */
  next(): number;
}

export class MathRandom implements Random {
  next(): number {
    return Math.random();
  }
}

/** Deterministic (mulberry32) — for tests and reproducible benchmarks. */
export class SeededRandom implements Random {
  private state: number;
  constructor(seed = 1) {
    this.state = seed >>> 0;
  }
  next(): number {
    let t = (this.state = (this.state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
}
