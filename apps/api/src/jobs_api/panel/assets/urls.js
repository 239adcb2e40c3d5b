// The panel's address: which view, which filter, which job's detail. Every view and the open
// detail are in the URL, so a link (`/?job=<id>`, `/?view=overview`, `/?status=failed&type=x`)
// opens the panel as it was, and the browser's reload keeps it.

import { FILTERS, state } from "./state.js";

const VIEWS = new Set(["jobs", "overview", "schedules"]);

/** What the address asks for: the view, the Jobs filter and the job whose detail is open. */
export function readUrl() {
  const params = new URLSearchParams(location.search);
  const status = params.get("status") || "";
  const view = params.get("view") || "jobs";
  return {
    view: VIEWS.has(view) ? view : "jobs",
    status: status in FILTERS ? status : "",
    type: params.get("type") || "",
    job: params.get("job") || "",
    window: params.get("window") === "day" ? "day" : "hour",
  };
}

/** The address of the panel now: the view, the filter (the Jobs and Overview views follow it)
 * and the open detail. */
export function panelUrl({ view = state.view, job = state.detailId } = {}) {
  const params = new URLSearchParams();
  if (view !== "jobs") params.set("view", view);
  if (view === "overview" && state.window !== "hour") params.set("window", state.window);
  if (view !== "schedules") {
    if (state.filter.status) params.set("status", state.filter.status);
    if (state.filter.type) params.set("type", state.filter.type);
  }
  if (job) params.set("job", job);
  return params.size ? `?${params}` : location.pathname;
}

/** Write the panel's state into the address (no new history entry). */
export function syncUrl(change = {}) {
  history.replaceState(null, "", panelUrl(change));
}
