/**
 * "Copy as curl" and "copy as Python" for a job: how to submit the same job
 * again (its submission as accepted, from `GET /v1/jobs/{id}/request`), read
 * it, follow its events and cancel it from a shell or the Python SDK
 * (openapi/python). The key is never known here: the snippets read it from
 * $HEARTH_API_KEY.
 */

function shellQuote(s: string): string {
  return /^[A-Za-z0-9_./:@%+=,-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

export function curlSnippet(origin: string, jobId: string, finished: boolean, request?: unknown): string {
  const base = `${origin}/v1/jobs/${jobId}`;
  const auth = `-H "Authorization: Bearer $HEARTH_API_KEY"`;
  const resubmit =
    request === undefined
      ? []
      : [
          `# The same job again (its submission as accepted), answered when it ends`,
          `curl -s -X POST ${shellQuote(`${origin}/v1/jobs?wait=60`)} ${auth} -H 'Content-Type: application/json' \\`,
          `  -d ${shellQuote(JSON.stringify(request))}`,
        ];
  const lines = [
    ...resubmit,
    `# The job`,
    `curl -s ${shellQuote(base)} ${auth}`,
    `# Its events (replayed, then live; add -H 'Last-Event-ID: N' to resume after event N)`,
    `curl -N ${shellQuote(`${base}/events`)} ${auth}`,
    `# Its full logs`,
    `curl -s ${shellQuote(`${base}/logs`)} ${auth}`,
  ];
  if (!finished) lines.push(`# Cancel it`, `curl -s -X POST ${shellQuote(`${base}/cancel`)} ${auth}`);
  return lines.join("\n") + "\n";
}

function pyString(s: string): string {
  return JSON.stringify(s);
}

export function pythonSnippet(origin: string, jobId: string, finished: boolean, request?: unknown): string {
  const resubmit =
    request === undefined
      ? []
      : [
          `# The same job again (its submission as accepted), returned when it ends`,
          `again = hearth.run(client, CreateJob.from_dict(json.loads(${pyString(JSON.stringify(request))})))`,
          `print(again.state, again.exit_code, again.output)`,
          ``,
        ];
  const lines = [
    ...(request === undefined ? [] : [`import json`]),
    `import os`,
    `from uuid import UUID`,
    ``,
    `import hearth`,
    `from hearth_client.api.jobs import ${finished ? "" : "cancel_job, "}get_job, get_job_logs`,
    ...(request === undefined ? [] : [`from hearth_client.models import CreateJob`]),
    ``,
    `client = hearth.connect(${pyString(origin)}, os.environ["HEARTH_API_KEY"])`,
    ...resubmit,
    `job_id = UUID(${pyString(jobId)})`,
    `job = hearth.ok(get_job.sync_detailed(job_id, client=client))`,
    `print(job.state, job.exit_code, job.output)`,
    `for event in hearth.events(client, job_id):  # replayed, then live; after=N resumes`,
    `    print(event.event, hearth.data(event))`,
    `logs = hearth.ok(get_job_logs.sync_detailed(job_id, client=client))`,
  ];
  if (!finished) lines.push(`# To cancel it: hearth.ok(cancel_job.sync_detailed(job_id, client=client))`);
  return lines.join("\n") + "\n";
}
