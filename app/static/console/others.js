// The other views: home, a new queue, outgoing queues, triggers and their invocations.

import { allOutgoingQueues, api } from "./api.js";
import { h, replace, number, bytes, plural, time, toast, confirmAction } from "./dom.js";
import { rightsOn, may } from "./rights.js";
import { state, go, problem } from "./state.js";

export async function homeView(main) {
  const info = await api.get("queue-manager");
  replace(main,
    h("h1", {}, "Queue manager"),
    h("table", { class: "props", id: "manager-info" }, h("tbody", {},
      h("tr", {}, h("th", {}, "GUID"), h("td", {}, info.guid)),
      h("tr", {}, h("th", {}, "Messages"), h("td", {}, number(info.message_count))),
      h("tr", {}, h("th", {}, "Bytes"), h("td", {}, bytes(info.byte_count))),
      h("tr", {}, h("th", {}, "Quota (KB)"), h("td", {}, number(info.quota_kb))),
      h("tr", {}, h("th", {}, "Throttled"), h("td", {}, info.throttled ? "yes" : "no")))),
    h("p", { class: "muted" }, "Choose a queue on the left. Counts refresh every 2 seconds."));
}

export async function newQueueView(main) {
  const rights = await rightsOn(null);
  if (!may(rights, "create-queue")) {
    replace(main, h("h1", {}, "New queue"), h("p", {}, "You may not create queues."));
    return;
  }
  const form = h("form", { class: "stacked", id: "create-form" },
    h("label", {}, "Path ", h("input", { name: "path", id: "create-path", placeholder: "private$/orders", required: true })),
    h("label", {}, "Label ", h("input", { name: "label", maxlength: 124 })),
    h("label", {}, h("input", { name: "transactional", type: "checkbox", id: "create-transactional" }), " transactional (fixed at creation)"),
    h("label", {}, h("input", { name: "journal", type: "checkbox" }), " journal received messages"),
    h("label", {}, "Quota (KB, empty: unlimited) ", h("input", { name: "quota_kb", type: "number", min: 0 })),
    h("button", { type: "submit", class: "primary", id: "create" }, "Create queue"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const body = {
      path: String(data.get("path")).trim(),
      label: data.get("label"),
      transactional: data.get("transactional") !== null,
      journal: data.get("journal") !== null,
    };
    if (data.get("quota_kb")) body.quota_kb = Number(data.get("quota_kb"));
    try {
      const queue = await api.post("queues", body);
      toast(`Created ${queue.path}`);
      await state.refresh();
      go(`#/queue/${encodeURIComponent(queue.path)}`);
    } catch (error) { problem(error); }
  });
  replace(main, h("h1", {}, "New queue"), form);
}

export async function outgoingView(main) {
  const [outgoing, rights] = await Promise.all([allOutgoingQueues(), rightsOn(null)]);
  const act = (queue, action, text, detail) => async () => {
    if (!(await confirmAction(text, detail))) return;
    try {
      await api.post(`outgoing-queues/${queue.id}/${action}`);
      toast(`${action}: ${queue.format_name}`);
      await state.refresh();
      await outgoingView(main);
    } catch (error) { problem(error); }
  };
  const rows = outgoing.map((queue) => h("tr", { dataset: { outgoing: queue.id } },
    h("td", {}, queue.format_name),
    h("td", { class: `state-${queue.state}` }, queue.state),
    h("td", { class: "num" }, number(queue.message_count)),
    h("td", { class: "num" }, bytes(queue.byte_count)),
    h("td", { class: "num" }, number(queue.delivered_count)),
    h("td", {}, queue.last_error || "—"),
    h("td", {}, time(queue.next_attempt_at) || "—"),
    h("td", { class: "buttons" }, may(rights, "manage-outgoing") ? [
      queue.state === "paused"
        ? h("button", { class: "resume", onclick: act(queue, "resume", `Resume sending to ${queue.url}?`, "Its messages are sent at once.") }, "Resume")
        : h("button", { class: "pause", onclick: act(queue, "pause", `Pause sending to ${queue.url}?`, "Messages keep waiting; their time to reach queue still runs.") }, "Pause"),
      h("button", { class: "danger purge-outgoing", onclick: act(queue, "purge", `Purge ${plural(queue.message_count, "message")} waiting for ${queue.url}?`, "They are dead-lettered (class 0x8001) where they ask for it.") }, "Purge…"),
    ] : null)));
  replace(main, h("h1", {}, "Outgoing queues"),
    outgoing.length
      ? h("table", { id: "outgoing-table" },
        h("thead", {}, h("tr", {}, ["Destination", "State", "Messages", "Bytes", "Delivered", "Last error", "Next attempt", ""].map((name) => h("th", {}, name)))),
        h("tbody", {}, rows))
      : h("p", { class: "muted" }, "No outgoing queue: nothing was sent to a remote queue yet."));
  state.onPoll = null;
}

export async function triggersView(main) {
  const triggers = await api.get("triggers");
  replace(main, h("h1", {}, "Triggers"),
    triggers.length
      ? h("table", { id: "triggers-table" },
        h("thead", {}, h("tr", {}, ["Name", "Queue", "Enabled", "Processing", "Rules"].map((name) => h("th", {}, name)))),
        h("tbody", {}, triggers.map((trigger) => h("tr", {},
          h("td", {}, h("a", { href: `#/triggers/${encodeURIComponent(trigger.id)}` }, trigger.name)),
          h("td", {}, h("a", { href: `#/queue/${encodeURIComponent(trigger.queue)}` }, trigger.queue)),
          h("td", {}, trigger.enabled ? "yes" : "no"),
          h("td", {}, trigger.processing),
          h("td", {}, trigger.rules.map((rule) => rule.name || rule.id).join(", "))))))
      : h("p", { class: "muted" }, "No trigger. Define them over REST (/api/triggers, /api/rules)."));
}

export async function invocationsView(main, triggerId) {
  const [trigger, page] = await Promise.all([
    api.get(`triggers/${encodeURIComponent(triggerId)}`),
    api.get(`triggers/${encodeURIComponent(triggerId)}/invocations`, { limit: 100 }),
  ]);
  const invocations = page.invocations;
  replace(main, h("h1", {}, `Trigger ${trigger.name}`),
    h("p", {}, h("a", { href: "#/triggers" }, "← Triggers"), ` · on ${trigger.queue}`),
    h("h2", {}, "Recent invocations"),
    invocations.length
      ? h("table", { id: "invocations-table" },
        h("thead", {}, h("tr", {}, ["At", "Rule", "Lookup ID", "Outcome", "Attempts", "ms", "Error"].map((name) => h("th", {}, name)))),
        h("tbody", {}, invocations.map((entry) => h("tr", {},
          h("td", {}, time(entry.at)), h("td", {}, entry.rule_name), h("td", {}, entry.lookup_id),
          h("td", {}, entry.outcome), h("td", { class: "num" }, String(entry.attempts)),
          h("td", { class: "num" }, entry.duration_ms.toFixed(1)), h("td", {}, entry.error || "—")))))
      : h("p", { class: "muted" }, "No invocation yet."));
}

