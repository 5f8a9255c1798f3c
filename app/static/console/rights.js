// What the signed-in principal may do, asked of the API: GET /api/me/rights?queue=PATH answers
// {"rights": [...]} with MSMQ's right names (qm.rights: QueueRight on a queue, the queue
// manager's rights without `queue`). A gateway without that endpoint (404) has no access
// control: everything is allowed. The server decides either way; hiding is for the operator.

import { api, ApiError } from "./api.js";

// Console action -> the right it needs (MQQUEUEACCESSMASK / MQQMACCESSMASK names).
export const NEEDS = {
  peek: "PEEK_MESSAGE",
  export: "PEEK_MESSAGE",
  send: "WRITE_MESSAGE",
  import: "WRITE_MESSAGE",
  "delete-message": "DELETE_MESSAGE",
  move: "DELETE_MESSAGE",
  resend: "DELETE_MESSAGE",
  purge: "DELETE_MESSAGE",
  "set-properties": "SET_PROPERTIES",
  "delete-queue": "DELETE",
  "create-queue": "CREATE_QUEUE",
  "manage-outgoing": "MANAGE_OUTGOING",
  "manage-triggers": "MANAGE_TRIGGERS",
};

const ALL = { all: true, rights: new Set() };
const cache = new Map();

export function forget() { cache.clear(); }

export async function rightsOn(queue) {
  const key = queue || "";
  if (cache.has(key)) return cache.get(key);
  let found;
  try {
    const answer = await api.get("me/rights", queue ? { queue } : {});
    found = { all: false, rights: new Set(answer.rights || []) };
  } catch (error) {
    if (!(error instanceof ApiError) || (error.status !== 404 && error.status !== 405)) throw error;
    found = ALL;
  }
  cache.set(key, found);
  return found;
}

export function may(rights, action) {
  return rights.all || rights.rights.has(NEEDS[action]);
}
