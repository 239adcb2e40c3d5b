// The search box: a job by its id, the 8 characters the table shows, or the first digits of its
// id (GET /jobs/lookup). One match opens its detail; several are listed to choose from; none,
// or a text that is no id, is said under the box. "/" puts the focus in the box.

import { api } from "./api.js";
import { shortId } from "./format.js";

export class Search {
  /** `form` holds the box; `openJob(id)` opens a job's detail. */
  constructor(form, { openJob }) {
    this.form = form;
    this.openJob = openJob;
    this.input = form.querySelector("input");
    this.results = form.querySelector(".search-results");
    this.message = form.querySelector(".search-message");
    this.list = form.querySelector(".search-candidates");
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.find(this.input.value);
    });
    this.input.addEventListener("input", () => this.close());
    this.input.addEventListener("keydown", (event) => {
      if (event.key === "Escape") this.close();
    });
    document.addEventListener("click", (event) => {
      if (!form.contains(event.target)) this.close();
    });
    document.addEventListener("keydown", (event) => {
      if (event.key === "/" && !isTyping(event.target) && !document.querySelector("dialog[open]")) {
        event.preventDefault();
        this.input.focus();
      }
    });
  }

  async find(raw) {
    const text = raw.trim();
    if (!text) return;
    this.form.setAttribute("aria-busy", "true");
    try {
      const job = await api.lookup(text);
      this.close();
      this.input.value = "";
      this.openJob(job.id);
    } catch (error) {
      if (error.status === 409) {
        const candidates = error.problem.candidates || [];
        const many = `${candidates.length}${error.problem.more ? "+" : ""}`;
        this.show(`${many} jobs match “${text}”: pick one, or type more of the id.`, candidates);
      }
      else if (error.status === 404) this.show(`No job of this org matches “${text}”.`);
      else this.show(error.errors[0]?.msg || error.message); // a 422 says why in its field
    } finally {
      this.form.removeAttribute("aria-busy");
    }
  }

  /** Say `text` under the box, with the `candidates` of an ambiguous search to choose from. */
  show(text, candidates = []) {
    this.message.textContent = text;
    this.list.replaceChildren(...candidates.map((job) => {
      const item = document.createElement("li");
      const button = document.createElement("button");
      button.type = "button";
      button.className = "candidate";
      button.textContent = `${job.type} ${shortId(job.id)} · ${job.status}`;
      button.title = job.id;
      button.addEventListener("click", () => {
        this.close();
        this.openJob(job.id);
      });
      item.append(button);
      return item;
    }));
    this.results.hidden = false;
    this.input.setAttribute("aria-invalid", candidates.length ? "false" : "true");
  }

  close() {
    this.results.hidden = true;
    this.input.removeAttribute("aria-invalid");
  }
}

function isTyping(node) {
  return node instanceof HTMLElement
    && (node.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(node.tagName));
}
