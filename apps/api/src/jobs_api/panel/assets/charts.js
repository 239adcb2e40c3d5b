// Small SVG charts of the Overview: the jobs finished per bucket (stacked bars: done, failed,
// cancelled) and the p50/p95 of a duration per bucket (two lines, gaps where a bucket had
// none). Drawn with the DOM (no library, no inline style: the page's CSP holds); the colours
// are the stylesheet's, so they follow light and dark. Each bar says its bucket on hover.

import { duration, stamp } from "./format.js";

const NS = "http://www.w3.org/2000/svg";
const W = 240;
const H = 56;

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(NS, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  for (const child of children) if (child) node.append(child);
  return node;
}

function title(text) {
  const node = svg("title");
  node.textContent = text;
  return node;
}

function frame(label, className) {
  return svg("svg", {
    viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img", "aria-label": label,
    class: `chart ${className}`,
  }, title(label), svg("line", { x1: 0, y1: H - 0.5, x2: W, y2: H - 0.5, class: "axis" }));
}

function bucketName(bucket, bucketS) {
  const start = stamp(bucket.start).slice(11, 16);
  const end = stamp(new Date(Date.parse(bucket.start) + bucketS * 1000).toISOString()).slice(11, 16);
  return `${start}–${end}`;
}

const PARTS = ["done", "failed", "cancelled"];

/** Stacked bars of the jobs finished in each bucket; `label` says it in words. */
export function finishedChart(buckets, bucketS, label) {
  const chart = frame(label, "chart-finished");
  const peak = Math.max(1, ...buckets.map((b) => b.done + b.failed + b.cancelled));
  const step = W / Math.max(1, buckets.length);
  buckets.forEach((bucket, index) => {
    const total = bucket.done + bucket.failed + bucket.cancelled;
    if (!total) return;
    const group = svg("g", {}, title(`${bucketName(bucket, bucketS)}: ${PARTS.map((p) => `${bucket[p]} ${p}`).join(", ")}`));
    let top = H;
    for (const part of PARTS) {
      if (!bucket[part]) continue;
      const height = (bucket[part] / peak) * (H - 2);
      top -= height;
      group.append(svg("rect", {
        x: index * step + step * 0.1, y: top, width: step * 0.8, height, class: `bar-${part}`,
      }));
    }
    chart.append(group);
  });
  return chart;
}

/** The points of `key` as a line through the buckets that have one (a bucket without jobs
 * is skipped, not a drop to zero) and as dots: zero-length segments with round caps, whose
 * stroke does not scale, so they stay round in a chart stretched to its box. */
function paths(buckets, key, peak) {
  const step = W / Math.max(1, buckets.length);
  const points = [];
  buckets.forEach((bucket, index) => {
    const value = bucket[key];
    if (value === null || value === undefined) return;
    points.push([(index * step + step / 2).toFixed(1), (H - 3 - (value / peak) * (H - 8)).toFixed(1)]);
  });
  return {
    line: points.map(([x, y], i) => `${i ? "L" : "M"}${x} ${y}`).join(" "),
    dots: points.map(([x, y]) => `M${x} ${y}h0`).join(" "),
  };
}

/** The p50 and p95 of `kind` (`wait` or `run`) per bucket, as two lines with a dot at each
 * bucket that had jobs; `label` says it in words. */
export function latencyChart(buckets, bucketS, kind, label) {
  const chart = frame(label, "chart-latency");
  const p50 = `${kind}_p50`;
  const p95 = `${kind}_p95`;
  const peak = Math.max(0.001, ...buckets.map((b) => b[p95] ?? 0));
  for (const [key, className] of [[p95, "line-p95"], [p50, "line-p50"]]) {
    const { line, dots } = paths(buckets, key, peak);
    if (!line) continue;
    chart.append(svg("path", { d: line, class: className }));
    chart.append(svg("path", { d: dots, class: `${className} dots` }));
  }
  const step = W / Math.max(1, buckets.length);
  buckets.forEach((bucket, index) => {
    if (bucket[p50] === null || bucket[p50] === undefined) return;
    chart.append(svg("rect", {
      x: index * step, y: 0, width: step, height: H, class: "hit",
    }, title(`${bucketName(bucket, bucketS)}: p50 ${seconds(bucket[p50])}, p95 ${seconds(bucket[p95])}`)));
  });
  return chart;
}

/** Seconds as the panel writes durations ("850 ms", "12 s", "3 min 4 s"). */
export function seconds(value) {
  return value === null || value === undefined ? "—" : duration(value * 1000) || "0 ms";
}
