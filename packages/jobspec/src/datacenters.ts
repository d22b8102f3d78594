// A job's `datacenters`, as Nomad reads them: a list of datacenter names,
// each of which may hold `*` wildcards (Nomad 1.5+; its default is ["*"],
// every datacenter). A node runs the job's allocs only when its own
// datacenter (the agent config's `datacenter`, default "dc1") matches one
// of them. Pure: the agent (one node) and the cluster's scheduler both ask.

/** What a job without `datacenters` runs in: every datacenter (Nomad's default). */
export const EVERY_DATACENTER: readonly string[] = ['*'];

/** Whether `datacenter` matches one of `patterns` (`*` matches any run of characters, as Nomad's glob). */
export function datacenterMatches(patterns: readonly string[], datacenter: string): boolean {
  return patterns.some((p) => {
    const parts = p.split('*');
    if (parts.length === 1) return p === datacenter;
    const first = parts[0]!;
    const last = parts[parts.length - 1]!;
    if (!datacenter.startsWith(first) || datacenter.length < first.length + last.length || !datacenter.endsWith(last)) return false;
    let at = first.length;
    const end = datacenter.length - last.length;
    for (const middle of parts.slice(1, -1)) {
      const found = datacenter.indexOf(middle, at);
      if (found < 0 || found + middle.length > end) return false;
      at = found + middle.length;
    }
    return true;
  });
}

/** The problem with one `datacenters` entry, or undefined (Nomad refuses an empty one). */
export function datacenterPatternProblem(pattern: string): string | undefined {
  if (pattern === '') return 'is empty: name a datacenter, or "*" for every one';
  if (!/^[A-Za-z0-9_.*-]+$/.test(pattern))
    return `"${pattern}" is not a datacenter name (letters, digits, "_", "-", "." and "*" wildcards)`;
  return undefined;
}

/** The refusal of a run on one agent whose datacenter matches none of the job's, naming it and what to do. */
export function datacenterMismatch(jobId: string, patterns: readonly string[], datacenter: string): string {
  return (
    `job "${jobId}" runs only in datacenters ${JSON.stringify(patterns)}, and this node is in datacenter "${datacenter}" ` +
    `(the agent config's datacenter): add "${datacenter}" (or "*") to the job's datacenters, or remove the line to run it anywhere`
  );
}
