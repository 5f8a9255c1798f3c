// What the views share: the queues as last polled, navigation, and how errors are shown.

import { ApiError } from "./api.js";
import { toast } from "./dom.js";

export const state = {
  queues: [],
  outgoing: [],
  polling: false,
  refresh: async () => {},
  onPoll: null,
};

export function queueByPath(path) {
  return state.queues.find((queue) => queue.path === path) || null;
}

export function writableQueues() {
  return state.queues.filter((queue) => (queue.kind === "private" || queue.kind === "public") && !queue.is_journal);
}

export function go(hash) {
  if (location.hash === hash) window.dispatchEvent(new HashChangeEvent("hashchange"));
  else location.hash = hash;
}

export function problem(error) {
  const text = error instanceof ApiError
    ? `${error.problem.mq_error || `HTTP ${error.status}`}: ${error.message}`
    : String(error);
  toast(text, true);
}

export function isDeadLetterQueue(path) {
  return path === "system$;deadletter" || path === "system$;deadxact";
}
