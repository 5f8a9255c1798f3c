// Small DOM helpers. Everything shown is set as text, never parsed as HTML: labels, bodies and
// queue names come from senders on the network.

export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(element.dataset, value);
    else if (value === true) element.setAttribute(name, "");
    else element.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

export function replace(parent, ...children) {
  parent.replaceChildren(...children.flat().filter((child) => child !== null && child !== undefined && child !== false));
}

export function number(value) {
  return Number(value).toLocaleString("en-US");
}

export function bytes(value) {
  const n = Number(value);
  if (n < 1024) return `${number(n)} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

export function plural(n, one, many = `${one}s`) {
  return `${number(n)} ${n === 1 ? one : many}`;
}

export function time(text) {
  if (!text) return "";
  const moment = new Date(text);
  return Number.isNaN(moment.getTime()) ? text : moment.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

let toastTimer = null;

export function toast(text, error = false) {
  const box = document.getElementById("toast");
  box.textContent = text;
  box.className = error ? "toast error" : "toast";
  box.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { box.hidden = true; }, error ? 8000 : 4000);
}

// A confirmation that says what will happen; resolves true on OK.
export function confirmAction(text, detail = "") {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-detail").textContent = detail;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.returnValue = "cancel";
    dialog.showModal();
  });
}

export function download(blob, filename) {
  const link = h("a", { href: URL.createObjectURL(blob), download: filename });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 60000);
}

export function hexDump(data) {
  const lines = [];
  for (let offset = 0; offset < data.length; offset += 16) {
    const row = data.slice(offset, offset + 16);
    const hex = Array.from(row, (b) => b.toString(16).padStart(2, "0")).join(" ");
    const text = Array.from(row, (b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join("");
    lines.push(`${offset.toString(16).padStart(8, "0")}  ${hex.padEnd(47)}  ${text}`);
  }
  return lines.join("\n");
}

export function fromBase64(text) {
  const raw = atob(text || "");
  return Uint8Array.from(raw, (c) => c.charCodeAt(0));
}
