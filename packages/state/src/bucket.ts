// A bucket: bbolt's Bucket (defined in tx.ts with Tx and Cursor, which it references).
export { Bucket, type BucketStats } from './tx';
