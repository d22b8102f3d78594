// The status page's files (/ui/): a fixed set of three, read from the
// package's ui/ folder once and served as they are. They hold no data: the
// page reads everything through the API with the user's ACL token, so they
// are served without one (the page asks for it), as Nomad serves its UI. The
// front-door checks (Host, Origin, Sec-Fetch-Site) still apply to them.
import * as fs from 'fs';
import * as path from 'path';

export interface StaticFile {
  body: Buffer;
  contentType: string;
}

/** URL path under /ui/ → file in ui/ and its type. Nothing else is served: no path is ever joined from the request. */
const FILES: Readonly<Record<string, { file: string; contentType: string }>> = {
  '/ui/': { file: 'index.html', contentType: 'text/html; charset=utf-8' },
  '/ui/index.html': { file: 'index.html', contentType: 'text/html; charset=utf-8' },
  '/ui/app.js': { file: 'app.js', contentType: 'text/javascript; charset=utf-8' },
  '/ui/app.css': { file: 'app.css', contentType: 'text/css; charset=utf-8' },
};

/**
 * Headers of every page file: the page may load only its own script and
 * style and talk only to this agent, may not be framed (clickjacking), and
 * sends no referrer.
 */
export const STATUS_PAGE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'X-Frame-Options': 'DENY',
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'Cache-Control': 'no-cache',
};

/** The package's ui/ folder: beside src/ and dist/, so one path serves the built code and the tests' sources alike. */
export const STATUS_PAGE_DIR = path.resolve(__dirname, '..', 'ui');

export class StatusPage {
  /** The files, read once when the page is made; undefined when they are missing from this install. */
  private readonly files: ReadonlyMap<string, StaticFile> | undefined;

  constructor(dir: string = STATUS_PAGE_DIR) {
    // Read at once: a broken install is known at start, and a request never learns a path on this machine.
    try {
      const files = new Map<string, StaticFile>();
      for (const { file, contentType } of Object.values(FILES))
        if (!files.has(file)) files.set(file, { body: fs.readFileSync(path.join(dir, file)), contentType });
      this.files = files;
    } catch {
      this.files = undefined;
    }
  }

  /** Whether this install has the page's files. */
  get available(): boolean {
    return this.files !== undefined;
  }

  /** Whether `pathname` is the page's (the API answers it before asking for a token). */
  owns(pathname: string): boolean {
    return pathname === '/ui' || pathname.startsWith('/ui/');
  }

  /** The file for `pathname`, or undefined when the page has no such file (or this install has none). */
  file(pathname: string): StaticFile | undefined {
    const entry = Object.prototype.hasOwnProperty.call(FILES, pathname) ? FILES[pathname] : undefined;
    return entry && this.files?.get(entry.file);
  }
}
