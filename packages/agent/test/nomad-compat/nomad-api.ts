// A client as Nomad's own Go api package is, for the compatibility suite:
// it imports nothing of csiplug (the suite must pass against what a Nomad
// tool sees, not against csiplug's types). Requests as api.Client sends them
// — the token in X-Nomad-Token, bodies as JSON without a Content-Type,
// `?index=&wait=` for blocking reads — and answers read as it reads them:
// JSON bodies with X-Nomad-Index, any status ≥ 400 an error whose text is
// the plain body ("Unexpected response code: 404 (job not found)").
// The shapes each area reads are declared beside its tests, with Nomad's
// field names (api/*.go).
import * as http from 'http';

/** What a read answers: the body and the query meta Nomad's client parses from headers. */
export interface NomadAnswer<T> {
  status: number;
  body: T;
  /** X-Nomad-Index. */
  lastIndex: number;
  knownLeader: boolean;
  headers: http.IncomingHttpHeaders;
}

/** An error answer, as api.Client reports it. */
export class NomadResponseError extends Error {
  constructor(
    readonly status: number,
    readonly text: string,
  ) {
    super(`Unexpected response code: ${status} (${text})`);
  }
}

export class NomadApi {
  constructor(
    /** http://127.0.0.1:PORT, as NOMAD_ADDR. */
    readonly address: string,
    /** NOMAD_TOKEN, when the agent has one. */
    readonly token?: string,
  ) {}

  get<T>(
    path: string,
    query: Record<string, string | number | boolean | undefined> = {},
    headers: Record<string, string> = {},
  ): Promise<NomadAnswer<T>> {
    return this.request<T>('GET', path, query, undefined, headers);
  }

  put<T>(
    path: string,
    body: unknown,
    query: Record<string, string | number | boolean | undefined> = {},
    headers: Record<string, string> = {},
  ): Promise<NomadAnswer<T>> {
    return this.request<T>('PUT', path, query, body, headers);
  }

  post<T>(
    path: string,
    body: unknown,
    query: Record<string, string | number | boolean | undefined> = {},
    headers: Record<string, string> = {},
  ): Promise<NomadAnswer<T>> {
    return this.request<T>('POST', path, query, body, headers);
  }

  delete<T>(
    path: string,
    query: Record<string, string | number | boolean | undefined> = {},
    headers: Record<string, string> = {},
  ): Promise<NomadAnswer<T>> {
    return this.request<T>('DELETE', path, query, undefined, headers);
  }

  /** A streaming read (the event stream, plain logs): the raw response, for the test to read and destroy. */
  stream(path: string, query: Record<string, string | number | boolean | undefined> = {}): Promise<http.IncomingMessage> {
    return new Promise((resolve, reject) => {
      const req = http.request(this.url(path, query), { method: 'GET', headers: this.baseHeaders({}) }, (res) => {
        if ((res.statusCode ?? 0) >= 400) {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => reject(new NomadResponseError(res.statusCode ?? 0, text)));
          return;
        }
        resolve(res);
      });
      req.on('error', reject);
      req.end();
    });
  }

  private url(path: string, query: Record<string, string | number | boolean | undefined>): URL {
    const url = new URL(path, this.address);
    for (const [k, v] of Object.entries(query)) if (v !== undefined) url.searchParams.set(k, String(v));
    return url;
  }

  private baseHeaders(extra: Record<string, string>): Record<string, string> {
    // As api.Client: the token header when set, gzip accepted, no Content-Type on writes.
    return { 'Accept-Encoding': 'gzip', ...(this.token ? { 'X-Nomad-Token': this.token } : {}), ...extra };
  }

  private request<T>(
    method: string,
    path: string,
    query: Record<string, string | number | boolean | undefined>,
    body: unknown,
    headers: Record<string, string>,
  ): Promise<NomadAnswer<T>> {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    return new Promise((resolve, reject) => {
      const req = http.request(this.url(path, query), { method, headers: this.baseHeaders(headers) }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          void decode(res, Buffer.concat(chunks)).then((text) => {
            const status = res.statusCode ?? 0;
            if (status >= 400) return reject(new NomadResponseError(status, text));
            let parsed: T;
            try {
              parsed = (text === '' ? undefined : JSON.parse(text)) as T;
            } catch (err) {
              return reject(new Error(`${method} ${path}: the answer is not JSON (${(err as Error).message}): ${text.slice(0, 200)}`));
            }
            resolve({
              status,
              body: parsed,
              lastIndex: Number(res.headers['x-nomad-index'] ?? 0),
              knownLeader: res.headers['x-nomad-knownleader'] === 'true',
              headers: res.headers,
            });
          }, reject);
        });
      });
      req.on('error', reject);
      req.end(payload);
    });
  }
}

async function decode(res: http.IncomingMessage, raw: Buffer): Promise<string> {
  if (res.headers['content-encoding'] !== 'gzip') return raw.toString('utf8');
  const zlib = await import('zlib');
  return zlib.gunzipSync(raw).toString('utf8');
}
