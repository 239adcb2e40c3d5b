// What a job waits (or waited) for, in its detail: a batch callback's members, a parent's
// children, its dependencies (GET /jobs/{id}/awaited) — how many have ended and how, and each
// one, a link to its own detail. Read when the detail opens and again when the job changes.

import { api } from "./api.js";
import { h } from "./table.js";

/** At most this many awaited jobs are listed (a batch may have 10,000); the counts cover all. */
const LISTED = 100;

/** The job whose awaited jobs were read last, and the state of the job they were read for. */
const shown = { id: null, sig: "" };

function summary(answer) {
  const ends = ["done", "failed", "cancelled"]
    .filter((status) => answer.counts[status])
    .map((status) => `${answer.counts[status]} ${status}`);
  const left = answer.total - answer.ended;
  return `${answer.ended} of ${answer.total} ended` + (ends.length ? ` · ${ends.join(" · ")}` : "")
    + (left ? ` · ${left} to go` : "");
}

function item(job, open) {
  const link = h("a", { href: `?job=${job.id}`, className: "mono", text: `${job.type} · ${job.id.slice(-8)}` });
  link.addEventListener("click", (event) => {
    event.preventDefault();
    open(job.id);
  });
  return h("li", { "data-id": job.id, "data-status": job.status },
    h("span", { className: `badge status-${job.status}`, text: job.status }), " ", link);
}

/** Fill the detail's "Waits for" section for `job` (hidden when it awaits none); `open(id)`
 * opens another job's detail. Read again only when the job's state changed. */
export async function renderAwaited(job, open) {
  const sig = `${job.status}|${job.attempts}|${job.snoozes}`;
  if (shown.id === job.id && shown.sig === sig) return;
  Object.assign(shown, { id: job.id, sig });
  const section = document.querySelector("#detail-awaited-section");
  let answer;
  try {
    answer = await api.awaited(job.id);
  } catch {
    answer = null; // the detail says what it can; the job's own read reports an outage
  }
  if (shown.id !== job.id) return;
  if (!answer || answer.total === 0) {
    section.hidden = true;
    return;
  }
  document.querySelector("#detail-awaited-summary").textContent = summary(answer);
  const items = answer.jobs.slice(0, LISTED).map((awaited) => item(awaited, open));
  if (answer.jobs.length > LISTED) {
    items.push(h("li", { className: "awaited-more", text: `… and ${answer.jobs.length - LISTED} more` }));
  }
  document.querySelector("#detail-awaited").replaceChildren(...items);
  section.hidden = false;
}
