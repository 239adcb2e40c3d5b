// The Jobs panel: a window of the org's jobs kept live by the event stream.
//
// Consistency: the stream is opened first and the list read after; events that arrive while a
// list is being read are held and applied, in order, once it is in. A `resync` event (the
// server dropped events for this client) re-reads the list and the counts. No timer ever asks
// the server for anything: the one interval below only redraws ages and running durations.

import { api, signedOut } from "./api.js";
import { PayloadFields } from "./form.js";
import { typePauses } from "./pauses.js";
import { QuotaNote } from "./quota.js";
import { BulkBar } from "./bulk.js";
import { jobChanged } from "./children.js";
import { detailClosed, openDetail, renderDetail } from "./detail.js";
import { age, duration, shortId } from "./format.js";
import { OverviewView } from "./overview.js";
import { SchedulesView } from "./schedules.js";
import { Search } from "./search.js";
import { SESSION } from "./session.js";
import { LiveStream } from "./stream.js";
import { FINISHED, MINE_KEY, $, state } from "./state.js";
import { durationMs, eta, h, loadPage, refreshStats, remove, renderRow, upsert } from "./table.js";
import { readUrl, syncUrl } from "./urls.js";

export { openDetail, renderDetail }; // (table.js reads them from here)

let schedulesView = null;
let overviewView = null;
let bulk = null;
export let quotaNote = null;
let pauses = null;

// ---- live events ----------------------------------------------------------------------------

export function applyEvent(event) {
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
  if (change.deleted) {
    remove(change.id);
    notifyIfMine(change);
    return;
  }
  // The event log keeps no priority (its job's is always the default), no parent and no count
  // of children: keep what the list said (a parent unknown stays undefined: children.js).
  const known = state.jobs.get(change.job.id);
  upsert({
    ...change.job,
    priority: known?.priority ?? 0,
    parent_id: change.job.parent_id ?? (known ? known.parent_id : undefined),
    children: known?.children ?? null,
  });
  jobChanged(change.job, known);
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
  live.textContent = {
    connecting: "Connecting…", live: "Live", reconnecting: "Reconnecting…",
    unreachable: "Database unreachable",
  }[stateName];
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

export function toast(text, kind = "info", action = null) {
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
export async function act(action, id) {
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

export function confirmDelete(id) {
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
    (pauses ??= typePauses(toast)).show(answer); // the paused badges, an operator's buttons
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

/** Change the Jobs filter (the Overview follows it too): the Jobs view unless the Overview is
 * shown, the list read again, the selection dropped (it was of the other filter). */
export function setFilter(change, view = state.view === "overview" ? "overview" : "jobs") {
  Object.assign(state.filter, change);
  renderFilters();
  bulk.clear();
  state.cursor = null;
  state.exhausted = false;
  loadPage(true);
  showView(view);
}

function renderFilters() {
  for (const button of document.querySelectorAll("[data-filter]")) {
    button.setAttribute("aria-pressed", String(button.dataset.filter === state.filter.status));
  }
  $("#type-filter").value = state.filter.type;
}

// ---- views ----------------------------------------------------------------------------------

const TITLES = { jobs: "Jobs", overview: "Overview · Jobs", schedules: "Schedules · Jobs" };
const SKIPS = {
  jobs: ["#jobs-table", "Skip to the jobs"],
  overview: ["#overview-types", "Skip to the overview"],
  schedules: ["#schedules-table", "Skip to the schedules"],
};

/** Show a view. The jobs list stays live behind the others (the stream keeps running); the
 * Overview and the schedules are read each time their view opens. */
export function showView(name) {
  const view = name in TITLES ? name : "jobs";
  state.view = view;
  for (const panel of document.querySelectorAll("[data-view-panel]")) {
    panel.hidden = panel.dataset.viewPanel !== view;
  }
  for (const link of document.querySelectorAll("[data-view]")) {
    if (link.dataset.view === view) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  const skip = $("#skip");
  [skip.href, skip.textContent] = SKIPS[view];
  document.title = TITLES[view];
  syncUrl();
  if (view === "schedules") schedulesView.show();
  else schedulesView.hide();
  if (view === "overview") overviewView.show();
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
    const parent = tr.dataset.parent; // a child's row (children.js)
    const job = parent ? state.kids.get(parent)?.jobs.get(tr.dataset.childId) : state.jobs.get(tr.dataset.id);
    if (!job) continue;
    tr.querySelector(".age").textContent = age(now - Date.parse(job.created_at));
    if (job.status === "running") tr.querySelector(".duration").textContent = duration(durationMs(job, now));
    if (job.status === "queued") {
      renderRow(job, tr, parent || null); // scheduled or retrying becomes queued when due
      const when = eta(job, now);
      if (when !== null) tr.querySelector(".eta").textContent = when;
    }
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
  const asked = readUrl();
  state.filter.status = asked.status;
  state.filter.type = asked.type;
  state.window = asked.window;
  renderFilters();
  schedulesView = new SchedulesView($("#schedules-view"), { h, toast, openJob: jumpToJob });
  overviewView = new OverviewView($("#overview-view"), { toast, setFilter });
  bulk = new BulkBar({ toast });
  new Search($("#search"), { openJob: openDetail });
  for (const link of document.querySelectorAll("[data-view]")) {
    link.addEventListener("click", (e) => {
      if (e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return; // a new tab: let it
      e.preventDefault();
      showView(link.dataset.view);
    });
  }
  if (asked.view !== "jobs") showView(asked.view);
  if (asked.job) openDetail(asked.job); // a deep link: /?job=<id>

  for (const button of document.querySelectorAll("[data-filter]")) {
    button.addEventListener("click", () => setFilter({ status: button.dataset.filter }));
  }
  $("#type-filter").addEventListener("change", (e) => setFilter({ type: e.target.value }));
  $("#badge").addEventListener("click", (e) => {
    e.preventDefault();
    setFilter({ status: "active" }, "jobs");
  });
  $("#new-job").addEventListener("click", openForm);
  $("#enqueue-type").addEventListener("change", (e) => chooseType(e.target.value));
  $("#enqueue-form").addEventListener("submit", submitForm);
  $("#enqueue-cancel").addEventListener("click", () => $("#enqueue").close());
  $("#detail-close").addEventListener("click", () => $("#detail").close());
  $("#detail").addEventListener("close", detailClosed);
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
