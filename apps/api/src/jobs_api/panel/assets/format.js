// Pure formatting helpers of the panel: no DOM, no network.

/** A short duration: "850 ms", "12 s", "3 min 4 s", "2 h 5 min", "3 d 4 h". */
export function duration(ms) {
  if (!Number.isFinite(ms) || ms < 0) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h} h ${m % 60} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

/** How long ago: "just now", "5 s ago", "3 min ago", "2 h ago", "4 d ago". */
export function age(ms) {
  if (!Number.isFinite(ms)) return "";
  if (ms < 2000) return "just now";
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s} s ago`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ago`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ago`;
  return `${Math.floor(h / 24)} d ago`;
}

/** How long until: "in 5 s", "in 3 min", "in 2 h", "in 4 d"; "due now" once it has passed. */
export function until(ms) {
  if (!Number.isFinite(ms)) return "";
  if (ms < 1000) return "due now";
  const s = Math.floor(ms / 1000);
  if (s < 60) return `in ${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `in ${m} min`;
  const h = Math.floor(m / 60);
  if (h < 48) return `in ${h} h ${m % 60} min`;
  return `in ${Math.floor(h / 24)} d`;
}

const TARGET_KEYS = [
  "site_id", "site", "site_target_id", "file_name", "filename", "file", "path", "url",
  "domain", "import_id", "name", "id",
];

function short(value) {
  const text = String(value);
  if (/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(text)) {
    return text.slice(0, 8); // a UUID: its first group tells rows apart
  }
  return text.length > 40 ? `${text.slice(0, 39)}…` : text;
}

/** What a job works on, in a few characters: a known key of its payload (site_id, a file's
 * base name, a URL...), else its first scalar field as key=value, else "". */
export function target(payload) {
  if (!payload || typeof payload !== "object") return "";
  for (const key of TARGET_KEYS) {
    const value = payload[key];
    if (value === undefined || value === null || typeof value === "object") continue;
    if (["file_name", "filename", "file", "path"].includes(key)) {
      return short(String(value).split(/[\\/]/).pop());
    }
    return key.endsWith("_id") || key === "id" ? `${key} ${short(value)}` : short(value);
  }
  for (const [key, value] of Object.entries(payload)) {
    if (value !== null && typeof value !== "object") return `${key}=${short(value)}`;
  }
  return "";
}

/** "3 / 5" with numbers rounded for reading. */
export function count(value) {
  if (typeof value !== "number") return String(value ?? "");
  return Number.isInteger(value) ? value.toLocaleString("en") : value.toFixed(1);
}

/** The fraction done (0..1) of a progress document, or null when it has no total. */
export function fraction(progress) {
  if (!progress) return null;
  const { done, total } = progress;
  if (typeof done !== "number" || typeof total !== "number" || total <= 0) return null;
  return Math.min(1, Math.max(0, done / total));
}

/** A local date-time for the timeline, with milliseconds. */
export function stamp(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  const pad = (n, w = 2) => String(n).padStart(w, "0");
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`
  );
}

/** The job's id, short. */
export function shortId(id) {
  return String(id).slice(-8);
}
