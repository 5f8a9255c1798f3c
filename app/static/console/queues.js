// A queue (its properties, actions and messages, a page at a time) and the message viewer.

import { api, queueUrl } from "./api.js";
import {
  h, replace, number, bytes, plural, time, toast, confirmAction, download, hexDump, fromBase64,
} from "./dom.js";
import { rightsOn, may } from "./rights.js";
import { state, queueByPath, writableQueues, go, problem, isDeadLetterQueue } from "./state.js";

const PAGE = 50;

function exportName(path) {
  return `${path.replace(/[^A-Za-z0-9._-]/g, "_")}.jsonl`;
}

function countsText(queue) {
  return `${plural(queue.message_count, "message")} · ${bytes(queue.byte_count)}`;
}

function targetSelect(id, exclude) {
  return h("select", { id, "aria-label": "Target queue" },
    writableQueues().filter((queue) => queue.path !== exclude)
      .map((queue) => h("option", { value: queue.path }, queue.path)));
}

// -- the queue view ------------------------------------------------------------------

export async function queueView(main, path) {
  const queue = await api.get(queueUrl(path));
  const rights = await rightsOn(path);
  const view = { path, queue, rights, after: "0", history: [], filters: {}, shownCount: null };
  const counts = h("p", { id: "queue-count", class: "muted" }, countsText(queue));
  const list = h("div", { id: "messages" });
  const dead = isDeadLetterQueue(path);
  const administered = queue.kind === "system" || queue.is_journal;

  const actions = h("div", { class: "actions", id: "queue-actions" },
    may(rights, "send") && !administered ? h("button", { id: "show-send", onclick: () => toggle(sendForm) }, "Send a message") : null,
    may(rights, "purge") ? h("button", { id: "purge", class: "danger", onclick: () => purge(view) }, "Purge…") : null,
    may(rights, "set-properties") && !administered ? h("button", { id: "show-edit", onclick: () => toggle(editForm) }, "Edit properties") : null,
    may(rights, "delete-queue") && !administered ? h("button", { id: "delete-queue", class: "danger", onclick: () => deleteQueue(view) }, "Delete queue…") : null,
    may(rights, "export") ? h("button", { id: "export", onclick: () => exportMessages(path, null) }, "Export all") : null,
    may(rights, "import") && !administered ? importControls(path) : null,
    dead && may(rights, "resend") ? h("button", { id: "resend-all", onclick: () => resend(view, null) }, "Resend all…") : null);
  const sendForm = administered ? null : sendMessageForm(view);
  const editForm = administered ? null : editPropertiesForm(view);

  replace(main,
    h("h1", { id: "queue-title" }, path),
    h("p", {}, h("span", { class: "badge" }, queue.transactional ? "transactional" : "not transactional"), " ",
      h("span", { class: "badge" }, queue.journal ? "journal on" : "journal off"), " ",
      h("span", { class: "muted" }, queue.label || "")),
    counts, actions, sendForm, editForm,
    h("h2", {}, "Messages"), filterForm(view), list);
  view.list = list;
  view.counts = counts;
  state.onPoll = () => onPoll(view);
  await loadMessages(view);
}

function toggle(element) {
  element.hidden = !element.hidden;
}

function onPoll(view) {
  const queue = queueByPath(view.path);
  if (!queue) return;
  view.counts.textContent = countsText(queue);
  const picked = view.list.querySelectorAll("input.pick:checked").length;
  if (queue.message_count !== view.shownCount && picked === 0 && view.history.length === 0) {
    view.shownCount = queue.message_count;
    loadMessages(view).catch(problem);
  }
}

function filterForm(view) {
  const field = (name, label, attributes = {}) =>
    h("label", {}, label, h("input", { name, id: `filter-${name}`, ...attributes }));
  const form = h("form", { class: "inline", id: "filters" },
    field("label", "Label contains"),
    field("message_class", "Class", { type: "number", min: 0, max: 65535 }),
    field("priority", "Priority", { type: "number", min: 0, max: 7 }),
    field("arrived_after", "Arrived after (UTC)", { type: "datetime-local", step: 1 }),
    field("arrived_before", "Arrived before (UTC)", { type: "datetime-local", step: 1 }),
    field("correlation_id", "Correlation ID (base64)"),
    h("button", { type: "submit", class: "primary" }, "Filter"),
    h("button", { type: "reset" }, "Clear"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const filters = {};
    for (const [name, value] of new FormData(form).entries()) {
      if (value === "") continue;
      filters[name] = name.startsWith("arrived_") ? `${value}${value.length === 16 ? ":00" : ""}Z` : value;
    }
    view.filters = filters;
    view.after = "0";
    view.history = [];
    loadMessages(view).catch(problem);
  });
  form.addEventListener("reset", () => {
    view.filters = {};
    view.after = "0";
    view.history = [];
    setTimeout(() => loadMessages(view).catch(problem));
  });
  return form;
}

async function loadMessages(view) {
  const page = await api.get(queueUrl(view.path, "/messages"), { ...view.filters, after: view.after, limit: PAGE });
  const queue = queueByPath(view.path);
  if (queue) view.shownCount = queue.message_count;
  const copies = view.queue.kind === "system" || view.queue.is_journal;  // copies say where they were sent
  const rows = page.messages.map((message) => h("tr", { dataset: { lookup: message.lookup_id } },
    h("td", {}, h("input", { type: "checkbox", class: "pick", value: message.lookup_id, "aria-label": `Choose ${message.lookup_id}` })),
    h("td", {}, h("a", { href: `#/message/${encodeURIComponent(view.path)}/${message.lookup_id}`, class: "open" }, message.lookup_id)),
    h("td", { class: "label" }, message.label),
    h("td", {}, message.message_class_name || String(message.message_class)),
    h("td", { class: "num" }, String(message.priority)),
    h("td", { class: "num" }, bytes(message.body_size)),
    h("td", {}, time(message.arrived_time)),
    copies ? h("td", {}, message.destination_queue || "—") : null));
  const table = h("table", { id: "message-table" },
    h("thead", {}, h("tr", {}, h("th", {}, ""), h("th", {}, "Lookup ID"), h("th", {}, "Label"), h("th", {}, "Class"),
      h("th", { class: "num" }, "Priority"), h("th", { class: "num" }, "Size"), h("th", {}, "Arrived"),
      copies ? h("th", {}, "Sent to") : null)),
    h("tbody", {}, rows));
  const paging = h("div", { class: "actions" },
    view.history.length ? h("button", { id: "previous-page", onclick: () => { view.after = view.history.pop(); loadMessages(view).catch(problem); } }, "← Previous") : null,
    page.next_after ? h("button", { id: "next-page", onclick: () => { view.history.push(view.after); view.after = page.next_after; loadMessages(view).catch(problem); } }, "Next →") : null,
    h("span", { class: "muted" }, page.messages.length ? `${plural(page.messages.length, "message")} on this page` : "No message"));
  replace(view.list, selectionActions(view), rows.length ? table : null, paging);
}

function picked(view) {
  return Array.from(view.list.querySelectorAll("input.pick:checked"), (box) => box.value);
}

function selectionActions(view) {
  const rights = view.rights;
  const dead = isDeadLetterQueue(view.path);
  return h("div", { class: "actions", id: "selection-actions" },
    h("span", { class: "muted" }, "Chosen messages:"),
    may(rights, "move") ? [targetSelect("move-target", view.path),
      h("button", { id: "move", onclick: () => move(view, picked(view), document.getElementById("move-target").value) }, "Move…")] : null,
    may(rights, "export") ? h("button", { id: "export-selected", onclick: () => { const chosen = picked(view); if (chosen.length) exportMessages(view.path, chosen); else toast("Choose messages first"); } }, "Export") : null,
    dead && may(rights, "resend") ? h("button", { id: "resend-selected", onclick: () => resend(view, picked(view)) }, "Resend…") : null);
}

// -- actions -------------------------------------------------------------------------

async function purge(view) {
  const queue = queueByPath(view.path) || view.queue;
  const ok = await confirmAction(`Purge ${plural(queue.message_count, "message")} from ${view.path}?`,
    "Every available message is removed now, with the dead letters and negative acknowledgments "
    + "they ask for; a locked one when its lock ends. This cannot be undone.");
  if (!ok) return;
  try {
    const answer = await api.post(queueUrl(view.path, "/purge"));
    toast(`Purged ${plural(answer.purged, "message")} from ${view.path}`);
    await state.refresh();
    await loadMessages(view);
  } catch (error) { problem(error); }
}

async function deleteQueue(view) {
  const queue = queueByPath(view.path) || view.queue;
  const ok = await confirmAction(`Delete queue ${view.path} and its ${plural(queue.message_count, "message")}?`,
    "Its journal queue and the journal's messages go with it. This cannot be undone.");
  if (!ok) return;
  try {
    await api.delete(queueUrl(view.path));
    toast(`Deleted ${view.path}`);
    await state.refresh();
    go("#/");
  } catch (error) { problem(error); }
}

async function move(view, chosen, target) {
  if (!chosen.length) { toast("Choose messages first"); return; }
  if (!target) { toast("No queue to move them to"); return; }
  const ok = await confirmAction(`Move ${plural(chosen.length, "message")} from ${view.path} to ${target}?`,
    "In one transaction: all of them move or none. Message IDs and properties are kept; "
    + "they are not received (no journal copy, no acknowledgment).");
  if (!ok) return;
  try {
    const answer = await api.post(queueUrl(view.path, "/messages/move"), { lookup_ids: chosen, to: target });
    toast(`Moved ${plural(answer.moved.length, "message")} to ${answer.queue}`);
    await state.refresh();
    if (view.list) await loadMessages(view);
    return answer;
  } catch (error) { problem(error); }
  return null;
}

async function resend(view, chosen) {
  if (chosen !== null && !chosen.length) { toast("Choose dead letters first"); return; }
  const queue = queueByPath(view.path) || view.queue;
  const all = Math.min(queue.message_count, 1000);
  const what = chosen === null ? `${all > 1 ? "all " : ""}${plural(all, "dead letter")}` : plural(chosen.length, "dead letter");
  const ok = await confirmAction(`Resend ${what} from ${view.path} to the queues they were sent to?`,
    "Each goes back to its destination queue as a new arrival (class NORMAL, its timers started "
    + "afresh, message ID kept), all of them or none.");
  if (!ok) return;
  try {
    const answer = await api.post(queueUrl(view.path, "/messages/resend"), chosen === null ? { all: true } : { lookup_ids: chosen });
    toast(`Resent ${plural(answer.resent.length, "dead letter")}`);
    await state.refresh();
    if (view.list) await loadMessages(view);
  } catch (error) { problem(error); }
}

async function exportMessages(path, chosen) {
  try {
    const blob = await api.blob(queueUrl(path, "/messages/export"), chosen ? { lookup_id: chosen } : {});
    download(blob, exportName(path));
    toast(`Exported ${chosen ? plural(chosen.length, "message") : "the queue"} to ${exportName(path)}`);
  } catch (error) { problem(error); }
}

function importControls(path) {
  const input = h("input", { type: "file", id: "import-file", accept: ".jsonl,.ndjson,application/x-ndjson,application/json", "aria-label": "Import file" });
  const button = h("button", {
    id: "import",
    onclick: async () => {
      const file = input.files[0];
      if (!file) { toast("Choose an export file first"); return; }
      const lines = (await file.text()).split("\n").filter((line) => line.trim()).length;
      const ok = await confirmAction(`Import ${plural(lines, "message")} from ${file.name} into ${path}?`,
        "Every line is checked first; then all of them are stored in one transaction, or none.");
      if (!ok) return;
      try {
        const answer = await api.upload(queueUrl(path, "/messages/import"), file, "application/x-ndjson");
        toast(`Imported ${plural(answer.imported, "message")} into ${answer.queue}`);
        input.value = "";
        await state.refresh();
      } catch (error) { problem(error); }
    },
  }, "Import…");
  return h("span", { class: "actions" }, input, button);
}

function sendMessageForm(view) {
  const form = h("form", { class: "inline", id: "send-form", hidden: true },
    h("label", {}, "Body", h("input", { name: "body", id: "send-body" })),
    h("label", {}, "Label", h("input", { name: "label", id: "send-label" })),
    h("label", {}, "Priority", h("input", { name: "priority", type: "number", min: 0, max: 7, value: 3 })),
    h("button", { type: "submit", class: "primary" }, "Send"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const message = { body: data.get("body"), label: data.get("label") };
    if (!view.queue.transactional) message.priority = Number(data.get("priority"));
    try {
      const sent = await api.post(queueUrl(view.path, "/messages"), message, view.queue.transactional ? { transaction: "single" } : {});
      toast(`Sent: lookup ID ${sent.lookup_id}`);
      await state.refresh();
    } catch (error) { problem(error); }
  });
  return form;
}

function editPropertiesForm(view) {
  const q = view.queue;
  const form = h("form", { class: "inline", id: "edit-form", hidden: true },
    h("label", {}, "Label", h("input", { name: "label", value: q.label, maxlength: 124 })),
    h("label", {}, "Quota (KB)", h("input", { name: "quota_kb", type: "number", min: 0, value: q.quota_kb })),
    h("label", {}, "Journal quota (KB)", h("input", { name: "journal_quota_kb", type: "number", min: 0, value: q.journal_quota_kb })),
    h("label", {}, "Base priority", h("input", { name: "base_priority", type: "number", value: q.base_priority })),
    h("label", {}, "Journal", h("input", { name: "journal", type: "checkbox", checked: q.journal })),
    h("button", { type: "submit", class: "primary" }, "Save"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const changes = {
      label: data.get("label"),
      quota_kb: Number(data.get("quota_kb")),
      journal_quota_kb: Number(data.get("journal_quota_kb")),
      base_priority: Number(data.get("base_priority")),
      journal: data.get("journal") !== null,
    };
    const ok = await confirmAction(`Change the properties of ${view.path}?`,
      `Label "${changes.label}", quota ${number(changes.quota_kb)} KB, journal ${changes.journal ? "on" : "off"}.`);
    if (!ok) return;
    try {
      await api.patch(queueUrl(view.path), changes);
      toast(`Saved ${view.path}`);
      await state.refresh();
      go(`#/queue/${encodeURIComponent(view.path)}`);
    } catch (error) { problem(error); }
  });
  return form;
}

// -- the message viewer --------------------------------------------------------------

const NOT_PROPERTIES = new Set(["body", "body_base64", "decoded"]);

function utf8OrNull(bytes) {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return null;
  }
}

export async function messageView(main, path, lookupId) {
  const message = await api.get(queueUrl(path, `/messages/${lookupId}`), { decode: true });
  const rights = await rightsOn(path);
  const view = { path, queue: queueByPath(path) || { message_count: 0 }, rights };
  // An answer holds a body once: as text, or in base64 when it is not UTF-8 or when JSON would
  // write it longer than base64 (control characters): such text is shown as text all the same.
  const body = message.body === null ? fromBase64(message.body_base64) : new TextEncoder().encode(message.body);
  const text = message.body ?? utf8OrNull(body);
  const shown = h("div", { id: "body-view" });
  const tabs = {
    decoded: () => decodedView(message.decoded),
    text: () => h("pre", { id: "body-text" }, text === null ? "(not UTF-8 text: see Hex)" : text),
    hex: () => h("pre", { id: "body-hex" }, hexDump(body)),
  };
  const tabBar = h("div", { class: "tabs", role: "tablist" }, Object.keys(tabs).map((name) =>
    h("button", { id: `tab-${name}`, role: "tab", onclick: () => show(name) }, name[0].toUpperCase() + name.slice(1))));
  function show(name) {
    for (const button of tabBar.children) button.setAttribute("aria-selected", String(button.id === `tab-${name}`));
    replace(shown, tabs[name]());
  }
  const back = `#/queue/${encodeURIComponent(path)}`;
  const actions = h("div", { class: "actions", id: "message-actions" },
    h("a", { href: back }, `← ${path}`),
    may(rights, "delete-message") ? h("button", { id: "delete-message", class: "danger", onclick: () => deleteMessage(path, lookupId, back) }, "Delete…") : null,
    may(rights, "move") ? [targetSelect("viewer-move-target", path), h("button", {
      id: "viewer-move",
      onclick: async () => {
        if (await move(view, [lookupId], document.getElementById("viewer-move-target").value)) go(back);
      },
    }, "Move…")] : null,
    may(rights, "export") ? h("button", { id: "viewer-export", onclick: () => exportMessages(path, [lookupId]) }, "Export") : null,
    isDeadLetterQueue(path) && may(rights, "resend") ? h("button", { id: "viewer-resend", onclick: async () => { await resend(view, [lookupId]); go(back); } }, "Resend…") : null);
  const properties = h("table", { class: "props", id: "properties" }, h("tbody", {},
    Object.entries(message).filter(([name]) => !NOT_PROPERTIES.has(name)).map(([name, value]) =>
      h("tr", {}, h("th", {}, name), h("td", {}, value === null ? "—" : String(value))))));
  replace(main,
    h("h1", {}, `Message ${lookupId}`),
    h("p", { class: "muted" }, `${message.message_id} in ${path}`),
    actions,
    h("h2", {}, "Body"), tabBar, shown,
    h("h2", {}, "Properties"), properties);
  show("decoded");
}

function decodedView(decoded) {
  if (!decoded) return h("p", { class: "muted" }, "Not decoded.");
  const facts = h("p", { id: "decoded-format" },
    `${decoded.format}${decoded.type ? ` · ${decoded.type}` : ""}${decoded.encoding ? ` · ${decoded.encoding}` : ""}`
    + `${decoded.envelope ? ` · ${decoded.envelope} envelope` : ""}${decoded.reason ? ` · ${decoded.reason}` : ""}`);
  const parts = [facts];
  if (decoded.headers) {
    parts.push(h("h2", {}, decoded.envelope === "nservicebus" ? "NServiceBus headers" : "Headers"),
      h("table", { id: "decoded-headers", class: "props" }, h("tbody", {},
        Object.entries(decoded.headers).map(([name, value]) => h("tr", {}, h("th", {}, name), h("td", {}, value ?? "—"))))));
  }
  parts.push(h("pre", { id: "decoded-value" },
    typeof decoded.value === "string" ? decoded.value : JSON.stringify(decoded.value, null, 2)));
  if (decoded.text && decoded.format !== "text") parts.push(h("h2", {}, "Document"), h("pre", { id: "decoded-text" }, decoded.text));
  for (const warning of decoded.warnings || []) parts.push(h("p", { class: "muted" }, `warning: ${warning}`));
  return parts;
}

async function deleteMessage(path, lookupId, back) {
  const ok = await confirmAction(`Delete message ${lookupId} from ${path}?`,
    "It is received and dropped: it earns what a receive earns (the queue's journal copy, a "
    + "receive acknowledgment where it asks for one). This cannot be undone.");
  if (!ok) return;
  try {
    await api.delete(queueUrl(path, `/messages/${lookupId}`));
    toast(`Deleted message ${lookupId}`);
    await state.refresh();
    go(back);
  } catch (error) { problem(error); }
}
