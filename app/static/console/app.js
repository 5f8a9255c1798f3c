// The console: a queue tree refreshed every 2 s, and one view at a time in <main>, chosen by
// the URL's fragment (#/queue/PATH, #/message/PATH/ID, #/outgoing, #/triggers, #/new-queue).

import { allOutgoingQueues, api, ApiError, signIn, signOut } from "./api.js";
import { h, replace, number, bytes, toast } from "./dom.js";
import { forget } from "./rights.js";
import { state } from "./state.js";
import { queueView, messageView } from "./queues.js";
import { outgoingView, triggersView, invocationsView, newQueueView, homeView } from "./others.js";

const POLL_MS = 2000;
const POLL_SHARE = 10;
// The next poll waits at least 10 times as long as the last one took: with thousands of
// queues a console costs the gateway at most about a tenth of what one client can ask of it.
// A hidden tab does not poll.

// -- the queue tree ------------------------------------------------------------------

function kindOf(queue) {
  if (queue.kind === "system") return "system";
  return queue.kind;
}

function treeItem(queue, current) {
  const item = h("li", { class: queue.is_journal ? "journal" : null },
    h("a", {
      href: `#/queue/${encodeURIComponent(queue.path)}`,
      class: queue.path === current ? "current" : null,
      dataset: { queue: queue.path },
      title: queue.pathname,
    },
    h("span", { class: "name" }, queue.is_journal ? "journal" : queue.path),
    h("span", { class: "count", dataset: { countOf: queue.path } },
      `${number(queue.message_count)} · ${bytes(queue.byte_count)}`)));
  return item;
}

let shape = "";

// Re-build the tree only when its queues change; else update the counts in place (a link the
// operator is about to click stays the same element).
function renderTree() {
  const current = currentQueue();
  const now = JSON.stringify([current, state.queues.map((q) => q.path), state.outgoing.map((o) => [o.id, o.state])]);
  if (now === shape) {
    for (const queue of state.queues) {
      const count = document.querySelector(`[data-count-of="${CSS.escape(queue.path)}"]`);
      if (count) count.textContent = `${number(queue.message_count)} · ${bytes(queue.byte_count)}`;
    }
    for (const out of state.outgoing) {
      const count = document.querySelector(`[data-outgoing="${out.id}"]`);
      if (count) count.textContent = `${number(out.message_count)} · ${out.state}`;
    }
    return;
  }
  shape = now;
  const byKind = { private: [], public: [], system: [] };
  const journals = new Map();
  for (const queue of state.queues) {
    if (queue.kind === "outgoing") continue;
    if (queue.is_journal) journals.set(queue.path.replace(/;journal$/i, ""), queue);
    else (byKind[kindOf(queue)] || byKind.public).push(queue);
  }
  const section = (title, queues, extra) => [
    h("h3", {}, h("span", {}, title), extra || null),
    h("ul", {}, queues.flatMap((queue) => {
      const journal = journals.get(queue.path);
      return [treeItem(queue, current), journal ? treeItem(journal, current) : null];
    })),
  ];
  const newQueue = h("a", { href: "#/new-queue", id: "new-queue-link" }, "+ new");
  replace(document.getElementById("tree"),
    section("Private queues", byKind.private, newQueue),
    section("Public queues", byKind.public),
    section("System queues", byKind.system),
    h("h3", {}, h("a", { href: "#/outgoing" }, "Outgoing queues")),
    h("ul", {}, state.outgoing.map((out) => h("li", {},
      h("a", { href: "#/outgoing", title: out.url },
        h("span", { class: "name" }, out.format_name.replace(/^DIRECT=/, "")),
        h("span", { class: `count state-${out.state}`, dataset: { outgoing: out.id } },
          `${number(out.message_count)} · ${out.state}`))))),
    h("h3", {}, h("a", { href: "#/triggers" }, "Triggers")));
}

async function refresh() {
  if (state.polling) return;
  state.polling = true;
  try {
    const [queues, outgoing] = await Promise.all([api.get("queues"), allOutgoingQueues()]);
    state.queues = queues;
    state.outgoing = outgoing;
    renderTree();
    if (state.onPoll) state.onPoll();
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) needSignIn();
  } finally {
    state.polling = false;
  }
}

function currentQueue() {
  const match = location.hash.match(/^#\/(?:queue|message)\/([^/]+)/);
  return match ? decodeURIComponent(match[1]) : null;
}

// -- sign-in -------------------------------------------------------------------------

function needSignIn() {
  document.getElementById("who").textContent = "sign in with an API key";
  document.getElementById("api-key").focus();
}

function setUpSignIn() {
  const form = document.getElementById("sign-in");
  const key = document.getElementById("api-key");
  const out = document.getElementById("sign-out");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    signIn(key.value.trim());
    key.value = "";
    forget();
    try {
      const me = await api.get("me").catch((error) => {
        if (error instanceof ApiError && error.status === 404) return { name: "(no access control)" };
        throw error;
      });
      document.getElementById("who").textContent = `signed in as ${me.name || me.principal || "?"}`;
      out.hidden = false;
      route();
      refresh();
    } catch (error) {
      signOut();
      toast(`Sign-in refused: ${error.message}`, true);
    }
  });
  out.addEventListener("click", () => {
    signOut();
    forget();
    out.hidden = true;
    document.getElementById("who").textContent = "not signed in";
    route();
  });
}

// -- routing -------------------------------------------------------------------------

async function route() {
  const main = document.getElementById("main");
  const hash = location.hash || "#/";
  const parts = hash.slice(2).split("/").map(decodeURIComponent);
  state.onPoll = null;
  try {
    if (parts[0] === "queue" && parts[1]) await queueView(main, parts[1]);
    else if (parts[0] === "message" && parts[1] && parts[2]) await messageView(main, parts[1], parts[2]);
    else if (parts[0] === "outgoing") await outgoingView(main);
    else if (parts[0] === "triggers" && parts[1]) await invocationsView(main, parts[1]);
    else if (parts[0] === "triggers") await triggersView(main);
    else if (parts[0] === "new-queue") await newQueueView(main);
    else await homeView(main);
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) needSignIn();
    replace(main, h("h1", {}, "Cannot show this"), h("p", { class: "error" }, error.message));
  }
  renderTree();
}

state.refresh = refresh;
window.addEventListener("hashchange", route);
setUpSignIn();
api.get("queue-manager").then((info) => {
  document.getElementById("manager").textContent = `queue manager ${info.guid}`;
}).catch(() => {});
route();
refresh();
async function poll() {
  const started = performance.now();
  if (!document.hidden) await refresh();
  const took = performance.now() - started;
  setTimeout(poll, Math.max(POLL_MS, took * POLL_SHARE));
}

document.addEventListener("visibilitychange", () => { if (!document.hidden) refresh(); });
setTimeout(poll, POLL_MS);
