// What the CLI needs from its process, so tests can run it in-process:
// where output goes, the environment, the working dir and stdin; and the
// commands the composition root supplies (agent, demo).

export interface CliOutput {
  /**
   * Text, or raw bytes (a task's log, exactly as written). A stream that
   * returns false is waited on for 'drain' before more is written.
   */
  write(chunk: string | Uint8Array): unknown;
}

export interface CliIo {
  stdout: CliOutput;
  stderr: CliOutput;
  env: Record<string, string | undefined>;
  /** Relative FILE arguments resolve against this; default process.cwd(). */
  cwd?: string;
  /** Read for FILE `-`. */
  stdin?: NodeJS.ReadableStream;
}

/**
 * Commands that need the whole agent, supplied by whoever builds it (see
 * handlers.ts). Each gets the arguments after its name, unparsed, and
 * returns the exit code.
 */
export interface CliHandlers {
  /** `csiplug agent -config FILE | -dev`: runs the agent until it is told to stop. */
  agent(args: string[], io: CliIo): Promise<number>;
  /** `csiplug demo`: the guided walk through plugin, volume and workload. */
  demo(args: string[], io: CliIo): Promise<number>;
}
