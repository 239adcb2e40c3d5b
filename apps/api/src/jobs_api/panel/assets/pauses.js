// Paused job types (issue 24, docs/operations.md): a "paused" badge per paused type for every
// reader, above the jobs; for an operator (GET /job-types says can_pause) a Pause or Resume
// button per type. A pause stops every org's claims of the type: the server refuses it (403)
// to anyone else, so the buttons are only an affordance.

import { api } from "./api.js";
import { stamp } from "./format.js";
import { $ } from "./state.js";

const REFRESH_MS = 15000;

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "text") node.textContent = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  node.append(...children);
  return node;
}

export class TypePauses {
  /** ``element``: the section the badges and controls are drawn in; ``report``: a toast. */
  constructor(element, report) {
    this.element = element;
    this.report = report;
    this.answer = null;
    this.busy = false;
    setInterval(() => this.reload(), REFRESH_MS);
  }

  /** Read GET /job-types again (another operator may have paused or resumed a type). */
  async reload() {
    if (this.busy || document.hidden) return;
    try {
      this.show(await api.jobTypes());
    } catch (error) {
      console.warn(error);
    }
  }

  /** Draw the answer of GET /job-types. */
  show(answer) {
    this.answer = answer;
    const paused = new Map((answer?.paused ?? []).map((p) => [p.name, p]));
    const operator = Boolean(answer?.can_pause);
    const names = new Set(paused.keys());
    if (operator) for (const type of answer?.items ?? []) names.add(type.name);
    this.element.hidden = names.size === 0;
    const chips = [...names].sort().map((name) => this.chip(name, paused.get(name), operator));
    const label = operator ? "Job types (pause stops every org's jobs of a type)" : "Paused job types";
    this.element.replaceChildren(el("span", { class: "pauses-label", text: label }), ...chips);
  }

  chip(name, pause, operator) {
    const chip = el("span", { class: "type-chip", dataset: { type: name } }, el("span", { text: name }));
    if (pause) {
      const since = `paused since ${stamp(pause.paused_at)} by ${pause.paused_by}`;
      chip.append(el("span", { class: "badge type-paused", title: since, text: "paused" }));
    }
    if (operator) {
      const action = pause ? "resume" : "pause";
      chip.append(el("button", {
        type: "button",
        class: "ghost action",
        "aria-label": `${pause ? "Resume" : "Pause"} type ${name}`,
        onclick: () => this.act(name, action),
        text: pause ? "Resume" : "Pause",
      }));
    }
    return chip;
  }

  async act(name, action) {
    this.busy = true;
    try {
      await (action === "pause" ? api.pauseType(name) : api.resumeType(name));
      this.report(action === "pause" ? `Paused ${name}: no worker takes its jobs` : `Resumed ${name}`);
    } catch (error) {
      this.report(`Could not ${action} ${name}: ${error.message}`, "error");
    } finally {
      this.busy = false;
    }
    await this.reload();
  }
}

export function typePauses(report) {
  return new TypePauses($("#type-pauses"), report);
}
