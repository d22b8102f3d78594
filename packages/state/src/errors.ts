// The errors of @csiplug/state. Each class carries bbolt's name as its
// stable `code` (ErrBucketNotFound, ErrTxClosed, …) so callers can switch on
// the same names bbolt users know. A missing file, a DB busy with a
// transaction and a backup of a memory DB (ErrDatabaseNotFound, ErrTxOpen,
// ErrBackupUnsupported) carry ESTATE_ codes after core's convention, never
// an errno such as EBUSY or ENOENT, which isTransientFsError would take for
// a fault of the agent's own process.
import { CsiplugError, errorMessage } from '@csiplug/core';

/** Base of every error this package throws on purpose. */
export class StateError extends CsiplugError {}

export class ErrBucketNotFound extends StateError {
  constructor(name?: string) {
    super('ErrBucketNotFound', name === undefined ? 'bucket not found' : `bucket not found: ${JSON.stringify(name)}`);
  }
}

export class ErrBucketExists extends StateError {
  constructor(name?: string) {
    super('ErrBucketExists', name === undefined ? 'bucket already exists' : `bucket already exists: ${JSON.stringify(name)}`);
  }
}

export class ErrBucketNameRequired extends StateError {
  constructor() {
    super('ErrBucketNameRequired', 'bucket name required: a bucket name must not be empty');
  }
}

export class ErrKeyRequired extends StateError {
  constructor() {
    super('ErrKeyRequired', 'key required: a key must not be empty');
  }
}

export class ErrKeyTooLarge extends StateError {
  constructor(size: number, max: number) {
    super('ErrKeyTooLarge', `key too large: ${size} bytes, the limit is ${max}`);
  }
}

export class ErrValueTooLarge extends StateError {
  constructor(size: number, max: number) {
    super('ErrValueTooLarge', `value too large: ${size} bytes, the limit is ${max}`);
  }
}

export class ErrIncompatibleValue extends StateError {
  constructor(detail = 'incompatible value') {
    super('ErrIncompatibleValue', detail);
  }
}

export class ErrTxNotWritable extends StateError {
  constructor() {
    super('ErrTxNotWritable', 'tx not writable: this is a read-only transaction (use db.update to write)');
  }
}

export class ErrTxClosed extends StateError {
  constructor() {
    super('ErrTxClosed', 'tx closed: the transaction was committed or rolled back; do not keep a Tx, Bucket or Cursor beyond its callback');
  }
}

export class ErrDatabaseNotOpen extends StateError {
  constructor(path?: string) {
    super('ErrDatabaseNotOpen', `database not open${path ? `: ${path}` : ''}`);
  }
}

export class ErrDatabaseReadOnly extends StateError {
  constructor(path?: string) {
    super('ErrDatabaseReadOnly', `database is in read-only mode${path ? `: ${path}` : ''}; open it without readOnly to write`);
  }
}

/** A read-only open of a file that does not exist (a read-only open never creates one). */
export class ErrDatabaseNotFound extends StateError {
  constructor(path: string) {
    super('ESTATE_NOT_FOUND', `cannot open ${path} read-only: the file does not exist (a read-only open never creates it)`);
  }
}

/** close() or backup() called from inside a transaction's callback, which still holds the DB. */
export class ErrTxOpen extends StateError {
  constructor(action: 'close' | 'back up', path: string) {
    super('ESTATE_BUSY', `cannot ${action} ${path} from inside a transaction; call it after the transaction's callback returns`);
  }
}

/** backup() of a DB that has no file (an in-memory one). */
export class ErrBackupUnsupported extends StateError {
  constructor(path: string) {
    super('ESTATE_UNSUPPORTED', `${path}: an in-memory DB has no file to back up`);
  }
}

export class ErrTimeout extends StateError {
  constructor(path: string, timeoutMs: number, dataDir: string) {
    super(
      'ErrTimeout',
      `timeout: could not lock ${path} within ${timeoutMs} ms; is another csiplug agent using the data dir ${dataDir}? ` +
        'Stop it, or give this one its own data dir.',
    );
  }
}

/** The file is not SQLite, or a SQLite file that is not a csiplug store. (bbolt: ErrInvalid.) */
export class ErrInvalid extends StateError {
  constructor(path: string, detail: string, options?: { cause?: unknown }) {
    super('ErrInvalid', `invalid database ${path}: ${detail}; the file was left as it is — move it aside or restore a backup`, options);
  }
}

/** The file failed its integrity check. */
export class ErrCorrupt extends StateError {
  constructor(path: string, problems: string[], options?: { cause?: unknown }) {
    super(
      'ErrCorrupt',
      `corrupt database ${path}: ${problems.slice(0, 5).join('; ')}${problems.length > 5 ? ` (and ${problems.length - 5} more)` : ''}; ` +
        'the file was left as it is — move it aside or restore a backup',
      options,
    );
  }
}

/**
 * A write the filesystem had no room for (SQLITE_FULL: the disk or the
 * filesystem's quota is full). Nothing of the transaction was saved: SQLite
 * rolled it back, and the file is as it was before.
 */
export class ErrNoSpace extends StateError {
  constructor(path: string, options?: { cause?: unknown }) {
    super(
      'ESTATE_NO_SPACE',
      `cannot write ${path}: the filesystem it is on is full (SQLITE_FULL: ${causeText(options?.cause) || 'database or disk is full'}); ` +
        'nothing of this write was saved and the file is as it was — free space there, then retry',
      options,
    );
  }
}

function causeText(cause: unknown): string {
  const message = (cause as { message?: unknown } | undefined)?.message;
  return typeof message === 'string' ? message : '';
}

/** A transaction was opened while another one is open on the same DB. */
export class ErrTxNested extends StateError {
  constructor(kind: 'update' | 'view') {
    super(
      'ErrTxNested',
      `cannot start db.${kind}() while another transaction is open on this DB: transactions do not nest (bbolt would deadlock); ` +
        'do the work inside the open transaction instead',
    );
  }
}

/** The callback returned a Promise: a transaction cannot span an `await`. */
export class ErrTxAsync extends StateError {
  constructor(kind: 'update' | 'view' | 'batch') {
    super(
      'ErrTxAsync',
      `the function given to db.${kind}() returned a Promise; a transaction cannot span an await. ` +
        'The transaction was rolled back: do the async work before or after, and keep the callback synchronous',
    );
  }
}

/** The store's schema version is newer than this build knows, or not a version at all. */
export class ErrSchemaVersion extends StateError {
  constructor(file: string, found: unknown, supported: number, kind: 'newer' | 'unknown') {
    super(
      'ErrSchemaVersion',
      kind === 'newer'
        ? `${file} has client state schema version ${found}, newer than this csiplug understands (${supported}); ` +
            'run the csiplug release that wrote it, or restore an older backup'
        : `${file} has an unknown client state schema version ${JSON.stringify(found)} (this csiplug writes ${supported}); ` +
            'the file was left as it is — restore a backup or move it aside',
    );
  }
}

/** A schema migration failed; nothing was changed (it runs in one transaction). */
export class ErrMigration extends StateError {
  constructor(file: string, from: number, to: number, backup: string | undefined, cause: unknown) {
    super(
      'ErrMigration',
      `migrating ${file} from client state schema ${from} to ${to} failed: ${errorMessage(cause)}; ` +
        `the store was left at version ${from}${backup ? ` and a copy is at ${backup}` : ''}`,
      { cause },
    );
  }
}

/** A stored value could not be decoded. */
export class ErrDecode extends StateError {
  constructor(where: string, cause: unknown) {
    super('ErrDecode', `cannot decode ${where}: ${errorMessage(cause)}`, { cause });
  }
}
