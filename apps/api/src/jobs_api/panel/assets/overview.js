// The Overview view: per job type, its jobs by status (following the Jobs filter), and over the
// last hour or day the jobs finished per bucket and the p50/p95 of their wait and run time
// (GET /overview, computed by the database); the org's use of its quotas; the live workers
// with their slots and types (shown to operators only).
//
// Not live: read when the view opens, when the window changes and on "Refresh".

import { api } from "./api.js";
import { finishedChart, latencyChart, seconds } from "./charts.js";
import { stamp } from "./format.js";
import { $, state } from "./state.js";
import { h } from "./table.js";
import { syncUrl } from "./urls.js";

const STATUSES = ["waiting", "queued", "running", "done", "failed", "cancelled"];
const WINDOW_WORDS = { hour: "the last hour", day: "the last day" };

export class OverviewView {
  /** Drawn in `root`; `toast` says things, `setFilter(change, view)` shows filtered jobs. */
  constructor(root, { toast, setFilter }) {
    this.root = root;
    this.toast = toast;
    this.setFilter = setFilter;
    this.types = root.querySelector("#overview-types");
    this.status = root.querySelector("#overview-status");
    this.loading = false;
    this.again = false;
    for (const button of root.querySelectorAll("[data-window]")) {
      button.addEventListener("click", () => {
        state.window = button.dataset.window;
        syncUrl();
        this.load();
      });
    }
    root.querySelector("#overview-refresh").addEventListener("click", () => this.load());
    root.querySelector("#overview-clear").addEventListener("click", () => this.setFilter({ status: "", type: "" }));
  }

  show() {
    this.load();
  }

  /** Read the view (one read in flight; a request meanwhile reads once more after it). */
  async load() {
    if (this.loading) {
      this.again = true;
      return;
    }
    this.loading = true;
    this.root.setAttribute("aria-busy", "true");
    this.renderControls();
    try {
      const view = await api.overview({
        window: state.window, status: state.filter.status, type: state.filter.type,
      });
      this.render(view);
      this.status.textContent = `Read at ${stamp(new Date().toISOString()).slice(11, 19)}`;
    } catch (error) {
      this.toast(`Could not read the overview: ${error.message}`, "error");
    } finally {
      this.loading = false;
      this.root.removeAttribute("aria-busy");
      this.root.dataset.loaded = "true";
      if (this.again) {
        this.again = false;
        this.load();
      }
    }
  }

  renderControls() {
    for (const button of this.root.querySelectorAll("[data-window]")) {
      button.setAttribute("aria-pressed", String(button.dataset.window === state.window));
    }
    const { status, type } = state.filter;
    const words = [status && `status ${status}`, type && `type ${type}`].filter(Boolean).join(", ");
    this.root.querySelector("#overview-filter-text").textContent = words ? `Counting ${words}` : "";
    this.root.querySelector("#overview-filter").hidden = !words;
  }

  render(view) {
    this.renderControls();
    this.types.replaceChildren(...view.types.map((type) => this.card(type, view)));
    const empty = this.root.querySelector("#overview-empty");
    empty.hidden = view.types.length > 0;
    this.renderUsage(view.usage);
    this.renderWorkers(view.workers);
  }

  card(type, view) {
    const minutes = (type.series.length * view.bucket_s) / 60 || 1;
    const sum = (key) => type.series.reduce((total, b) => total + b[key], 0);
    const finished = sum("done") + sum("failed") + sum("cancelled");
    const rate = finished / minutes;
    const window = WINDOW_WORDS[view.window];
    const counts = h("ul", { className: "counts", "aria-label": `${type.type} jobs by status` },
      ...STATUSES.map((status) => h("li", {},
        h("button", {
          type: "button", className: `count-chip status-${status}`, "data-status": status,
          "aria-label": `${type.counts[status]} ${status}: show them`,
          onclick: () => this.setFilter({ status, type: type.type }, "jobs"),
        }, h("span", { className: "n", text: type.counts[status].toLocaleString("en") }), ` ${status}`))));
    const charts = type.series.length
      ? h("div", { className: "charts" },
        this.figure(
          [h("span", { className: "name", text: "Finished" }),
            h("span", { className: "line" }, h("b", { text: perTime(rate) }),
              ` · ${finished.toLocaleString("en")}`),
            h("span", { className: "line" }, sum("failed")
              ? h("span", { className: "failed-note", text: `${sum("failed").toLocaleString("en")} failed` })
              : h("span", { className: "quiet", text: "none failed" }))],
          finishedChart(type.series, view.bucket_s,
            `${type.type}: ${finished} finished in ${window}, ${sum("failed")} failed`)),
        this.latency(type, view, "wait", "Wait"),
        this.latency(type, view, "run", "Run time"))
      : h("p", { className: "hint quiet", text: `Nothing finished in ${window}.` });
    return h("article", { className: "type-card", "data-type": type.type },
      h("header", {},
        h("h3", { className: "mono" }, h("button", {
          type: "button", className: "link", "aria-label": `${type.type}: show its jobs`,
          onclick: () => this.setFilter({ type: type.type }, "jobs"),
        }, type.type)),
        h("span", { className: "total", text: `${type.total.toLocaleString("en")} job${type.total === 1 ? "" : "s"}` })),
      counts, charts);
  }

  latency(type, view, kind, words) {
    const last = [...type.series].reverse().find((b) => b[`${kind}_p50`] !== null);
    const caption = [h("span", { className: "name", text: words })];
    if (last) {
      for (const p of ["p50", "p95"]) {
        caption.push(h("span", { className: "line" },
          h("span", { className: `key-${p}`, "aria-hidden": "true" }), `${p} `,
          h("b", { text: seconds(last[`${kind}_${p}`]) })));
      }
    } else caption.push(h("span", { className: "line quiet", text: "—" }), h("span", { className: "line", text: "\u00a0" }));
    const label = last
      ? `${type.type}: ${words.toLowerCase()} per bucket over ${WINDOW_WORDS[view.window]}; latest p50 ${seconds(last[`${kind}_p50`])}, p95 ${seconds(last[`${kind}_p95`])}`
      : `${type.type}: no ${words.toLowerCase()} measured in ${WINDOW_WORDS[view.window]}`;
    return this.figure(caption, latencyChart(type.series, view.bucket_s, kind, label));
  }

  figure(caption, chart) {
    const box = h("figure", { className: "chart-box" }, h("figcaption", {}, ...caption), chart);
    box.title = "Latest bucket with jobs; hover a bucket for its figures";
    return box;
  }

  renderUsage(usage) {
    const box = $("#overview-usage");
    if (!usage?.quotas) {
      box.replaceChildren();
      return;
    }
    const meter = (label, used, limit) => h("div", { className: "meter" },
      h("span", { className: "meter-label", text: label }),
      h("span", { className: "meter-value", text: `${used.toLocaleString("en")} / ${limit.toLocaleString("en")}` }),
      h("span", { className: "bar" }, h("span", {
        className: "fill", style: `width: ${Math.min(100, (100 * used) / Math.max(1, limit)).toFixed(1)}%`,
      })));
    box.replaceChildren(
      h("h2", { className: "section-title", text: usage.enforced ? "Quotas" : "Quotas (not enforced)" }),
      meter("Queued jobs", usage.usage.queued_jobs, usage.quotas.max_queued),
      meter("Schedules", usage.usage.schedules, usage.quotas.max_schedules));
  }

  renderWorkers(workers) {
    const box = $("#overview-workers");
    box.hidden = workers === null;
    if (workers === null) return;
    const list = workers.length
      ? h("table", { className: "workers-table" },
        h("caption", { className: "visually-hidden", text: "Live workers" }),
        h("thead", {}, h("tr", {}, ...["Worker", "Slots", "Types", "Seen"].map((t) => h("th", { scope: "col", text: t })))),
        h("tbody", {}, ...workers.map((w) => h("tr", {},
          h("td", { className: "mono", text: `${w.host}:${w.pid}` }),
          h("td", { className: "num", text: String(w.slots) }),
          h("td", { className: "types", text: w.types.join(", ") }),
          h("td", { className: "seen", text: stamp(w.last_seen_at).slice(11, 19) })))))
      : h("p", { className: "hint", text: "No live worker: queued jobs wait until one starts." });
    box.querySelector("#overview-worker-list").replaceChildren(list);
  }
}

/** A rate given per minute, as read at a glance: "12/min", "0.8/min", "3/h" (under 0.1/min). */
export function perTime(perMinute) {
  if (perMinute >= 10) return `${Math.round(perMinute)}/min`;
  if (perMinute >= 0.1) return `${perMinute.toFixed(1)}/min`;
  const perHour = perMinute * 60;
  return `${perHour >= 10 || perHour === 0 ? Math.round(perHour) : perHour.toFixed(1)}/h`;
}
