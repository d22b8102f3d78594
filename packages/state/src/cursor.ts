// A cursor: bbolt's Cursor (defined in tx.ts with Tx and Bucket, which it references).
export { Cursor, type CursorEntry } from './tx';
