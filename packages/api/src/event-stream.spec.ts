// The event streams' memory bound over real sockets: clients that never read
// are cut off once every stream together holds more than the API's total,
// the one holding the most first, while a client that reads keeps its stream.
import * as http from 'http';
import * as net from 'net';
import { FakeAgentService } from './testing';
import { startApi } from './testing';
import { EventStreamBudget } from './event-stream';

async function until(check: () => boolean, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('event streams: what clients leave unread is bounded in total', () => {
  it('cuts off the readers that do not read once all streams hold more than the total; a reader that reads stays', async () => {
    const fake = new FakeAgentService();
    const maxTotal = 512 * 1024;
    const { api, url, logger } = await startApi(fake, { eventStreamsMaxBuffered: maxTotal });
    const { port } = new URL(url);
    const stalled: net.Socket[] = [];
    let reader: http.ClientRequest | undefined;
    try {
      // Three clients that ask for the stream and never read a byte of it.
      for (let i = 0; i < 3; i++) {
        const s = net.connect(Number(port), '127.0.0.1');
        s.on('error', () => undefined);
        s.write(`GET /v1/event/stream HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
        s.pause();
        stalled.push(s);
      }
      let readerLines = 0;
      reader = http.get(`${url}/v1/event/stream`, (r) => {
        r.on('data', (chunk: Buffer) => {
          for (const b of chunk) if (b === 10) readerLines++;
        });
      });
      reader.on('error', () => undefined);
      await until(() => fake.eventSubscribers === 4, 'four streams to open');

      const message = 'x'.repeat(32 * 1024);
      let most = 0;
      for (let i = 0; i < 400 && fake.eventSubscribers > 1; i++) {
        fake.emit({ topic: 'Task', type: 'Started', message });
        most = Math.max(most, api.eventStreamsBuffered);
        // Let the reader read between events, as a live agent's events come.
        if (i % 8 === 7) await new Promise((r) => setImmediate(r));
      }
      // Never more than the total held at once, give or take the event being written.
      expect(most).toBeLessThanOrEqual(maxTotal + message.length + 1024);
      await until(() => fake.eventSubscribers === 1, 'the stalled streams to be cut off');
      expect(
        logger.records.some(
          (e) => e.msg.includes('event stream client is not reading') && String(e.fields?.reason ?? '').includes('in all'),
        ),
      ).toBe(true);
      // The reader's stream is the one left, and it still gets what comes next.
      const before = readerLines;
      fake.emit({ topic: 'Task', type: 'Started', message: 'after' });
      await until(() => readerLines > before, 'the reader to get the next event');
    } finally {
      for (const s of stalled) s.destroy();
      reader?.destroy();
      await api.dispose();
    }
  });

  it('the budget cuts off the largest holder until the rest fit, and forgets a closed stream', () => {
    const budget = new EventStreamBudget(100);
    const cut: string[] = [];
    const stream = (name: string, held: { n: number }) => ({ buffered: () => held.n, cutOff: () => cut.push(name) });
    const a = { n: 40 };
    const b = { n: 50 };
    const sa = stream('a', a);
    const sb = stream('b', b);
    budget.update(sa);
    budget.update(sb);
    expect(budget.heldTotal).toBe(90);
    a.n = 70;
    budget.update(sa);
    expect(cut).toEqual(['a']);
    expect(budget.heldTotal).toBe(50);
    budget.remove(sb);
    expect(budget.heldTotal).toBe(0);
  });
});
