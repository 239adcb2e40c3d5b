// The jobs table: its rows drawn and kept in place, and the list read a page at a time.

import { api, ApiError } from "./api.js";
// (app.js imports this module too: these are read when a row is drawn, never at load)
import { act, applyEvent, confirmDelete, openDetail, quotaNote, renderDetail, toast } from "./app.js";
import { selectionChanged } from "./bulk.js";
import { childGone, collapse, disclosure, isOpen, parentDrawn } from "./children.js";
import { age, count, duration, fraction, shortId, stamp, target, until } from "./format.js";
import { PAGE, LIVE_ROWS, FINISHED, FILTERS, $, state } from "./state.js";

// ---- small DOM helpers -------------------------------------------------------------------

export function h(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "text") node.textContent = value;
    else if (key === "className") node.className = value;
    else if (key === "style") node.style.cssText = value; // CSSOM: allowed by the page's CSP
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) if (child !== null && child !== undefined) node.append(child);
  return node;
}

export function sortKey(job) {
  return [Date.parse(job.created_at), job.id];
}

/** True when a is newer than b (the list's order: created_at desc, id desc). */
export function newer(a, b) {
  const [ta, ia] = sortKey(a);
  const [tb, ib] = sortKey(b);
  return ta !== tb ? ta > tb : ia > ib;
}

export function matches(job) {
  const { status } = state.filter; // a tab's group, or one status (an Overview chip)
  const statuses = FILTERS[status] ?? (status ? new Set([status]) : null);
  if (statuses && !statuses.has(job.status)) return false;
  return !state.filter.type || job.type === state.filter.type;
}

export function oldestLoaded() {
  if (state.oldest && state.jobs.has(state.oldest.id)) return state.oldest;
  let oldest = null;
  for (const job of state.jobs.values()) if (!oldest || newer(oldest, job)) oldest = job;
  state.oldest = oldest;
  return oldest;
}

/** Whether a matching job falls inside the loaded window (else it shows when scrolled to). */
export function inWindow(job) {
  if (state.exhausted) return true;
  const oldest = oldestLoaded();
  return !oldest || !newer(oldest, job);
}

/** A new job arrived: shown at once while the window is small; past LIVE_ROWS rows it is only
 * counted, and "N new jobs" reloads the first page (a burst of thousands of enqueues must not
 * grow the table without bound). */
export function admitNew(job) {
  if (state.jobs.size < LIVE_ROWS) return true;
  state.unseen.add(job.id);
  const button = $("#newer");
  button.hidden = false;
  const n = state.unseen.size;
  button.textContent = `${n.toLocaleString("en")} new job${n === 1 ? "" : "s"}: show`;
  return false;
}

/** The status as shown: a queued job not due yet is "scheduled" (never run) or "retrying"
 * (waiting for its next attempt). */
export function statusLabel(job, now = Date.now()) {
  if (job.status === "running" && job.cancel_requested_at) return "cancelling";
  if (job.status === "queued" && Date.parse(job.run_at) > now) {
    return job.attempts > 0 ? "retrying" : "scheduled";
  }
  return job.status;
}

/** When a scheduled or retrying job runs: "in 3 min" (null for any other). */
export function eta(job, now = Date.now()) {
  const label = statusLabel(job, now);
  return label === "scheduled" || label === "retrying" ? until(Date.parse(job.run_at) - now) : null;
}

export function durationMs(job, now = Date.now()) {
  if (!job.started_at) return null;
  const end = job.finished_at ? Date.parse(job.finished_at) : now;
  return end - Date.parse(job.started_at);
}

export function typeName(job) {
  return state.types.get(job.type)?.title || job.type;
}

// ---- the table ----------------------------------------------------------------------------

export function progressCell(job) {
  const progress = job.progress || null;
  const share = job.status === "done" && !progress ? 1 : fraction(progress);
  const stage = progress && typeof progress.stage === "string" ? progress.stage : "";
  const parts = [];
  if (stage) parts.push(stage);
  if (progress && progress.done !== undefined) {
    parts.push(progress.total !== undefined
      ? `${count(progress.done)} / ${count(progress.total)}`
      : count(progress.done));
  }
  const text = parts.join(" · ");
  if (share === null && job.status !== "running") {
    return h("div", { className: "progress-empty" }, text || "—");
  }
  const bar = h("div", {
    className: `bar bar-${job.status}${share === null ? " bar-indeterminate" : ""}`,
    role: "progressbar",
    "aria-label": `Progress of ${job.type} ${shortId(job.id)}`,
    "aria-valuemin": 0,
    "aria-valuemax": 100,
    "aria-valuenow": share === null ? undefined : Math.round(share * 100),
    "aria-valuetext": text || (share === null ? "in progress" : `${Math.round(share * 100)} %`),
  }, h("div", { className: "fill", style: share === null ? undefined : `width:${(share * 100).toFixed(1)}%` }));
  return h("div", { className: "progress" }, bar,
    h("div", { className: "progress-text" },
      h("span", { className: "stage", text: text }),
      share === null ? null : h("span", { className: "pct", text: `${Math.round(share * 100)}%` })));
}

/** The whole message of a failure: the error column holds its first line; a handler's
 * failure keeps the full message (and the traceback) in the report. */
export function fullMessage(job) {
  const report = job.report || {};
  const type = typeof report.exception_type === "string" ? `${report.exception_type}: ` : "";
  if (typeof report.message === "string" && report.message.trim()) return type + report.message.trim();
  return job.error || "";
}

export function traceback(job) {
  const text = job.report?.traceback;
  return typeof text === "string" ? text.trim() : "";
}

export function errorCell(job) {
  if (!job.error) return "";
  const first = job.error.split("\n")[0];
  return h("details", { className: `error error-${job.status}` },
    h("summary", { title: "Show the whole message" }, h("span", { text: first })),
    h("pre", { text: fullMessage(job) }));
}

export function actionButtons(job, where) {
  const label = `${job.type} ${shortId(job.id)}`;
  const buttons = [];
  const waits = job.status === "queued" || job.status === "waiting";
  if (waits || (job.status === "running" && !job.cancel_requested_at)) {
    buttons.push(h("button", {
      type: "button", className: "action", "data-action": "cancel",
      "aria-label": `Cancel ${label}`, onclick: () => act("cancel", job.id),
    }, "Cancel"));
  }
  if (job.status === "failed" || job.status === "cancelled") {
    buttons.push(h("button", {
      type: "button", className: "action", "data-action": "retry",
      "aria-label": `Retry ${label}`, onclick: () => act("retry", job.id),
    }, "Retry"));
  }
  if (FINISHED.has(job.status) && !state.types.get(job.type)?.protected) {
    buttons.push(h("button", {
      type: "button", className: "action danger", "data-action": "delete",
      "aria-label": `Delete ${label}`, onclick: () => confirmDelete(job.id),
    }, "Delete"));
  }
  if (where === "row") {
    buttons.push(h("button", {
      type: "button", className: "action subtle", "data-action": "details",
      "aria-label": `Details of ${label}`, "aria-haspopup": "dialog",
      onclick: () => openDetail(job.id),
    }, "Details"));
  }
  return buttons;
}

/** The row's cells as [class, signature, build]: a cell is rebuilt only when its signature
 * changed, so a progress event never takes the keyboard focus from a button of the row, nor
 * closes an error someone opened. A child's row (`child`: shown under its expanded parent,
 * children.js) has no box to tick and is indented. */
export function cells(job, now, child = false) {
  const ms = durationMs(job, now);
  const label = statusLabel(job, now);
  const when = eta(job, now);
  const kids = job.children ? `${job.children.ended}/${job.children.total}|${isOpen(job.id)}` : "";
  return [
    child ? ["select", "child", () => []] : ["select", job.id, () => [h("input", {
      type: "checkbox", className: "pick", "aria-label": `Select ${job.type} ${shortId(job.id)}`,
      checked: state.selected.has(job.id),
      onchange: (event) => {
        if (event.target.checked) state.selected.add(job.id);
        else state.selected.delete(job.id);
        selectionChanged();
      },
    })]],
    ["type", `${job.id}|${job.priority}|${kids}`, () => [
      child ? h("span", { className: "child-mark", "aria-hidden": "true" }) : null,
      h("button", {
        type: "button", className: "link", "aria-haspopup": "dialog",
        "aria-label": `${job.type} ${shortId(job.id)}: open details`, onclick: () => openDetail(job.id),
      }, job.type),
      h("span", { className: "id mono", text: shortId(job.id), title: job.id }),
      job.priority ? h("span", {
        className: "prio", text: `P${job.priority}`, title: `priority ${job.priority} (default 0)`,
      }) : null,
      child ? null : disclosure(job)]],
    ["target", "", () => [h("span", { text: target(job.payload) })]],
    ["status", label, () => [h("span", { className: `badge status-${label}`, text: label }),
      when === null ? null : h("span", { className: "eta", text: when, title: stamp(job.run_at) })]],
    ["progress-cell", JSON.stringify([job.status, job.progress]), () => [progressCell(job)]],
    ["attempts num", `${job.attempts}/${job.max_attempts}`, () => [`${job.attempts} / ${job.max_attempts}`]],
    ["age", "", () => [age(now - Date.parse(job.created_at))]],
    ["duration num", `${job.started_at}|${job.finished_at}`, () => [ms === null ? "—" : duration(ms)]],
    ["error-cell", `${job.error || ""}|${job.finished_at}`, () => [errorCell(job)]],
    ["actions", label, () => actionButtons(job, "row")],
  ];
}

/** Draw `job`'s row in `tr` (a new one by default); with `parentId`, as a child's row under
 * that parent (`data-child-id`, not `data-id`: the same job may also be a row of the list). */
export function renderRow(job, tr = h("tr"), parentId = null) {
  const now = Date.now();
  tr.className = `row row-${job.status}${parentId ? " child" : ""}`;
  if (parentId) {
    tr.dataset.childId = job.id;
    tr.dataset.parent = parentId;
  } else tr.dataset.id = job.id;
  tr.dataset.status = job.status;
  const specs = cells(job, now, parentId !== null);
  if (tr.children.length !== specs.length) {
    tr.replaceChildren(...specs.map(([className]) => h("td", { className })));
  }
  specs.forEach(([, signature, build], index) => {
    const td = tr.children[index];
    if (td.dataset.sig === signature && td.dataset.sig !== undefined) return;
    const hadFocus = td.contains(document.activeElement);
    const again = document.activeElement?.classList?.contains("kids") ? "button.kids" : "button";
    td.replaceChildren(...build().filter((node) => node !== null));
    td.dataset.sig = signature;
    if (hadFocus) (td.querySelector(again) || tr.querySelector("td.type button")).focus();
  });
  tr.querySelector("td.target").title = JSON.stringify(job.payload);
  tr.querySelector("td.age").title = stamp(job.created_at);
  return tr;
}

export const rowObserver = new IntersectionObserver((entries) => {
  for (const entry of entries) {
    if (entry.isIntersecting) state.visible.add(entry.target);
    else state.visible.delete(entry.target);
  }
});

export function placeRow(job) {
  const body = $("#rows");
  let tr = state.rows.get(job.id);
  const isNew = !tr;
  tr = renderRow(job, tr);
  if (isNew) {
    state.rows.set(job.id, tr);
    rowObserver.observe(tr);
    // Newest first: before the first row that is older than this job.
    let before = null;
    for (const other of body.children) {
      const otherJob = state.jobs.get(other.dataset.id);
      if (otherJob && newer(job, otherJob)) {
        before = other;
        break;
      }
    }
    body.insertBefore(tr, before);
  }
  parentDrawn(job.id); // an expanded parent's children follow its row
}

export function dropRow(id) {
  collapse(id, true);
  const tr = state.rows.get(id);
  if (tr) {
    rowObserver.unobserve(tr);
    state.visible.delete(tr);
    tr.remove();
    state.rows.delete(id);
  }
  state.jobs.delete(id);
  if (state.selected.delete(id)) selectionChanged();
}

export function updateEmpty() {
  const empty = state.jobs.size === 0 && !state.loading;
  $("#empty").hidden = !empty;
  if (empty) {
    const what = state.filter.status ? `${state.filter.status} ` : "";
    const type = state.filter.type ? ` of type ${state.filter.type}` : "";
    $("#empty-text").textContent = state.filter.status || state.filter.type
      ? `No ${what}jobs${type}.`
      : "No jobs yet. Start one with “New job”.";
  }
  $("#more").hidden = state.exhausted;
  $("#load-more").disabled = state.loading;
  $("#load-more").textContent = state.loading ? "Loading…" : "Load older jobs";
}

/** A job's new state, from an event or an action's answer. */
export function upsert(job) {
  if (state.detailId === job.id) renderDetail(job);
  if (!matches(job)) {
    dropRow(job.id);
    updateEmpty();
    return;
  }
  if (!state.jobs.has(job.id)) {
    if (!inWindow(job)) return;
    const oldest = oldestLoaded();
    if (oldest && newer(job, oldest) && !admitNew(job)) return;
  }
  state.jobs.set(job.id, job);
  placeRow(job);
  updateEmpty();
}

export function remove(id) {
  if (state.detailId === id) {
    $("#detail-status").textContent = "This job was deleted.";
    $("#detail-actions").replaceChildren();
    delete $("#detail-actions").dataset.sig;
  }
  dropRow(id);
  childGone(id); // a child's row under its expanded parent leaves too
  updateEmpty();
}

// ---- reading the list -----------------------------------------------------------------------

export async function loadPage(reset) {
  const generation = reset ? ++state.generation : state.generation;
  if (!reset && (state.loading || state.exhausted)) return;
  state.loading = true;
  updateEmpty();
  try {
    const page = await api.listJobs({
      status: state.filter.status, type: state.filter.type, limit: PAGE,
      cursor: reset ? null : state.cursor,
    });
    if (generation !== state.generation) return; // a newer filter won
    if (reset) {
      // The rows of jobs still on the first page stay (updated in place below): a re-read after
      // a filter change or a resync never takes the keyboard focus from a row's control, nor
      // the place an open dialog gives the focus back to.
      const kept = new Set(page.items.map((job) => job.id));
      for (const id of new Set([...state.rows.keys(), ...state.jobs.keys()])) {
        if (!kept.has(id)) dropRow(id);
      }
      state.unseen.clear();
      $("#newer").hidden = true;
    }
    state.oldest = null;
    for (const job of page.items) {
      state.jobs.set(job.id, job);
      placeRow(job);
    }
    state.cursor = page.next_cursor;
    state.listed = true;
    state.exhausted = page.next_cursor === null;
  } catch (error) {
    if (generation === state.generation) toast(`Could not read the jobs: ${error.message}`, "error");
  } finally {
    if (generation === state.generation) {
      state.loading = false;
      const held = state.held.splice(0);
      for (const event of held) applyEvent(event);
      updateEmpty();
    }
  }
}

export let statsPending = false;
export let statsAgain = false;

/** Re-read the counts after changes (at most one read in flight, coalescing the rest). */
export async function refreshStats() {
  if (statsPending) {
    statsAgain = true;
    return;
  }
  statsPending = true;
  try {
    const stats = await api.stats();
    // The org's use of its quotas changes with its queued jobs: read the note again only then
    // (a progress event changes no count, and must cause no read but the counts').
    if (stats.queued !== state.stats?.queued) quotaNote?.refresh();
    renderStats(stats);
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 401)) console.warn(error);
  } finally {
    statsPending = false;
    if (statsAgain) {
      statsAgain = false;
      setTimeout(refreshStats, 250);
    }
  }
}

export function renderStats(stats) {
  state.stats = stats;
  $("#count-queued").textContent = stats.queued.toLocaleString("en");
  $("#count-running").textContent = stats.running.toLocaleString("en");
  $("#badge").setAttribute(
    "aria-label", `${stats.running} running and ${stats.queued} queued jobs: show the active jobs`);
  $("#badge").classList.toggle("idle", stats.active === 0);
  const totals = {
    "": stats.waiting + stats.queued + stats.running + stats.done + stats.failed + stats.cancelled,
    active: stats.active, done: stats.done, failed: stats.failed, cancelled: stats.cancelled,
  };
  for (const button of document.querySelectorAll("[data-filter]")) {
    button.querySelector(".count").textContent = totals[button.dataset.filter].toLocaleString("en");
  }
  selectionChanged(); // the bulk bar's "all N matching" follows the counts
}
