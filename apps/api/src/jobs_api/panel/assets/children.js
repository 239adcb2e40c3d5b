// A parent's row expanded to its children (docs/panel.md, decision 0045): the jobs its handler
// enqueued, as indented rows beneath it, read 50 at a time (GET /jobs?parent_id=), each opening
// its detail like any row. The parent's row says how many of its children have ended
// ("done/total", GET /jobs gives `children` with each row).
//
// Live: a shown child's event redraws its row. The counts are read again (GET /jobs/{id}, at
// most once a second, for at most MAX_REREAD parents) for the parents an event may concern: a
// job of the list that went from running to waiting (it waits for the children it just wrote),
// one in view that ended done (its children are written with that outcome), the parent of a
// shown child, and, for an event of a job whose parent the panel cannot know (the event log
// keeps no parent), the parents in view whose children have not all ended. An expanded parent
// whose count of children grew reads its children again.

import { api } from "./api.js";
// (table.js imports this module too: these are read when a row is drawn, never at load)
import { h, renderRow, rowObserver } from "./table.js";
import { shortId } from "./format.js";
import { state } from "./state.js";

/** The children read at a time ("Show more children" reads as many again). */
export const CHILD_PAGE = 50;
/** At most this many parents' counts are read again per second. */
const MAX_REREAD = 10;
const REREAD_MS = 1000;
/** A list answers at most 200 jobs (GET /jobs's `limit`). */
const MAX_LIMIT = 200;

function group(parentId) {
  let found = state.kids.get(parentId);
  if (!found) {
    found = { open: false, jobs: new Map(), rows: new Map(), cursor: null, loading: false, error: "", foot: null, gen: 0 };
    state.kids.set(parentId, found);
  }
  return found;
}

/** Whether `parentId`'s row is expanded. */
export function isOpen(parentId) {
  return state.kids.get(parentId)?.open === true;
}

/** The disclosure button of a parent's row: "▸ 3/10 children", aria-expanded, a real button
 * (Enter and Space toggle it). Null for a job that has no child. */
export function disclosure(job) {
  const kids = job.children;
  if (!kids || !kids.total) return null;
  const open = isOpen(job.id);
  const label = `${kids.ended} of ${kids.total} children of ${job.type} ${shortId(job.id)} ended: `
    + (open ? "hide them" : "show them");
  return h("button", {
    type: "button", className: "kids", "aria-expanded": String(open), "aria-label": label,
    title: `${kids.ended} of ${kids.total} children ended`, "data-kids": `${kids.ended}/${kids.total}`,
    onclick: () => toggle(job.id),
  }, h("span", { className: "chevron", "aria-hidden": "true" }),
  h("span", { className: "kids-count", text: `${kids.ended}/${kids.total}` }),
  h("span", { className: "kids-word", text: kids.total === 1 ? " child" : " children" }));
}

/** Expand or collapse a parent's row. */
export function toggle(parentId) {
  const found = group(parentId);
  found.open = !found.open;
  const job = state.jobs.get(parentId);
  const tr = state.rows.get(parentId);
  if (job && tr) renderRow(job, tr);
  if (found.open) load(parentId, true);
  else collapse(parentId);
}

/** Remove a parent's child rows (its row collapsed, or gone from the list). */
export function collapse(parentId, forget = false) {
  const found = state.kids.get(parentId);
  if (!found) return;
  found.gen += 1; // a read in flight is dropped
  for (const [id, tr] of found.rows) {
    rowObserver.unobserve(tr);
    state.visible.delete(tr);
    tr.remove();
    state.childOf.delete(id);
  }
  found.foot?.remove();
  Object.assign(found, { jobs: new Map(), rows: new Map(), cursor: null, loading: false, error: "", foot: null });
  if (forget) state.kids.delete(parentId);
}

async function load(parentId, reset, limit = CHILD_PAGE) {
  const found = group(parentId);
  const gen = ++found.gen;
  found.loading = true;
  found.error = "";
  draw(parentId);
  try {
    const page = await api.listJobs({ parent_id: parentId, limit, cursor: reset ? null : found.cursor });
    if (gen !== found.gen || !found.open) return;
    if (reset) {
      const kept = new Set(page.items.map((job) => job.id));
      for (const [id, tr] of found.rows) {
        if (kept.has(id)) continue;
        rowObserver.unobserve(tr);
        state.visible.delete(tr);
        tr.remove();
        found.rows.delete(id);
        found.jobs.delete(id);
        state.childOf.delete(id);
      }
    }
    for (const job of page.items) {
      found.jobs.set(job.id, job);
      state.childOf.set(job.id, parentId);
    }
    found.cursor = page.next_cursor;
  } catch (error) {
    if (gen !== found.gen) return;
    found.error = `Could not read the children: ${error.message}`;
  }
  found.loading = false;
  draw(parentId);
}

function newestFirst(a, b) {
  const ta = Date.parse(a.created_at);
  const tb = Date.parse(b.created_at);
  return ta !== tb ? tb - ta : (a.id < b.id ? 1 : -1);
}

/** The child rows right after the parent's row, newest first, then the group's last line. */
function draw(parentId) {
  const found = state.kids.get(parentId);
  const parentRow = state.rows.get(parentId);
  if (!found || !found.open || !parentRow) return;
  let anchor = parentRow;
  for (const job of [...found.jobs.values()].sort(newestFirst)) {
    let tr = found.rows.get(job.id);
    if (!tr) {
      tr = renderRow(job, undefined, parentId);
      found.rows.set(job.id, tr);
      rowObserver.observe(tr);
    }
    if (anchor.nextElementSibling !== tr) anchor.after(tr);
    anchor = tr;
  }
  const foot = footer(parentId, found);
  if (foot) {
    if (anchor.nextElementSibling !== foot) anchor.after(foot);
  } else if (found.foot) {
    // All read: the focus a keyboard user had on "Show more" goes to the last child's row.
    const hadFocus = found.foot.contains(document.activeElement);
    found.foot.remove();
    if (hadFocus) anchor.querySelector("td.type button.link")?.focus();
  }
  found.foot = foot;
}

/** The group's last line: reading, an error, or "Show more children"; none once every child
 * is shown. Built once and updated in place: its button keeps the keyboard focus. */
function footer(parentId, found) {
  const total = state.jobs.get(parentId)?.children?.total ?? found.jobs.size;
  let note = "";
  let label = "";
  if (found.loading) [note, label] = ["Reading the children…", found.foot ? "Reading…" : ""];
  else if (found.error) [note, label] = [found.error, "Try again"];
  else if (found.cursor) {
    const next = Math.min(CHILD_PAGE, Math.max(total - found.jobs.size, 1));
    [note, label] = [`${found.jobs.size} of ${total} children shown`, `Show ${next} more children`];
  }
  if (!note) return null;
  const tr = found.foot || h("tr", { className: "kids-foot" },
    h("td", { colspan: 10 }, h("span", { className: "kids-note" }), " ",
      h("button", { type: "button", className: "ghost kids-more", onclick: () => more(parentId) })));
  tr.dataset.parent = parentId;
  const text = tr.querySelector(".kids-note");
  text.textContent = note;
  text.className = `kids-note ${found.error ? "field-error" : "hint"}`;
  const button = tr.querySelector("button");
  button.hidden = !label;
  button.textContent = label;
  button.setAttribute("aria-disabled", String(found.loading));
  return tr;
}

function more(parentId) {
  const found = state.kids.get(parentId);
  if (!found || found.loading) return;
  load(parentId, found.jobs.size === 0); // after an error with none read: from the start
}

/** A job was deleted: gone from its parent's children too (the parent's count is read again). */
export function childGone(id) {
  const parentId = state.childOf.get(id);
  if (!parentId) return;
  state.childOf.delete(id);
  const found = state.kids.get(parentId);
  const tr = found?.rows.get(id);
  if (tr) {
    rowObserver.unobserve(tr);
    state.visible.delete(tr);
    tr.remove();
  }
  found?.rows.delete(id);
  found?.jobs.delete(id);
  mark(parentId);
}

/** A parent's row was drawn again (or placed): its children follow it. */
export function parentDrawn(parentId) {
  if (isOpen(parentId)) draw(parentId);
}

// ---- live ----------------------------------------------------------------------------------

const dirty = new Set();
let timer = null;

function mark(parentId) {
  if (!state.jobs.has(parentId)) return;
  dirty.add(parentId);
  timer ??= setTimeout(flush, REREAD_MS);
}

/** A change of `job` from the stream (`known`: the job as the list had it, if it did). */
export function jobChanged(job, known) {
  const parentId = state.childOf.get(job.id);
  if (parentId) {
    const found = state.kids.get(parentId);
    const shown = found?.jobs.get(job.id);
    if (shown) {
      const next = { ...job, parent_id: parentId, priority: shown.priority, children: shown.children };
      found.jobs.set(job.id, next);
      renderRow(next, found.rows.get(job.id), parentId);
    }
    mark(parentId);
    return;
  }
  if (state.jobs.get(job.id)?.children || isOpen(job.id)) mark(job.id); // a parent: new children?
  const parent = job.parent_id ?? known?.parent_id;
  if (parent) {
    mark(parent);
    return;
  }
  // A job of the list may have become a parent: children are written with an outcome that
  // leaves their parent waiting (it waits for them: always a parent) or done (any job: only
  // one in view is read again).
  const waits = job.status === "waiting" && known?.status === "running";
  const done = job.status === "done" && known && known.status !== "done";
  if (waits || (done && state.visible.has(state.rows.get(job.id)))) mark(job.id);
  if (known && known.parent_id === null) return; // not a child
  // A job the panel cannot place (first seen in an event, which keeps no parent): it may be a
  // child of a parent in view whose children are still running.
  for (const tr of state.visible) {
    const shown = state.jobs.get(tr.dataset.id);
    if (shown?.children && shown.children.ended < shown.children.total) mark(shown.id);
  }
}

async function flush() {
  timer = null;
  const ids = [...dirty].slice(0, MAX_REREAD);
  for (const id of ids) dirty.delete(id);
  if (dirty.size) timer = setTimeout(flush, REREAD_MS);
  await Promise.all(ids.map(reread));
}

async function reread(parentId) {
  let fresh;
  try {
    fresh = await api.getJob(parentId);
  } catch {
    return; // a deleted parent leaves with its event; an outage is the stream's to say
  }
  const job = state.jobs.get(parentId);
  if (!job) return;
  const before = job.children;
  const after = fresh.children ?? null;
  if (before?.total === after?.total && before?.ended === after?.ended) return;
  const next = { ...job, children: after };
  state.jobs.set(parentId, next);
  const tr = state.rows.get(parentId);
  if (tr) renderRow(next, tr);
  const found = state.kids.get(parentId);
  if (!after) collapse(parentId, true);
  else if (found?.open && after.total !== before?.total) {
    load(parentId, true, Math.min(MAX_LIMIT, Math.max(CHILD_PAGE, found.jobs.size)));
  } else if (found?.open) draw(parentId);
}
