// The REST API as the console uses it. The API key lives in this module's memory only: it is
// sent as `Authorization: Bearer`, never stored (no cookie, no web storage, no URL), so a
// reload signs out and a page of another site has no credential to borrow.

let apiKey = null;

export function signIn(key) { apiKey = key || null; }
export function signOut() { apiKey = null; }
export function signedIn() { return apiKey !== null; }

export class ApiError extends Error {
  constructor(status, problem) {
    super(problem && problem.detail ? problem.detail : `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
  }
}

function headers(extra) {
  const all = { Accept: "application/json", ...extra };
  if (apiKey !== null) all.Authorization = `Bearer ${apiKey}`;
  return all;
}

// Relative to the page (/console): works under a path prefix too.
export function url(path, params) {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params || {})) {
    if (value === undefined || value === null || value === "") continue;
    for (const one of Array.isArray(value) ? value : [value]) query.append(name, String(one));
  }
  const text = query.toString();
  return `api/${path}${text ? `?${text}` : ""}`;
}

export function queueUrl(queue, rest = "") {
  // Path names keep `$`, `;` and `/` as the API takes them; anything else is encoded.
  return `queues/${queue.split("/").map((part) => encodeURIComponent(part).replace(/%24/g, "$").replace(/%3B/gi, ";")).join("/")}${rest}`;
}

async function send(method, path, { params, json, body, contentType } = {}) {
  const init = { method, headers: headers(), credentials: "omit" };
  if (json !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(json);
  } else if (body !== undefined) {
    init.headers["Content-Type"] = contentType || "application/octet-stream";
    init.body = body;
  }
  const response = await fetch(url(path, params), init);
  if (!response.ok) {
    let problem = null;
    try { problem = await response.json(); } catch { problem = null; }
    throw new ApiError(response.status, problem);
  }
  return response;
}

async function json(method, path, options) {
  const response = await send(method, path, options);
  if (response.status === 204) return null;
  return response.json();
}

export const api = {
  get: (path, params) => json("GET", path, { params }),
  post: (path, payload, params) => json("POST", path, { json: payload, params }),
  patch: (path, payload) => json("PATCH", path, { json: payload }),
  delete: (path, params) => json("DELETE", path, { params }),
  upload: (path, file, contentType) => json("POST", path, { body: file, contentType }),
  blob: async (path, params) => (await send("GET", path, { params })).blob(),
};

// Every outgoing queue: the API answers them a page at a time, in id order.
export async function allOutgoingQueues() {
  const all = [];
  let after = 0;
  for (;;) {
    const page = await api.get("outgoing-queues", { after, limit: 1000 });
    all.push(...page.outgoing_queues);
    if (page.next_after === null) return all;
    after = page.next_after;
  }
}
