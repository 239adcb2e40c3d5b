// Bulk actions: tick jobs in the table (or all the jobs matching the filter) and retry, cancel
// or delete them at once (POST /jobs/bulk). A dry run comes first: the confirmation says how
// many jobs the action will change and how many it will skip, and why; nothing changes until
// it is confirmed. The rows change by the event stream, as for a single action.

import { api } from "./api.js";
import { $, state } from "./state.js";
import { h } from "./table.js";

export const BULK_LIMIT = 1000; // the API's most jobs per call (jobs_core.bulk.MAX_LIMIT)

const VERBS = { retry: ["Retry", "retried"], cancel: ["Cancel", "cancelled"], delete: ["Delete", "deleted"] };
// Why jobs are skipped, in words: (action, one) -> the end of "n jobs will be skipped: ...".
const SKIPS = {
  not_found: (_, one) => (one ? "it no longer exists" : "they no longer exist"),
  wrong_status: (action, one) => ({
    retry: one ? "it is not failed or cancelled" : "they are not failed or cancelled",
    cancel: one ? "it has already finished" : "they have already finished",
    delete: one ? "it has not finished" : "they have not finished",
  })[action],
  protected: (_, one) => `${one ? "it is" : "they are"} of a protected type (domain history)`,
  dedup_conflict: (_, one) => (one ? "its dedup key is held by another job" : "their dedup keys are held by other jobs"),
  quota_exceeded: () => "the org is over its quota of queued jobs or its enqueue rate",
};

/** Tell the bar that the selection changed (a row left the list, a box was ticked). */
export function selectionChanged() {
  document.dispatchEvent(new CustomEvent("jobs:selection"));
}

function plural(n, word, words = `${word}s`) {
  return `${n.toLocaleString("en")} ${n === 1 ? word : words}`;
}

const EFFECTS = {
  retry: "Each is queued again with a fresh attempt budget, as its own Retry button does.",
  cancel: "Queued jobs are cancelled at once; running ones are asked to stop.",
  delete: "They and their attempts are deleted: this cannot be undone.",
};

export class BulkBar {
  constructor({ toast }) {
    this.toast = toast;
    this.bar = $("#bulk-bar");
    this.all = false; // every job matching the filter, not only the ticked ones
    this.head = $("#select-all");
    this.head.addEventListener("change", () => this.tickShown(this.head.checked));
    $("#bulk-all").addEventListener("click", () => {
      this.all = true;
      this.render();
    });
    $("#bulk-clear").addEventListener("click", () => this.clear());
    for (const button of this.bar.querySelectorAll("[data-bulk]")) {
      button.addEventListener("click", () => this.ask(button.dataset.bulk));
    }
    document.addEventListener("jobs:selection", () => this.render());
  }

  /** Tick or untick every job shown. */
  tickShown(on) {
    for (const id of state.jobs.keys()) {
      if (on) state.selected.add(id);
      else state.selected.delete(id);
    }
    if (!on) this.all = false;
    for (const box of document.querySelectorAll("#rows input.pick")) box.checked = on;
    this.render();
  }

  clear() {
    state.selected.clear();
    this.all = false;
    for (const box of document.querySelectorAll("#rows input.pick")) box.checked = false;
    this.render();
  }

  render() {
    const ticked = state.selected.size;
    this.bar.hidden = ticked === 0 && !this.all;
    const shown = state.jobs.size;
    this.head.checked = shown > 0 && ticked >= shown;
    this.head.indeterminate = ticked > 0 && ticked < shown;
    const matching = this.matching();
    const all = matching === null ? "all jobs matching the filter" : `all ${plural(matching, "job")} matching the filter`;
    const cap = matching !== null && matching <= BULK_LIMIT ? "" : ` (up to ${BULK_LIMIT.toLocaleString("en")} a time)`;
    $("#bulk-count").textContent = this.all
      ? `${all[0].toUpperCase()}${all.slice(1)}${cap}`
      : `${plural(ticked, "job")} selected`;
    // "All matching" is offered once every job shown is ticked and more may match.
    const bulkAll = $("#bulk-all");
    bulkAll.hidden = this.all || ticked < shown || (state.exhausted && ticked === shown);
    bulkAll.textContent = `Select ${all}`;
  }

  /** How many jobs match the filter, from the live counts per status (null with a type
   * filter: the counts are the org's, not the type's; the confirmation says the number). */
  matching() {
    const stats = state.stats;
    if (!stats || state.filter.type) return null;
    const { status } = state.filter;
    if (!status) {
      return stats.waiting + stats.queued + stats.running + stats.done + stats.failed + stats.cancelled;
    }
    return status === "active" ? stats.active : stats[status] ?? null;
  }

  /** The request's body for `action` (without dry_run). */
  body(action) {
    if (!this.all) return { action, ids: [...state.selected] };
    const body = { action, limit: BULK_LIMIT };
    if (state.filter.status) body.status = state.filter.status;
    if (state.filter.type) body.type = state.filter.type;
    return body;
  }

  /** Count first (a dry run), then ask for a confirmation that says how many. */
  async ask(action) {
    const body = this.body(action);
    let dry;
    try {
      dry = await api.bulk({ ...body, dry_run: true });
    } catch (error) {
      this.toast(`Could not count the jobs: ${error.message}`, "error");
      return;
    }
    const [verb] = VERBS[action];
    const dialog = $("#bulk-confirm");
    const go = $("#bulk-go");
    $("#bulk-title").textContent = dry.acted
      ? `${verb} ${plural(dry.acted, "job")}?`
      : `Nothing to ${verb.toLowerCase()}`;
    const words = [];
    if (dry.acted) words.push(EFFECTS[action]);
    if (dry.acted && action === "cancel" && dry.done.cancel_requested) {
      words.push(`${plural(dry.done.cancel_requested, "of them is", "of them are")} running.`);
    }
    if (dry.more) words.push(`More than ${dry.matched.toLocaleString("en")} jobs match: this acts on the newest ${dry.matched.toLocaleString("en")}; run it again for the rest.`);
    $("#bulk-text").textContent = words.join(" ");
    $("#bulk-skips").replaceChildren(...this.skips(dry, action));
    go.hidden = dry.acted === 0;
    go.textContent = `${verb} ${plural(dry.acted, "job")}`;
    go.className = action === "delete" ? "danger-solid" : "primary";
    $("#bulk-keep").textContent = dry.acted ? "Keep them" : "Close";
    dialog.returnValue = "";
    dialog.onclose = () => {
      if (dialog.returnValue === "go") this.run(body);
    };
    dialog.showModal();
    $("#bulk-keep").focus();
  }

  skips(report, action) {
    const reasons = new Map();
    for (const skip of report.skipped) reasons.set(skip.reason, (reasons.get(skip.reason) || 0) + 1);
    return [...reasons].map(([reason, n]) => h("li", {
      "data-reason": reason,
      text: `${plural(n, "job")} will be skipped: ${(SKIPS[reason] || (() => reason))(action, n === 1)}.`,
    }));
  }

  async run(body) {
    const [, done] = VERBS[body.action];
    try {
      const report = await api.bulk(body);
      const skipped = report.skipped.length ? `; ${report.skipped.length.toLocaleString("en")} skipped` : "";
      const asked = report.done.cancel_requested ? ` (${report.done.cancel_requested} asked to stop)` : "";
      this.toast(`${plural(report.acted, "job")} ${done}${asked}${skipped}.`, report.skipped.length ? "info" : "done");
      this.clear();
    } catch (error) {
      this.toast(`Could not ${body.action} the jobs: ${error.message}`, "error");
    }
  }
}
