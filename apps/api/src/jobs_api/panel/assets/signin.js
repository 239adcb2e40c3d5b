// The sign-in form: the token typed by the person goes once, in the body of POST /session, and
// is cleared from the field at once. It is never put in a URL nor kept by this script.

const form = document.querySelector("#signin-form");
const input = document.querySelector("#token");
const error = document.querySelector("#signin-error");
const button = document.querySelector("#signin-submit");

function nextPage() {
  const next = new URLSearchParams(location.search).get("next") || "/";
  // Only a path of this site: never an open redirect.
  return next.startsWith("/") && !next.startsWith("//") && !next.startsWith("/\\") ? next : "/";
}

const params = new URLSearchParams(location.search);
if (params.has("signed_out")) {
  document.querySelector("#signin-note").textContent = "You are signed out.";
}

// Already signed in (a live cookie): straight to the panel.
fetch("/session", { credentials: "same-origin", cache: "no-store" }).then((response) => {
  if (response.ok && !params.has("signed_out")) location.replace(nextPage());
}).catch(() => {});

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  error.textContent = "";
  input.removeAttribute("aria-invalid");
  const token = input.value.trim();
  if (!token) {
    error.textContent = "Paste an API token (jobs token create --org ORG prints one).";
    input.setAttribute("aria-invalid", "true");
    input.focus();
    return;
  }
  button.disabled = true;
  try {
    const response = await fetch("/session", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ token }),
    });
    if (response.ok) {
      input.value = "";
      location.replace(nextPage());
      return;
    }
    error.textContent = response.status === 401 || response.status === 422
      ? "This token is not valid: it is unknown, revoked or mistyped. Create one with " +
        "`jobs token create --org ORG`."
      : `The API answered ${response.status}; try again in a moment.`;
  } catch {
    error.textContent = "The API cannot be reached; check that it is running.";
  } finally {
    button.disabled = false;
  }
  input.setAttribute("aria-invalid", "true");
  input.select();
  input.focus();
});
