// The detail of one job: a dialog drawn from the row at once, then from GET /jobs/{id} (which
// adds why it waits and every attempt). Its id is in the address (`/?job=<id>`): a link to it opens it.

import { api } from "./api.js";
import { renderAttempts } from "./attempts.js";
import { renderAwaited } from "./awaited.js";
// (app.js imports this module too: toast is read when a detail is drawn, never at load)
import { toast } from "./app.js";
import { duration, stamp } from "./format.js";
import { $, state } from "./state.js";
import { actionButtons, eta, fullMessage, h, progressCell, remove, statusLabel, traceback } from "./table.js";
import { syncUrl } from "./urls.js";

function json(value) {
  return value === null || value === undefined ? "—" : JSON.stringify(value, null, 2);
}

export function renderDetail(job) {
  $("#detail-title").textContent = `${job.type} · ${job.id}`;
  $("#detail-status").replaceChildren(
    h("span", { className: `badge status-${statusLabel(job)}`, text: statusLabel(job) }),
    ` attempt ${job.attempts} of ${job.max_attempts}`,
    eta(job) ? ` · runs ${eta(job)} (${stamp(job.run_at)})` : "",
    job.priority ? ` · priority ${job.priority}` : "",
    job.dedup_key ? ` · dedup key ${job.dedup_key}` : "");
  // Why a queued job waits: the API says it for a job read alone (GET /jobs/{id}).
  const waits = job.status === "queued" || job.status === "waiting";
  const waiting = waits && Array.isArray(job.waiting) ? job.waiting : [];
  $("#detail-waiting").replaceChildren(...waiting.map((reason) =>
    h("li", { "data-code": reason.code, text: reason.message })));
  $("#detail-progress").replaceChildren(progressCell(job));
  const created = Date.parse(job.created_at);
  const events = [
    ["Created", job.created_at],
    ["Runs at", job.run_at !== job.created_at ? job.run_at : null],
    ["Started", job.started_at],
    ["Cancel requested", job.cancel_requested_at],
    ["Finished", job.finished_at],
  ].filter(([, at]) => at);
  $("#detail-timeline").replaceChildren(...events.map(([what, at]) => h("li", {},
    h("span", { className: "when mono", text: stamp(at) }),
    h("span", { className: "what", text: what }),
    h("span", { className: "offset", text: at === job.created_at ? "" : `+${duration(Date.parse(at) - created)}` }))));
  renderAttempts($("#detail-attempts"), job, () => reread(job.id));
  renderAwaited(job, openDetail);
  $("#detail-payload").textContent = json(job.payload);
  const trace = traceback(job);
  // The traceback reads as text under Error, not as one escaped JSON string here as well.
  $("#detail-report").textContent = json(
    trace && job.error ? { ...job.report, traceback: "(shown under Error)" } : job.report);
  $("#detail-error").textContent = !job.error ? "—" : trace ? `${fullMessage(job)}\n\n${trace}` : fullMessage(job);
  $("#detail-error").classList.toggle("has-error", Boolean(job.error));
  // Redrawn only when they change: the second drawing (from GET /jobs/{id}) keeps the buttons,
  // and the keyboard focus on one.
  const actions = $("#detail-actions");
  const signature = `${job.id}|${statusLabel(job)}|${job.cancel_requested_at}`;
  if (actions.dataset.sig !== signature) {
    actions.replaceChildren(...actionButtons(job, "detail"));
    actions.dataset.sig = signature;
  }
}

/** Open the detail of the job `id`: drawn at once from the list when it is there, else once
 * the API answers (a deep link, a search); an id that names no job of the org is said. */
export async function openDetail(id) {
  state.detailId = id;
  syncUrl();
  const known = state.jobs.get(id);
  const dialog = $("#detail");
  if (known) {
    renderDetail(known);
    if (!dialog.open) dialog.showModal();
  }
  try {
    const job = await api.getJob(id);
    if (state.detailId !== id) return;
    renderDetail(job);
    if (!dialog.open) dialog.showModal();
  } catch (error) {
    if (error.status === 404) {
      remove(id);
      if (!known && state.detailId === id) {
        detailClosed();
        toast(`No job ${id.slice(0, 40)} in this org.`, "error");
      }
    } else toast(`Could not read the job: ${error.message}`, "error");
  }
}

/** The job read alone again (an event said an attempt ended: the list of attempts is new),
 * drawn if its detail is still open. */
async function reread(id) {
  try {
    const job = await api.getJob(id);
    if (state.detailId === id) renderDetail(job);
  } catch (error) {
    if (error.status === 404) remove(id);
    else toast(`Could not read the job: ${error.message}`, "error");
  }
}

/** The dialog closed: its id leaves the address. */
export function detailClosed() {
  state.detailId = null;
  syncUrl();
}
