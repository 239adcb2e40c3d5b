// The Jobs panel: a window of the org's jobs kept live by the event stream.
//
// Consistency: the stream is opened first and the list read after; events that arrive while a
// list is being read are held and applied, in order, once it is in. A `resync` event (the
// server dropped events for this client) re-reads the list and the counts. No timer ever asks
// the server for anything: the one interval below only redraws ages and running durations.

import { api, ApiError, signedOut } from "./api.js";
import { PayloadFields } from "./form.js";
import { QuotaNote } from "./quota.js";
import { age, count, duration, fraction, shortId, stamp, target } from "./format.js";
import { SchedulesView } from "./schedules.js";
import { SESSION } from "./session.js";
import { LiveStream } from "./stream.js";

const PAGE = 50;
const LIVE_ROWS = 250;
const FINISHED = new Set(["done", "failed", "cancelled"]);
const FILTERS = {
  "": null,
  active: new Set(["queued", "running"]),
  done: new Set(["done"]),
  failed: new Set(["failed"]),
  cancelled: new Set(["cancelled"]),
};
const MINE_KEY = "jobs-panel:started-here";

const $ = (selector) => document.querySelector(selector);

const state = {
  filter: { status: "", type: "" },
  jobs: new Map(), // id -> job, the loaded window
  rows: new Map(), // id -> <tr>
  cursor: null,
  exhausted: false,
  loading: false,
  generation: 0,
  held: [], // events that arrived while a list was being read
  types: new Map(), // name -> job type, from GET /job-types
  mine: new Set(JSON.parse(sessionStorage.getItem(MINE_KEY) || "[]")),
  detailId: null,
  listed: false, // a page of the list was read once
  oldest: null, // the oldest loaded job (cached: events ask for it often)
  unseen: new Set(), // ids of new jobs not inserted (the window was full)
  visible: new Set(),
  stats: null,
  view: "jobs", // or "schedules"
};

let schedulesView = null;
let quotaNote = null;

// ---- small DOM helpers -------------------------------------------------------------------

function h(tag, props = {}, ...children) {
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

function sortKey(job) {
  return [Date.parse(job.created_at), job.id];
}

/** True when a is newer than b (the list's order: created_at desc, id desc). */
function newer(a, b) {
  const [ta, ia] = sortKey(a);
  const [tb, ib] = sortKey(b);
  return ta !== tb ? ta > tb : ia > ib;
}

function matches(job) {
  const statuses = FILTERS[state.filter.status];
  if (statuses && !statuses.has(job.status)) return false;
  return !state.filter.type || job.type === state.filter.type;
}

function oldestLoaded() {
  if (state.oldest && state.jobs.has(state.oldest.id)) return state.oldest;
  let oldest = null;
  for (const job of state.jobs.values()) if (!oldest || newer(oldest, job)) oldest = job;
  state.oldest = oldest;
  return oldest;
}

/** Whether a matching job falls inside the loaded window (else it shows when scrolled to). */
function inWindow(job) {
  if (state.exhausted) return true;
  const oldest = oldestLoaded();
  return !oldest || !newer(oldest, job);
}

/** A new job arrived: shown at once while the window is small; past LIVE_ROWS rows it is only
 * counted, and "N new jobs" reloads the first page (a burst of thousands of enqueues must not
 * grow the table without bound). */
function admitNew(job) {
  if (state.jobs.size < LIVE_ROWS) return true;
  state.unseen.add(job.id);
  const button = $("#newer");
  button.hidden = false;
  const n = state.unseen.size;
  button.textContent = `${n.toLocaleString("en")} new job${n === 1 ? "" : "s"}: show`;
  return false;
}

function statusLabel(job) {
  if (job.status === "running" && job.cancel_requested_at) return "cancelling";
  return job.status;
}

function durationMs(job, now = Date.now()) {
  if (!job.started_at) return null;
  const end = job.finished_at ? Date.parse(job.finished_at) : now;
  return end - Date.parse(job.started_at);
}

function typeName(job) {
  return state.types.get(job.type)?.title || job.type;
}

// ---- the table ----------------------------------------------------------------------------

function progressCell(job) {
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
function fullMessage(job) {
  const report = job.report || {};
  const type = typeof report.exception_type === "string" ? `${report.exception_type}: ` : "";
  if (typeof report.message === "string" && report.message.trim()) return type + report.message.trim();
  return job.error || "";
}

function traceback(job) {
  const text = job.report?.traceback;
  return typeof text === "string" ? text.trim() : "";
}

function errorCell(job) {
  if (!job.error) return "";
  const first = job.error.split("\n")[0];
  return h("details", { className: `error error-${job.status}` },
    h("summary", { title: "Show the whole message" }, h("span", { text: first })),
    h("pre", { text: fullMessage(job) }));
}

function actionButtons(job, where) {
  const label = `${job.type} ${shortId(job.id)}`;
  const buttons = [];
  if (job.status === "queued" || (job.status === "running" && !job.cancel_requested_at)) {
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
 * closes an error someone opened. */
function cells(job, now) {
  const ms = durationMs(job, now);
  const label = statusLabel(job);
  return [
    ["type", job.id, () => [
      h("button", {
        type: "button", className: "link", "aria-haspopup": "dialog",
        "aria-label": `${job.type} ${shortId(job.id)}: open details`, onclick: () => openDetail(job.id),
      }, job.type),
      h("span", { className: "id mono", text: shortId(job.id), title: job.id })]],
    ["target", "", () => [h("span", { text: target(job.payload) })]],
    ["status", label, () => [h("span", { className: `badge status-${label}`, text: label })]],
    ["progress-cell", JSON.stringify([job.status, job.progress]), () => [progressCell(job)]],
    ["attempts num", `${job.attempts}/${job.max_attempts}`, () => [`${job.attempts} / ${job.max_attempts}`]],
    ["age", "", () => [age(now - Date.parse(job.created_at))]],
    ["duration num", `${job.started_at}|${job.finished_at}`, () => [ms === null ? "—" : duration(ms)]],
    ["error-cell", `${job.error || ""}|${job.finished_at}`, () => [errorCell(job)]],
    ["actions", label, () => actionButtons(job, "row")],
  ];
}

function renderRow(job, tr = h("tr")) {
  const now = Date.now();
  tr.className = `row row-${job.status}`;
  tr.dataset.id = job.id;
  tr.dataset.status = job.status;
  const specs = cells(job, now);
  if (tr.children.length !== specs.length) {
    tr.replaceChildren(...specs.map(([className]) => h("td", { className })));
  }
  specs.forEach(([, signature, build], index) => {
    const td = tr.children[index];
    if (td.dataset.sig === signature && td.dataset.sig !== undefined) return;
    const hadFocus = td.contains(document.activeElement);
    td.replaceChildren(...build());
    td.dataset.sig = signature;
    if (hadFocus) (td.querySelector("button") || tr.querySelector("td.type button")).focus();
  });
  const targetCell = tr.children[1];
  targetCell.title = JSON.stringify(job.payload);
  tr.children[5].title = stamp(job.created_at);
  return tr;
}

const rowObserver = new IntersectionObserver((entries) => {
  for (const entry of entries) {
    if (entry.isIntersecting) state.visible.add(entry.target);
    else state.visible.delete(entry.target);
  }
});

function placeRow(job) {
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
}

function dropRow(id) {
  const tr = state.rows.get(id);
  if (tr) {
    rowObserver.unobserve(tr);
    state.visible.delete(tr);
    tr.remove();
    state.rows.delete(id);
  }
  state.jobs.delete(id);
}

function updateEmpty() {
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
function upsert(job) {
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

function remove(id) {
  if (state.detailId === id) {
    $("#detail-status").textContent = "This job was deleted.";
    $("#detail-actions").replaceChildren();
  }
  dropRow(id);
  updateEmpty();
}

// ---- reading the list -----------------------------------------------------------------------

async function loadPage(reset) {
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

let statsPending = false;
let statsAgain = false;

/** Re-read the counts after changes (at most one read in flight, coalescing the rest). */
async function refreshStats() {
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

function renderStats(stats) {
  state.stats = stats;
  $("#count-queued").textContent = stats.queued.toLocaleString("en");
  $("#count-running").textContent = stats.running.toLocaleString("en");
  $("#badge").setAttribute(
    "aria-label", `${stats.running} running and ${stats.queued} queued jobs: show the active jobs`);
  $("#badge").classList.toggle("idle", stats.active === 0);
  const totals = {
    "": stats.queued + stats.running + stats.done + stats.failed + stats.cancelled,
    active: stats.active, done: stats.done, failed: stats.failed, cancelled: stats.cancelled,
  };
  for (const button of document.querySelectorAll("[data-filter]")) {
    button.querySelector(".count").textContent = totals[button.dataset.filter].toLocaleString("en");
  }
}

// ---- live events ----------------------------------------------------------------------------

function applyEvent(event) {
  if (event.type === "resync") {
    state.held.length = 0; // older than the list about to be read: it covers them
    loadPage(true);
    refreshStats();
    return;
  }
  if (state.loading) {
    state.held.push(event);
    return;
  }
  const change = event.change;
  if (change.deleted) remove(change.id);
  else upsert(change.job);
  notifyIfMine(change);
}

let statsTimer = null;

let streamReady = null;
const firstReady = new Promise((resolve) => { streamReady = resolve; });

function onStreamEvent(type, data) {
  if (type === "ready") {
    // Subscribed: every change from here on reaches this page, so the list can be read now.
    streamReady();
    // A stream that starts afresh after the list was read (it could not resume: no id yet)
    // may have missed changes in between: read the list again.
    if (state.listed && !safeJson(data)?.resumed) applyEvent({ type: "resync" });
    return;
  }
  let change = null;
  if (type !== "resync") {
    change = SESSION.parseChange(type, data);
    if (!change) return;
  }
  applyEvent({ type, change });
  // The counts follow every change, read at most about twice a second.
  statsTimer ??= setTimeout(() => {
    statsTimer = null;
    refreshStats();
  }, 400);
}

function onStreamState(stateName) {
  const live = $("#live");
  live.dataset.state = stateName;
  live.textContent = { connecting: "Connecting…", live: "Live", reconnecting: "Reconnecting…" }[stateName];
}

// ---- notifications ------------------------------------------------------------------------

function remember() {
  sessionStorage.setItem(MINE_KEY, JSON.stringify([...state.mine].slice(-200)));
}

function notifyIfMine(change) {
  const job = change.job;
  if (!job || !state.mine.has(job.id) || !FINISHED.has(job.status)) return;
  state.mine.delete(job.id);
  remember();
  const text = `${job.type} ${shortId(job.id)} ended: ${job.status}`;
  toast(text, job.status === "done" ? "done" : job.status === "failed" ? "error" : "info", {
    label: "Details", run: () => openDetail(job.id),
  });
  if ("Notification" in window && Notification.permission === "granted" && document.hidden) {
    new Notification("jobs", { body: text, tag: job.id });
  }
}

function toast(text, kind = "info", action = null) {
  const node = h("div", { className: `toast toast-${kind}` },
    h("span", { text }),
    action ? h("button", { type: "button", className: "link", onclick: () => { action.run(); node.remove(); } }, action.label) : null,
    h("button", { type: "button", className: "close", "aria-label": "Dismiss", onclick: () => node.remove() }, "×"));
  $("#toasts").append(node);
  setTimeout(() => node.remove(), kind === "error" ? 15000 : 8000);
}

// ---- actions ------------------------------------------------------------------------------

/** Cancel or retry. The answer is not drawn: the stream brings the change, in order with the
 * changes after it (the answer may reach the page after the events of the job's next run, and
 * drawing it then would show an older state). */
async function act(action, id) {
  if (action === "retry") {
    state.mine.add(id); // before the request: its run may end before the answer arrives
    remember();
  }
  try {
    await (action === "cancel" ? api.cancel(id) : api.retry(id));
  } catch (error) {
    if (action === "retry") {
      state.mine.delete(id);
      remember();
    }
    toast(`Could not ${action} the job: ${error.message}`, "error");
  }
}

function confirmDelete(id) {
  const job = state.jobs.get(id);
  const dialog = $("#confirm");
  $("#confirm-text").textContent =
    `Delete job ${job ? `${job.type} ${shortId(job.id)}` : shortId(id)}? This cannot be undone.`;
  dialog.returnValue = "";
  dialog.onclose = async () => {
    if (dialog.returnValue !== "delete") return;
    try {
      await api.remove(id);
      remove(id);
      refreshStats();
    } catch (error) {
      toast(`Could not delete the job: ${error.message}`, "error");
    }
  };
  dialog.showModal();
  $("#confirm-keep").focus();
}

// ---- the detail view ------------------------------------------------------------------------

function json(value) {
  return value === null || value === undefined ? "—" : JSON.stringify(value, null, 2);
}

function renderDetail(job) {
  $("#detail-title").textContent = `${job.type} · ${job.id}`;
  $("#detail-status").replaceChildren(
    h("span", { className: `badge status-${statusLabel(job)}`, text: statusLabel(job) }),
    ` attempt ${job.attempts} of ${job.max_attempts}`,
    job.dedup_key ? ` · dedup key ${job.dedup_key}` : "");
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
  $("#detail-payload").textContent = json(job.payload);
  const trace = traceback(job);
  // The traceback reads as text under Error, not as one escaped JSON string here as well.
  $("#detail-report").textContent = json(
    trace && job.error ? { ...job.report, traceback: "(shown under Error)" } : job.report);
  $("#detail-error").textContent = !job.error ? "—" : trace ? `${fullMessage(job)}\n\n${trace}` : fullMessage(job);
  $("#detail-error").classList.toggle("has-error", Boolean(job.error));
  $("#detail-actions").replaceChildren(...actionButtons(job, "detail"));
}

async function openDetail(id) {
  state.detailId = id;
  const known = state.jobs.get(id);
  if (known) renderDetail(known);
  const dialog = $("#detail");
  if (!dialog.open) dialog.showModal();
  try {
    const job = await api.getJob(id);
    if (state.detailId === id) renderDetail(job);
  } catch (error) {
    if (error.status === 404) remove(id);
    else toast(`Could not read the job: ${error.message}`, "error");
  }
}

// ---- the enqueue form -----------------------------------------------------------------------

/** A description's text with its `code` spans as <code> (text nodes only: never HTML). */
function prose(text) {
  return text.split("`").map((part, index) => (index % 2 ? h("code", { text: part }) : part));
}

let payloadFields = null;

function chooseType(name) {
  const type = state.types.get(name);
  $("#type-description").replaceChildren(...prose(type ? type.description || "" : ""));
  const facts = [];
  if (type) {
    facts.push(`up to ${type.max_attempts} attempt${type.max_attempts === 1 ? "" : "s"}`);
    if (type.dedup_scope && type.dedup_scope !== "none") facts.push(`dedup scope: ${type.dedup_scope}`);
  }
  $("#type-facts").textContent = facts.join(" · ");
  payloadFields = new PayloadFields($("#payload-fields"), type ? type.payload_schema : {});
  $("#form-error").textContent = "";
}

function openForm() {
  const select = $("#enqueue-type");
  if (!state.types.size) {
    toast("No job type can be enqueued by this org.", "error");
    return;
  }
  if (!payloadFields) chooseType(select.value);
  $("#enqueue").showModal();
  select.focus();
}

async function submitForm(event) {
  event.preventDefault();
  const typeName = $("#enqueue-type").value;
  payloadFields.clearErrors();
  $("#form-error").textContent = "";
  $("#dedup-error").textContent = "";
  const { payload, local } = payloadFields.read();
  if (local.length) {
    payloadFields.showErrors(local.map(({ field, msg }) => ({ loc: ["body", "payload", field.name], msg })));
    return;
  }
  const body = { type: typeName, payload };
  const dedup = $("#dedup-key").value.trim();
  if (dedup) body.dedup_key = dedup;
  const submit = $("#enqueue-submit");
  submit.disabled = true;
  try {
    const job = await api.enqueue(body);
    state.mine.add(job.id);
    remember();
    // Drawn only if the stream has not brought it yet (then the answer is its newest state).
    if (!state.jobs.has(job.id)) upsert(job);
    // A job that ended before its id was known here (a very fast one) is announced now.
    if (FINISHED.has(state.jobs.get(job.id)?.status)) notifyIfMine({ job: state.jobs.get(job.id) });
    $("#enqueue").close();
    toast(`Enqueued ${job.type} ${shortId(job.id)}`, "info", { label: "Details", run: () => openDetail(job.id) });
  } catch (error) {
    const rest = payloadFields.showErrors(error.errors);
    const other = [];
    for (const item of rest) {
      const where = (item.loc || []).filter((p) => p !== "body").join(".");
      if (where === "dedup_key") $("#dedup-error").textContent = item.msg;
      else other.push(where ? `${where}: ${item.msg}` : item.msg);
    }
    if (!error.errors.length || other.length) {
      $("#form-error").textContent = other.length ? other.join("; ") : error.message;
    }
  } finally {
    submit.disabled = false;
  }
}

async function loadTypes() {
  try {
    const answer = await api.jobTypes();
    const list = Array.isArray(answer) ? answer : answer.items || answer.types || [];
    state.types = new Map(list.map((type) => [type.name, type]));
  } catch (error) {
    toast(`Could not read the job types: ${error.message}`, "error");
  }
  const formSelect = $("#enqueue-type");
  const filterSelect = $("#type-filter");
  formSelect.replaceChildren(...[...state.types.keys()].sort().map((name) => h("option", { value: name, text: name })));
  const current = filterSelect.value || state.filter.type;
  const names = new Set([...state.types.keys()]);
  if (current) names.add(current);
  filterSelect.replaceChildren(h("option", { value: "", text: "All types" }),
    ...[...names].sort().map((name) => h("option", { value: name, text: name })));
  filterSelect.value = current;
  if (formSelect.value) chooseType(formSelect.value);
}

// ---- filters --------------------------------------------------------------------------------

function readFilterFromUrl() {
  const params = new URLSearchParams(location.search);
  const status = params.get("status") || "";
  state.filter.status = status in FILTERS ? status : "";
  state.filter.type = params.get("type") || "";
}

function jobsUrl() {
  const params = new URLSearchParams();
  if (state.filter.status) params.set("status", state.filter.status);
  if (state.filter.type) params.set("type", state.filter.type);
  return params.size ? `?${params}` : location.pathname;
}

function setFilter(change) {
  Object.assign(state.filter, change);
  if (state.view !== "jobs") showView("jobs");
  history.replaceState(null, "", jobsUrl());
  renderFilters();
  state.cursor = null;
  state.exhausted = false;
  loadPage(true);
}

function renderFilters() {
  for (const button of document.querySelectorAll("[data-filter]")) {
    button.setAttribute("aria-pressed", String(button.dataset.filter === state.filter.status));
  }
  $("#type-filter").value = state.filter.type;
}

// ---- views ----------------------------------------------------------------------------------

/** Show the Jobs or the Schedules view. The jobs list stays live behind the Schedules view
 * (the stream keeps running); the schedules are read each time their view opens. */
function showView(name) {
  const view = name === "schedules" ? "schedules" : "jobs";
  state.view = view;
  for (const panel of document.querySelectorAll("[data-view-panel]")) {
    panel.hidden = panel.dataset.viewPanel !== view;
  }
  for (const link of document.querySelectorAll("[data-view]")) {
    if (link.dataset.view === view) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  const skip = $("#skip");
  skip.href = view === "schedules" ? "#schedules-table" : "#jobs-table";
  skip.textContent = view === "schedules" ? "Skip to the schedules" : "Skip to the jobs";
  document.title = view === "schedules" ? "Schedules · Jobs" : "Jobs";
  history.replaceState(null, "", view === "schedules" ? "?view=schedules" : jobsUrl());
  if (view === "schedules") schedulesView.show();
  else schedulesView.hide();
}

/** A job's detail from another view (a schedule's last job): the Jobs view, then the dialog. */
function jumpToJob(id) {
  showView("jobs");
  openDetail(id);
}

// ---- ticking clocks -------------------------------------------------------------------------

function tick() {
  const now = Date.now();
  for (const tr of state.visible) {
    const job = state.jobs.get(tr.dataset.id);
    if (!job) continue;
    tr.querySelector(".age").textContent = age(now - Date.parse(job.created_at));
    if (job.status === "running") tr.querySelector(".duration").textContent = duration(durationMs(job, now));
  }
}

// ---- start ----------------------------------------------------------------------------------

async function main() {
  const session = await SESSION.load();
  if (!session) {
    signedOut();
    return;
  }
  $("#org").textContent = session.org;
  readFilterFromUrl();
  renderFilters();
  schedulesView = new SchedulesView($("#schedules-view"), { h, toast, openJob: jumpToJob });
  for (const link of document.querySelectorAll("[data-view]")) {
    link.addEventListener("click", (e) => {
      if (e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return; // a new tab: let it
      e.preventDefault();
      showView(link.dataset.view);
    });
  }
  if (new URLSearchParams(location.search).get("view") === "schedules") showView("schedules");

  for (const button of document.querySelectorAll("[data-filter]")) {
    button.addEventListener("click", () => setFilter({ status: button.dataset.filter }));
  }
  $("#type-filter").addEventListener("change", (e) => setFilter({ type: e.target.value }));
  $("#badge").addEventListener("click", (e) => {
    e.preventDefault();
    setFilter({ status: "active" });
  });
  $("#new-job").addEventListener("click", openForm);
  $("#enqueue-type").addEventListener("change", (e) => chooseType(e.target.value));
  $("#enqueue-form").addEventListener("submit", submitForm);
  $("#enqueue-cancel").addEventListener("click", () => $("#enqueue").close());
  $("#detail-close").addEventListener("click", () => $("#detail").close());
  $("#detail").addEventListener("close", () => { state.detailId = null; });
  $("#load-more").addEventListener("click", () => loadPage(false));
  $("#newer").addEventListener("click", () => {
    loadPage(true);
    $("#jobs-table").focus();
  });
  $("#sign-out").addEventListener("click", async () => {
    $("#sign-out").disabled = true;
    await SESSION.signOut();
    location.assign("/signin?signed_out=1");
  });
  const notify = $("#notify");
  if ("Notification" in window && Notification.permission === "default") {
    notify.hidden = false;
    notify.addEventListener("click", async () => {
      await Notification.requestPermission();
      notify.hidden = true;
    });
  }
  new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting)) loadPage(false);
  }, { rootMargin: "400px" }).observe($("#more"));
  document.addEventListener("keydown", (e) => {
    if (e.key === "n" && !e.ctrlKey && !e.metaKey && !e.altKey && !isTyping(e.target)
        && !document.querySelector("dialog[open]")) {
      e.preventDefault();
      openForm();
    }
  });

  state.loading = true; // hold the events until the first page is in
  new LiveStream({
    url: "/jobs/events",
    onEvent: onStreamEvent,
    onState: onStreamState,
    onUnauthorized: signedOut,
  }).start();
  // The list is read once the stream is subscribed (docs/events.md: nothing falls between the
  // two); if the stream cannot open, the list is shown anyway and the stream keeps trying.
  await Promise.all([loadTypes(), Promise.race([firstReady, wait(5000)])]);
  quotaNote = new QuotaNote($("#quota-note"));
  refreshStats();
  await loadPage(true);
  setInterval(tick, 1000);
  document.body.dataset.ready = "true";
}

function safeJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

function wait(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function isTyping(node) {
  return node instanceof HTMLElement && (node.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(node.tagName));
}

main();
