// The panel's state and constants, shared by its modules (app.js, table.js).

export const PAGE = 50;
export const LIVE_ROWS = 250;
export const FINISHED = new Set(["done", "failed", "cancelled"]);
export const FILTERS = {
  "": null,
  active: new Set(["waiting", "queued", "running"]),
  done: new Set(["done"]),
  failed: new Set(["failed"]),
  cancelled: new Set(["cancelled"]),
};
export const MINE_KEY = "jobs-panel:started-here";

export const $ = (selector) => document.querySelector(selector);

export const state = {
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
  view: "jobs", // or "overview", "schedules"
  window: "hour", // the Overview's: or "day"
  selected: new Set(), // ids of the jobs ticked for a bulk action
  kids: new Map(), // parent id -> its expanded children (children.js)
  childOf: new Map(), // id of a child shown under its parent -> the parent's id
};
