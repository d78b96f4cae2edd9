// Subject and resource names of a deployment (Go: protocol.Names).

const idPattern = /^[A-Za-z0-9_-]{1,128}$/;

/** Reports whether id is a valid runId (or session id): [A-Za-z0-9_-]{1,128}. */
export function validRunId(id: string): boolean {
  return idPattern.test(id);
}

/** The names of one deployment, from its prefix (default "baton"). */
export class Names {
  readonly prefix: string;
  readonly upper: string;
  constructor(prefix = "baton") {
    if (!/^[A-Za-z0-9_-]+$/.test(prefix)) {
      throw new TypeError(`baton: prefix ${JSON.stringify(prefix)} must match [A-Za-z0-9_-]+`);
    }
    this.prefix = prefix;
    this.upper = prefix.toUpperCase();
  }
  jobsStream(): string { return `${this.upper}_JOBS`; }
  eventsStream(): string { return `${this.upper}_EVENTS`; }
  runsBucket(): string { return `${this.upper}_RUNS`; }
  sessionsBucket(): string { return `${this.upper}_SESSIONS`; }
  workspacesStream(): string { return `${this.upper}_WORKSPACES`; }
  runJobSubject(): string { return `${this.prefix}.jobs.run`; }
  sessionJobSubject(session: string): string { return `${this.prefix}.jobs.session.${session}`; }
  runFilter(runId: string): string { return `${this.prefix}.runs.${runId}.>`; }
  cancelSubject(runId: string): string { return `${this.prefix}.control.cancel.${runId}`; }
  inputSubject(runId: string): string { return `${this.prefix}.input.${runId}`; }
  interruptSubject(runId: string): string { return `${this.prefix}.control.interrupt.${runId}`; }
  sessionSendSubject(session: string): string { return `${this.prefix}.control.session.send.${session}`; }
  readEventsSubject(runId: string): string { return `${this.prefix}.read.events.${runId}`; }
  readStatusSubject(runId: string): string { return `${this.prefix}.read.status.${runId}`; }
  readRunSubject(runId: string): string { return `${this.prefix}.read.run.${runId}`; }
  readRunsSubject(): string { return `${this.prefix}.read.runs`; }
  readSessionSubject(session: string): string { return `${this.prefix}.read.session.${session}`; }
  readSessionsSubject(): string { return `${this.prefix}.read.sessions`; }
  readObjectSubject(runId: string): string { return `${this.prefix}.read.object.${runId}`; }
  readChunksSubject(runId: string): string { return `${this.prefix}.read.chunks.${runId}`; }
  workspaceChunkSubject(digest: string, i: number): string { return `${this.prefix}.workspaces.${digest}.${i}`; }
  workspaceSizeSubject(digest: string): string { return `${this.prefix}.workspaces.${digest}.size`; }
}

/** The inbox prefix a connection with runId's token must use (Go: protocol.RunInboxPrefix). */
export function runInboxPrefix(runId: string): string {
  return `_INBOX_run.${runId}`;
}
