// The Schedules view: the org's schedules (docs/schedules.md) with pause, resume and "run now".
//
// Schedules are not in the event stream: the list is read when the view opens, after each
// action, and when "Refresh" is pressed. No timer asks the server for anything; the one
// interval below only redraws the "in 3 min" of the next runs while the view is shown.

import { api } from "./api.js";
import { age, shortId, stamp, until } from "./format.js";

/** `YYYY-MM-DD HH:MM` of an instant in the schedule's own time zone (the zone its cron reads
 * in, so "0 4 * * *" shows 04:00 wherever the browser is). */
export function inZone(iso, timeZone) {
  try {
    const parts = Object.fromEntries(new Intl.DateTimeFormat("en-CA", {
      timeZone, year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", hourCycle: "h23",
    }).formatToParts(new Date(iso)).map((part) => [part.type, part.value]));
    return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}`;
  } catch {
    return stamp(iso).slice(0, 16); // a zone this browser does not know: its own time
  }
}

/** The view, drawn in `root` (the <main> of the view). `h` builds elements, `toast` says
 * things, `openJob(id)` shows a job's detail in the Jobs view. */
export class SchedulesView {
  constructor(root, { h, toast, openJob }) {
    this.root = root;
    this.h = h;
    this.toast = toast;
    this.openJob = openJob;
    this.rows = root.querySelector("#schedule-rows");
    this.empty = root.querySelector("#schedules-empty");
    this.status = root.querySelector("#schedules-status");
    this.items = [];
    this.loading = false;
    this.again = false;
    this.ticker = null;
    this.refocus = null; // [schedule, action] to focus after the next redraw
    root.querySelector("#schedules-refresh").addEventListener("click", () => this.load());
  }

  show() {
    this.load();
    this.ticker ??= setInterval(() => this.tick(), 1000);
  }

  hide() {
    clearInterval(this.ticker);
    this.ticker = null;
  }

  /** Read the list (one read in flight; a request meanwhile reads once more after it). */
  async load() {
    if (this.loading) {
      this.again = true;
      return;
    }
    this.loading = true;
    this.root.setAttribute("aria-busy", "true");
    try {
      this.items = await api.listSchedules();
      this.render();
      this.status.textContent = `Read at ${stamp(new Date().toISOString()).slice(11, 19)}`;
    } catch (error) {
      this.items = [];
      this.render(error.status === 501
        ? "Schedules need the PostgreSQL store: run the API with JOBS_STORE=postgres."
        : `Could not read the schedules: ${error.message}`);
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

  render(problem = null) {
    const focused = document.activeElement?.closest?.("[data-schedule]");
    const focusKey = this.refocus
      || (focused ? [focused.dataset.schedule, document.activeElement.dataset.action] : null);
    this.refocus = null;
    this.rows.replaceChildren(...this.items.map((schedule) => this.row(schedule)));
    this.empty.hidden = this.items.length > 0;
    this.empty.querySelector("p").textContent = problem
      || "No schedules yet. Add one with `jobs schedule add` or POST /schedules.";
    if (focusKey) {
      // Keep the keyboard where it was: on the same action of the same schedule (or the
      // action that replaced it, pause <-> resume).
      const tr = this.rows.querySelector(`tr[data-schedule="${CSS.escape(focusKey[0])}"]`);
      const target = tr?.querySelector(`[data-action="${focusKey[1]}"]`)
        || tr?.querySelector("[data-action='pause'], [data-action='resume']");
      target?.focus();
    }
  }

  row(schedule) {
    const h = this.h;
    const now = Date.now();
    const state = schedule.enabled ? "enabled" : "paused";
    const next = Date.parse(schedule.next_run_at);
    const toggle = schedule.enabled ? "pause" : "resume";
    return h("tr", { className: `row schedule-${state}`, "data-schedule": schedule.name, "data-enabled": String(schedule.enabled) },
      h("td", { className: "name" },
        h("span", { className: "mono strong", text: schedule.name }),
        schedule.description ? h("span", { className: "sub", text: schedule.description }) : null,
        schedule.source === "code" ? h("span", { className: "sub", text: "declared in code" }) : null),
      h("td", { className: "type", text: schedule.type }),
      h("td", { className: "when" },
        h("code", { text: schedule.cron }),
        h("span", { className: "sub", text: schedule.timezone })),
      h("td", { className: "state" },
        h("span", { className: `badge schedule-badge-${state}`, text: state })),
      h("td", { className: "next", title: `${stamp(schedule.next_run_at)} your time` },
        schedule.enabled
          ? [h("span", { className: "rel", "data-at": schedule.next_run_at, text: until(next - now) }),
            h("span", { className: "sub mono", text: inZone(schedule.next_run_at, schedule.timezone) })]
          : h("span", { className: "sub", text: "paused" })),
      h("td", { className: "last" }, this.lastRun(schedule, now)),
      h("td", { className: "actions" },
        h("button", {
          type: "button", className: "action", "data-action": toggle,
          "aria-label": `${toggle === "pause" ? "Pause" : "Resume"} schedule ${schedule.name}`,
          onclick: () => this.act(schedule.name, toggle),
        }, toggle === "pause" ? "Pause" : "Resume"),
        h("button", {
          type: "button", className: "action", "data-action": "run",
          "aria-label": `Run schedule ${schedule.name} now`,
          onclick: () => this.act(schedule.name, "run"),
        }, "Run now")));
  }

  lastRun(schedule, now) {
    const h = this.h;
    if (!schedule.last_job_id && !schedule.last_run_at) return h("span", { className: "sub", text: "never" });
    const parts = [];
    if (schedule.last_job_id) {
      parts.push(h("button", {
        type: "button", className: "link mono", "aria-haspopup": "dialog", "data-job": schedule.last_job_id,
        "aria-label": `Last job of ${schedule.name}, ${shortId(schedule.last_job_id)}: open its details`,
        title: schedule.last_job_id,
        onclick: () => this.openJob(schedule.last_job_id),
      }, shortId(schedule.last_job_id)));
    }
    if (schedule.last_run_at) {
      parts.push(h("span", {
        className: "sub", title: stamp(schedule.last_run_at),
        text: age(now - Date.parse(schedule.last_run_at)),
      }));
    }
    return parts;
  }

  async act(name, action) {
    const buttons = this.rows.querySelectorAll(`tr[data-schedule="${CSS.escape(name)}"] button.action`);
    // The buttons are disabled while the request runs, which takes the focus from them: the
    // redrawn row gives it back.
    const active = document.activeElement;
    if (active?.closest?.("[data-schedule]")?.dataset.schedule === name) {
      this.refocus = [name, active.dataset.action];
    }
    for (const button of buttons) button.disabled = true;
    try {
      const schedule = await api.scheduleAction(name, action);
      if (action === "run" && schedule?.last_job_id) {
        this.toast(`Enqueued ${schedule.type} ${shortId(schedule.last_job_id)} from ${name}`, "info", {
          label: "Details", run: () => this.openJob(schedule.last_job_id),
        });
      } else {
        this.toast(`Schedule ${name} ${action === "pause" ? "paused" : "resumed"}`, "info");
      }
    } catch (error) {
      this.toast(`Could not ${action === "run" ? "run" : action} ${name}: ${error.message}`, "error");
    } finally {
      await this.load();
    }
  }

  tick() {
    const now = Date.now();
    for (const node of this.rows.querySelectorAll(".rel[data-at]")) {
      node.textContent = until(Date.parse(node.dataset.at) - now);
    }
  }
}
