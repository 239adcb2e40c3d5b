// The panel's HTTP client: same-origin requests carried by the session cookie, the CSRF token
// on every write, problem documents (RFC 9457) turned into ApiError.

import { SESSION } from "./session.js";

export class ApiError extends Error {
  constructor(status, problem) {
    super(problem?.detail || `the API answered ${status}`);
    this.status = status;
    this.problem = problem || {};
    this.errors = Array.isArray(problem?.errors) ? problem.errors : [];
  }
}

/** Called when the API says the session is gone (401): the page goes to the sign-in page. */
export function signedOut() {
  const here = location.pathname + location.search;
  location.assign(`/signin?next=${encodeURIComponent(here)}`);
}

async function request(method, path, body) {
  const headers = { Accept: "application/json" };
  const init = { method, headers, credentials: "same-origin", cache: "no-store" };
  if (method !== "GET") {
    headers[SESSION.csrfHeader] = SESSION.csrf();
  }
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    throw new ApiError(0, { detail: "the API cannot be reached; check that it is running" });
  }
  if (response.status === 401) {
    signedOut();
    throw new ApiError(401, { detail: "signed out" });
  }
  if (response.status === 204) return null;
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = { detail: text.slice(0, 200) };
  }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

export const api = {
  listJobs(params) {
    const query = new URLSearchParams();
    for (const [key, value] of Object.entries(params)) {
      if (value !== undefined && value !== null && value !== "") query.set(key, value);
    }
    return request("GET", `/jobs?${query}`);
  },
  getJob: (id) => request("GET", `/jobs/${encodeURIComponent(id)}`),
  /** What a job waits (or waited) for: its dependencies, a batch's members, a parent's
   * children, and how each ended (GET /jobs/{id}/awaited). */
  awaited: (id) => request("GET", `/jobs/${encodeURIComponent(id)}/awaited`),
  stats: () => request("GET", "/jobs/stats"),
  /** The org's quotas, its use of them and the ones it is near (GET /quotas). */
  quotas: () => request("GET", "/quotas"),
  jobTypes: () => request("GET", "/job-types"),
  /** Operators only (403 otherwise): stop or restart every org's claims of a type. */
  pauseType: (name) => request("POST", `/job-types/${encodeURIComponent(name)}/pause`),
  resumeType: (name) => request("POST", `/job-types/${encodeURIComponent(name)}/resume`),
  enqueue: (body) => request("POST", "/jobs", body),
  cancel: (id) => request("POST", `/jobs/${encodeURIComponent(id)}/cancel`),
  retry: (id) => request("POST", `/jobs/${encodeURIComponent(id)}/retry`),
  remove: (id) => request("DELETE", `/jobs/${encodeURIComponent(id)}`),
  /** The job a text names: a full id, the 8 characters the table shows, or a prefix; 409 lists
   * the candidates when several match (GET /jobs/lookup). */
  lookup: (text) => request("GET", `/jobs/lookup?id=${encodeURIComponent(text)}`),
  /** Per type: counts, throughput, waits and run times over `window` (GET /overview). */
  overview(params) {
    const query = new URLSearchParams();
    for (const [key, value] of Object.entries(params)) if (value) query.set(key, value);
    return request("GET", `/overview?${query}`);
  },
  /** Retry, cancel or delete many jobs, or count them with `dry_run` (POST /jobs/bulk). */
  bulk: (body) => request("POST", "/jobs/bulk", body),
  listSchedules: () => request("GET", "/schedules"),
  /** `pause`, `resume` or `run` (docs/schedules.md); the schedule's new state. */
  scheduleAction: (name, action) => request("POST", `/schedules/${encodeURIComponent(name)}/${action}`),
};
