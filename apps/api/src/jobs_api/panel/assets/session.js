// The browser session (docs/sessions.md): the cookie is HttpOnly, so this module only holds the
// CSRF token, in memory, read from GET /session after every page load. Nothing is stored.

let csrfToken = "";

export const SESSION = {
  csrfHeader: "X-CSRF-Token",

  csrf() {
    return csrfToken;
  },

  /** The signed-in org, or null when there is no live session. */
  async load() {
    let response;
    try {
      response = await fetch("/session", { credentials: "same-origin", cache: "no-store" });
    } catch {
      return null;
    }
    if (!response.ok) return null;
    const body = await response.json();
    csrfToken = body.csrf_token;
    return { org: body.org_id, expiresAt: body.expires_at };
  },

  async signOut() {
    try {
      await fetch("/session", {
        method: "DELETE",
        credentials: "same-origin",
        headers: { "X-CSRF-Token": csrfToken },
      });
    } finally {
      csrfToken = "";
    }
  },

  /** One `job` event of GET /jobs/events (docs/events.md) as {job, deleted, id, kind}. */
  parseChange(type, data) {
    if (type !== "job") return null;
    let body;
    try {
      body = JSON.parse(data);
    } catch {
      return null;
    }
    if (!body || !body.job) return null;
    return { kind: body.kind, at: body.at, job: body.job, id: body.job.id, deleted: body.kind === "deleted" };
  },
};
