// The org near a quota (docs/flow-control.md, "Quotas per org"): a note above the jobs when
// GET /quotas says the org holds 80 % or more of its queued jobs or schedules. The server
// decides what "near" is; the note is read when the org's count of queued jobs changes, at most
// once per REFRESH_MS (a read asked sooner is made once that time is up: the last change is
// never left unread).

import { api, ApiError } from "./api.js";

const REFRESH_MS = 5000;
const WHAT = { queued_jobs: "queued jobs", schedules: "schedules" };
const REFUSED = {
  queued_jobs: "new jobs are refused (429) at the quota until some start",
  schedules: "new schedules are refused at the quota",
};

export class QuotaNote {
  constructor(element) {
    this.element = element;
    this.readAt = 0;
    this.later = null;
  }

  /** Read the org's quotas again, or once REFRESH_MS have passed since the last read. */
  async refresh() {
    const wait = this.readAt + REFRESH_MS - Date.now();
    if (wait > 0) {
      this.later ??= setTimeout(() => {
        this.later = null;
        this.refresh();
      }, wait);
      return;
    }
    this.readAt = Date.now();
    try {
      this.render(await api.quotas());
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 401)) console.warn(error);
    }
  }

  render(report) {
    const near = report?.near ?? [];
    this.element.hidden = near.length === 0;
    this.element.textContent = near
      .map((n) => `Near a quota: ${n.used.toLocaleString("en")} of ${n.limit.toLocaleString("en")} `
        + `${WHAT[n.quota] ?? n.quota} (${Math.round(n.fraction * 100)} %); ${REFUSED[n.quota] ?? ""}.`)
      .join(" ");
  }
}
