// The whole "framework": build elements, and reconcile a keyed list of children.
//
// Why no framework: the page is one list of turns, each a list of cards, and almost every
// change touches the last card of the last turn. A keyed reconcile that redraws a card only
// when its data changed covers that; a library would add a build step or a vendored copy
// and its own update model next to the reducer's.

/** `h("button", {class: "x", "aria-label": "Close", onclick}, "text", child, …)` */
export function h(tag, props = null, ...children) {
  const el = document.createElement(tag);
  if (props) {
    for (const [name, value] of Object.entries(props)) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "class") el.className = value;
      else if (name === "text") el.textContent = value;
      else if (name.startsWith("on") && typeof value === "function") {
        el.addEventListener(name.slice(2), value);
      } else if (name === "dataset") Object.assign(el.dataset, value);
      else el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  appendAll(el, children);
  return el;
}

function appendAll(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) appendAll(el, child);
    else el.append(child);
  }
}

/** Replace all children of `el`. */
export function fill(el, ...children) {
  el.replaceChildren();
  appendAll(el, children);
  return el;
}

const KEYED = new WeakMap();

/**
 * Make `container`'s children match `entries`, in order. Each entry is
 * `{key, sig, create(): Node, update?(node): void}`: a known key whose `sig` is unchanged
 * keeps its node untouched; a changed one is updated in place when it has `update`
 * (cards that hold children of their own) and rebuilt otherwise. `container` must hold
 * nothing but the nodes this function put there.
 */
export function reconcile(container, entries) {
  const refocus = [];
  const known = KEYED.get(container) ?? new Map();
  const next = new Map();
  let cursor = container.firstChild;
  for (const entry of entries) {
    let record = known.get(entry.key);
    if (record === undefined) {
      record = { node: keyed(entry), sig: entry.sig };
      if (entry.update) entry.update(record.node);
    } else if (record.sig !== entry.sig) {
      if (entry.update) {
        entry.update(record.node);
      } else {
        const fresh = keyed(entry);
        // Keep keyboard users where they were: focus inside a rebuilt card moves to the
        // new card when it can take focus (e.g. an input request after its answer).
        const focused = record.node.contains(document.activeElement);
        if (record.node === cursor) cursor = cursor.nextSibling;
        record.node.remove();
        record.node = fresh;
        if (focused && fresh.tabIndex >= -1 && fresh.hasAttribute("tabindex")) {
          refocus.push(fresh);
        }
      }
      record.sig = entry.sig;
    }
    next.set(entry.key, record);
    if (record.node === cursor) cursor = cursor.nextSibling;
    else container.insertBefore(record.node, cursor);
  }
  for (const [key, record] of known) {
    if (!next.has(key)) record.node.remove();
  }
  KEYED.set(container, next);
  for (const node of refocus) node.focus();
}

// The key also goes on the element: tests and the reader's devtools see the item identity.
function keyed(entry) {
  const node = entry.create();
  node.dataset.key = entry.key;
  return node;
}

/** Forget what `reconcile` knew about `container` (its children are about to be replaced). */
export function forget(container) {
  KEYED.delete(container);
}

// Which <details> the user opened or closed, by a stable key, so a card rebuilt by a
// streamed update keeps the reader's choice.
const disclosure = new Map();

export function details(openKey, defaultOpen, summary, ...body) {
  const open = disclosure.has(openKey) ? disclosure.get(openKey) : defaultOpen;
  const el = h("details", { open, dataset: { openKey } }, h("summary", null, summary), ...body);
  el.addEventListener("toggle", () => disclosure.set(openKey, el.open));
  return el;
}

/** An element only screen readers announce (e.g. a status spelled out next to an icon). */
export function srOnly(text) {
  return h("span", { class: "sr-only" }, text);
}
