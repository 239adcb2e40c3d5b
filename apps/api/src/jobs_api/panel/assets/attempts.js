// The attempts of a job in the detail view (issue 24): one row per ended attempt, oldest first,
// from the API's `attempt_history` (GET /jobs/{id}); the attempt running now, if any, last.
// A job drawn from the list has no history yet: its rows come with the job read alone.

import { duration, stamp } from "./format.js";
import { h } from "./table.js";

/** An attempt's outcome as its badge's text and colour (the statuses' palette). */
const OUTCOMES = {
  done: ["done", "done"],
  failed: ["failed", "failed"],
  cancelled: ["cancelled", "cancelled"],
  retrying: ["failed, retried", "retrying"],
  snoozed: ["snoozed", "scheduled"],
  handed_back: ["handed back", "queued"],
  lost: ["lost", "failed"],
  waiting: ["waited for its children", "waiting"],
};

const OUTCOME_HELP = {
  retrying: "this attempt raised; the job ran again",
  snoozed: "the handler asked to run again later",
  handed_back: "its worker shut down; the attempt was refunded",
  lost: "its worker went silent; the sweep ended the attempt",
  waiting: "the handler waited for the children it enqueued; the job ran again once they ended",
};

function attemptRow(attempt) {
  const [text, colour] = OUTCOMES[attempt.outcome] ?? [attempt.outcome, "queued"];
  const took = duration(Date.parse(attempt.ended_at) - Date.parse(attempt.started_at));
  const facts = [stamp(attempt.started_at), took && `took ${took}`, attempt.worker && `on ${attempt.worker}`];
  const error = attempt.error ? String(attempt.error).split("\n")[0] : "";
  return h("li", { "data-attempt": attempt.attempt, "data-outcome": attempt.outcome },
    h("span", { className: "attempt-no num", text: `#${attempt.attempt}` }),
    h("span", { className: `badge status-${colour}`, text, title: OUTCOME_HELP[attempt.outcome] }),
    h("span", { className: "attempt-facts mono", text: facts.filter(Boolean).join(" · ") }),
    error ? h("span", { className: "attempt-error", text: error }) : null,
    attempt.traceback
      ? h("details", { className: "attempt-trace" },
        h("summary", { text: "Traceback" }),
        h("pre", { className: "code", tabindex: "0", text: attempt.traceback }))
      : null);
}

/** The history last read, kept while events redraw the detail (an event carries none). */
const shown = { id: null, history: null, sig: "" };

/** What changes when an attempt ends (an event saying so means the history read is stale). */
const signature = (job) => `${job.status}|${job.attempts}|${job.snoozes}`;

/** Fill the list `list` with the attempts of `job`; `reread()` reads the job again when an
 * event says an attempt ended since its history was read. */
export function renderAttempts(list, job, reread) {
  let history = Array.isArray(job.attempt_history) ? job.attempt_history : null;
  if (history !== null) Object.assign(shown, { id: job.id, history, sig: signature(job) });
  else if (shown.id === job.id) {
    history = shown.history;
    if (signature(job) !== shown.sig) {
      shown.sig = signature(job); // once per change: the answer brings the new history
      reread();
    }
  }
  const rows = history === null ? [] : history.map(attemptRow);
  const next = (history?.length ?? 0) + 1;
  if (job.status === "running" && job.started_at) {
    rows.push(h("li", { "data-attempt": next, "data-outcome": "running" },
      h("span", { className: "attempt-no num", text: `#${next}` }),
      h("span", { className: "badge status-running", text: "running" }),
      h("span", { className: "attempt-facts mono", text: `since ${stamp(job.started_at)}` })));
  }
  if (rows.length === 0) {
    const text = history === null ? "Reading the attempts…" : "No attempt has run yet.";
    rows.push(h("li", { className: "attempt-none", text }));
  }
  list.replaceChildren(...rows);
}
