// The service's own Agent Server API, on the page's own origin (the page is served at <base>/ui/). Nothing here
// names another host: connect-src 'self' in the page's policy would refuse it anyway.

const BASE = new URL("../", document.baseURI);
const KEY_STORE = "reactgraph-ui-credentials";  // sessionStorage: gone when the tab closes

export class ApiError extends Error {
  constructor(status, detail) {
    super(`${status}: ${detail}`);
    this.status = status;
    this.detail = detail;
  }
}

/** The credentials the person gave (header name and value), or null. */
export function credentials() {
  try {
    return JSON.parse(sessionStorage.getItem(KEY_STORE) || "null");
  } catch {
    return null;
  }
}

export function setCredentials(header, value) {
  if (value) sessionStorage.setItem(KEY_STORE, JSON.stringify({ header, value }));
  else sessionStorage.removeItem(KEY_STORE);
}

function headers(json) {
  const result = json ? { "content-type": "application/json" } : {};
  const given = credentials();
  if (given) result[given.header] = given.header === "authorization" ? `Bearer ${given.value}` : given.value;
  return result;
}

async function failure(response) {
  let detail = response.statusText;
  try {
    detail = (await response.json()).detail ?? detail;
  } catch { /* not JSON: the status text says it */ }
  return new ApiError(response.status, String(detail));
}

/** GET (no body) or POST (a body) a path of the API; its JSON answer. */
export async function api(path, body, method) {
  const response = await fetch(new URL(path, BASE), {
    method: method || (body === undefined ? "GET" : "POST"),
    headers: headers(body !== undefined),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) throw await failure(response);
  return response.status === 204 ? null : response.json();
}

/** GET a file of the API (a comparison's plot) with the person's credentials, as an object URL for an <img>. */
export async function blobUrl(path) {
  const response = await fetch(new URL(path, BASE), { headers: headers(false) });
  if (!response.ok) throw await failure(response);
  return URL.createObjectURL(await response.blob());
}

/** POST a run and call onEvent(name, data) for each server-sent event until the stream ends. */
export async function stream(path, body, onEvent, signal) {
  const response = await fetch(new URL(path, BASE), {
    method: "POST", headers: { ...headers(true), accept: "text/event-stream" }, body: JSON.stringify(body), signal,
  });
  if (!response.ok) throw await failure(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replaceAll("\r\n", "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      dispatch(buffer.slice(0, end), onEvent);
      buffer = buffer.slice(end + 2);
    }
  }
  if (buffer.trim()) dispatch(buffer, onEvent);
}

function dispatch(block, onEvent) {
  let name = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith("event:")) name = line.slice(6).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
  }
  if (!data.length) return;  // a comment or keep-alive
  let parsed;
  try {
    parsed = JSON.parse(data.join("\n"));
  } catch {
    parsed = data.join("\n");
  }
  onEvent(name, parsed);
}
