// The enqueue form, generated from a job type's payload JSON Schema. The API validates: the
// form collects typed values and shows the API's errors beside the fields they name.

let uid = 0;
const REQUIRED = "Field required"; // the API's (pydantic's) words for a missing field

function resolve(schema, root) {
  let node = schema || {};
  for (let hops = 0; node.$ref && hops < 10; hops += 1) {
    const path = node.$ref.replace(/^#\//, "").split("/");
    let found = root;
    for (const part of path) found = found?.[part];
    node = { ...(found || {}), ...node, $ref: undefined };
  }
  if (Array.isArray(node.allOf) && node.allOf.length === 1) {
    node = { ...resolve(node.allOf[0], root), ...node, allOf: undefined };
  }
  return node;
}

/** The single JSON type of a property (an Optional's non-null branch), or "json". */
function kindOf(node, root) {
  if (Array.isArray(node.enum)) return "enum";
  let type = node.type;
  if (!type && Array.isArray(node.anyOf)) {
    const branches = node.anyOf.map((b) => resolve(b, root)).filter((b) => b.type !== "null");
    if (branches.length === 1) return kindOf(branches[0], root);
    return "json";
  }
  if (Array.isArray(type)) {
    const real = type.filter((t) => t !== "null");
    type = real.length === 1 ? real[0] : "json";
  }
  if (["string", "integer", "number", "boolean"].includes(type)) return type;
  return "json";
}

function element(tag, props = {}, children = []) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "text") node.textContent = value;
    else if (key === "className") node.className = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

/** A form section for ``schema``: build it into ``container``; read() returns the payload or
 * throws a FieldProblem; showErrors(list) puts the API's errors beside the fields. */
export class PayloadFields {
  constructor(container, schema) {
    this.container = container;
    this.root = schema || {};
    this.fields = new Map(); // name -> { kind, input, error, node }
    this.free = null; // a JSON textarea for a schema without declared properties
    container.replaceChildren();
    const top = resolve(this.root, this.root);
    const properties = top.properties || {};
    const required = new Set(top.required || []);
    const names = Object.keys(properties);
    for (const name of names) {
      this.addField(name, resolve(properties[name], this.root), required.has(name));
    }
    if (names.length === 0 && top.additionalProperties !== false) {
      this.free = this.addField("", { title: "Payload (a JSON object)" }, false, "json");
      this.free.input.value = "{}";
    }
    if (names.length === 0 && top.additionalProperties === false) {
      container.append(element("p", { className: "hint", text: "This type takes no payload." }));
    }
  }

  addField(name, node, isRequired, forced) {
    uid += 1;
    const id = `field-${uid}`;
    const kind = forced || kindOf(node, this.root);
    const label = node.title || name;
    const hintId = `${id}-hint`;
    const errorId = `${id}-error`;
    let input;
    if (kind === "enum") {
      input = element("select", { id });
      if (!isRequired) input.append(element("option", { value: "", text: "—" }));
      for (const choice of node.enum) {
        input.append(element("option", { value: JSON.stringify(choice), text: String(choice) }));
      }
      if (node.default !== undefined && node.default !== null) input.value = JSON.stringify(node.default);
    } else if (kind === "boolean") {
      input = element("input", { id, type: "checkbox" });
      input.checked = node.default === true;
    } else if (kind === "integer" || kind === "number") {
      const min = node.minimum ?? node.exclusiveMinimum;
      const max = node.maximum ?? node.exclusiveMaximum;
      input = element("input", {
        id, type: "text", inputmode: kind === "integer" ? "numeric" : "decimal",
        autocomplete: "off", "data-min": min, "data-max": max,
      });
      if (node.default !== undefined && node.default !== null) input.value = String(node.default);
    } else if (kind === "string") {
      const long = (node.maxLength ?? 0) > 200;
      input = element(long ? "textarea" : "input", {
        id, type: long ? undefined : "text", autocomplete: "off", spellcheck: "false",
        rows: long ? 3 : undefined,
      });
      if (node.default !== undefined && node.default !== null) input.value = String(node.default);
    } else {
      input = element("textarea", { id, rows: 4, spellcheck: "false", className: "mono" });
      if (node.default !== undefined && node.default !== null) input.value = JSON.stringify(node.default, null, 2);
    }
    input.setAttribute("name", name || "payload");
    input.setAttribute("aria-describedby", `${hintId} ${errorId}`);
    if (isRequired) input.setAttribute("aria-required", "true");
    const hints = [];
    if (node.description) hints.push(node.description);
    const range = [];
    if (node.minimum !== undefined) range.push(`≥ ${node.minimum}`);
    if (node.exclusiveMinimum !== undefined) range.push(`> ${node.exclusiveMinimum}`);
    if (node.maximum !== undefined) range.push(`≤ ${node.maximum}`);
    if (node.exclusiveMaximum !== undefined) range.push(`< ${node.exclusiveMaximum}`);
    if (range.length && !(node.description || "").includes(String(node.maximum ?? "\0"))) {
      hints.push(range.join(", "));
    }
    if (node.format) hints.push(node.format);
    if (kind === "json" && name) hints.push("JSON");
    const labelNode = element("label", { for: id }, [
      element("span", { text: label }),
      isRequired ? element("span", { className: "required", "aria-hidden": "true", text: " *" }) : null,
    ]);
    const hint = element("p", { id: hintId, className: "hint", text: hints.join(" · ") });
    const error = element("p", { id: errorId, className: "field-error", "aria-live": "polite" });
    const row = element("div", { className: `field field-${kind}` });
    if (kind === "boolean") {
      row.append(element("div", { className: "check" }, [input, labelNode]), hint, error);
    } else {
      row.append(labelNode, input, hint, error);
    }
    this.container.append(row);
    const field = { name, kind, input, error, node, required: isRequired };
    this.fields.set(name, field);
    return field;
  }

  /** The payload object; values typed by the schema; empty optional fields left out, an empty
   * required one refused (in ``local``). A value that cannot be typed (bad JSON) is sent as
   * typed text so the API names the error. */
  read() {
    if (this.free) {
      const text = this.free.input.value.trim() || "{}";
      try {
        return { payload: JSON.parse(text), local: [] };
      } catch (error) {
        return { payload: null, local: [{ field: this.free, msg: `not valid JSON: ${error.message}` }] };
      }
    }
    const payload = {};
    const local = [];
    for (const field of this.fields.values()) {
      const { kind, input, name } = field;
      if (kind === "boolean") {
        payload[name] = input.checked;
        continue;
      }
      const raw = input.value;
      if (raw.trim() === "") {
        // A required field left empty is refused here, as the API refuses a missing one and
        // the CLI an empty one: never sent as "" (an empty text is not a value typed in).
        if (field.required) local.push({ field, msg: REQUIRED });
        continue;
      }
      if (kind === "enum") payload[name] = JSON.parse(raw);
      else if (kind === "integer" || kind === "number") {
        const number = Number(raw.trim());
        payload[name] = raw.trim() !== "" && Number.isFinite(number) ? number : raw;
      } else if (kind === "string") payload[name] = raw;
      else {
        try {
          payload[name] = JSON.parse(raw);
        } catch (error) {
          local.push({ field, msg: `not valid JSON: ${error.message}` });
        }
      }
    }
    for (const key of Object.keys(payload)) if (payload[key] === undefined) delete payload[key];
    return { payload, local };
  }

  clearErrors() {
    for (const field of this.fields.values()) {
      field.error.textContent = "";
      field.input.removeAttribute("aria-invalid");
    }
  }

  /** Shows each error beside its field; returns the errors that name no field here. */
  showErrors(errors) {
    const rest = [];
    let first = null;
    for (const error of errors) {
      const field = this.fieldOf(error.loc || []);
      if (!field) {
        rest.push(error);
        continue;
      }
      const text = field.error.textContent;
      field.error.textContent = text ? `${text}; ${error.msg}` : error.msg;
      field.input.setAttribute("aria-invalid", "true");
      first ??= field;
    }
    first?.input.focus();
    return rest;
  }

  /** The field an API error location names: ["body", "payload", name, ...]. */
  fieldOf(loc) {
    const path = [...loc];
    if (path[0] === "body") path.shift();
    if (path[0] !== "payload") return null;
    path.shift();
    if (path[0] === "payload") path.shift(); // a schema that already prefixed its own loc
    if (this.free) return this.free;
    if (path.length === 0) return null;
    return this.fields.get(String(path[0])) || null;
  }
}
