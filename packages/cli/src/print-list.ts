// How every list command prints (job, plugin and volume status without an
// ID, the plugin's own volumes, snapshots): -json prints csiplug's view of
// the answer (the client's decoding of Nomad's shapes); otherwise a line when the list is empty, or a table, with the
// token of the next page under it when the API answered a page.
import type { CommandContext } from './command';
import { formatTable } from './format';

export interface ListOutput<T> {
  /** What -json prints: csiplug's view of the answer (the list, or the page with its token). */
  answer: unknown;
  items: readonly T[];
  /** The line printed instead of an empty table ("No jobs"). */
  empty: string;
  header: readonly string[];
  row: (item: T) => string[];
  /** The page token to ask for the rest with (-page-token); none when this is the last page or the list is not paged. */
  nextPageToken?: string;
}

export function printList<T>(ctx: CommandContext, list: ListOutput<T>): void {
  if (ctx.json) ctx.printJson(list.answer);
  else if (list.items.length === 0) ctx.out(list.empty);
  else
    ctx.out(
      formatTable(list.header, list.items.map(list.row)) + (list.nextPageToken ? `\n\nNext page: -page-token ${list.nextPageToken}` : ''),
    );
}
