// Loom's web page: each tenant's routers, switches and ports (with the node each port is
// bound to and whether it is up), the transport nodes, the generations and the warnings.
// Everything comes from the API (/api/v1) with the caller's token, read again every
// POLL_MS: the page follows changes without a reload. The token comes from the URL's
// fragment (#token=..., never sent to a server) or the form, and is kept for the tab only.
"use strict";

const API = "/api/v1";
const POLL_MS = 2000;
const SVG = "http://www.w3.org/2000/svg";
let token = sessionStorage.getItem("loomToken");

if (location.hash.startsWith("#token=")) {
  token = decodeURIComponent(location.hash.slice("#token=".length));
  sessionStorage.setItem("loomToken", token);
  history.replaceState(null, "", location.pathname);
}

async function get(path) {
  const reply = await fetch(API + path, { headers: { Authorization: "Bearer " + token } });
  if (!reply.ok) {
    const error = new Error(`${path}: ${reply.status}`);
    error.status = reply.status;
    throw error;
  }
  return reply.json();
}

async function all(path) {
  const items = [];
  let cursor = null;
  do {
    const page = await get(path + (cursor ? `?cursor=${cursor}` : ""));
    items.push(...page.items);
    cursor = page.next_cursor;
  } while (cursor);
  return items;
}

async function children(parents, path) {
  const found = {};
  await Promise.all(parents.map(async (p) => { found[p.id] = await all(path(p.id)); }));
  return found;
}

async function load() {
  const [status, switches, routers] = await Promise.all(
    [get("/status"), all("/logical-switches"), all("/logical-routers")]);
  const [ports, routerPorts] = await Promise.all([
    children(switches, (id) => `/logical-switches/${id}/ports`),
    children(routers, (id) => `/logical-routers/${id}/ports`),
  ]);
  let nodes = [];
  try {
    nodes = await all("/transport-nodes");
  } catch (error) {
    if (error.status !== 403) throw error; // (a tenant's token sees no nodes)
  }
  return { status, switches, routers, ports, routerPorts, nodes };
}

function el(tag, attrs = {}, text = null, ns = null) {
  const node = ns ? document.createElementNS(ns, tag) : document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  if (text !== null) node.textContent = text;
  return node;
}

function warnedIds(warnings) {
  return (object) => warnings.some((w) => w.source.includes(object.id) || w.source === object.name);
}

// One tenant's graph: routers on top, switches below, each switch's ports under it.
function drawTenant(tenant, view, warned) {
  const byName = (a, b) => a.name.localeCompare(b.name);
  const switches = view.switches.filter((s) => (s.tenant || "") === tenant).sort(byName);
  const routers = view.routers.filter((r) => (r.tenant || "") === tenant).sort(byName);
  const portW = 120, gap = 20, top = 20, rowH = 90;
  const widths = switches.map((s) => Math.max(1, (view.ports[s.id] || []).length) * portW);
  const width = Math.max(400, widths.reduce((a, b) => a + b + gap, gap));
  const svg = el("svg", { width, height: top + 3 * rowH, "data-tenant": tenant }, null, SVG);
  const center = {};
  let x = gap;
  switches.forEach((s, i) => {
    center[s.id] = x + widths[i] / 2;
    const ports = (view.ports[s.id] || []).slice().sort((a, b) => a.name.localeCompare(b.name));
    ports.forEach((p, j) => {
      const px = x + j * portW + portW / 2, py = top + 2 * rowH + 10;
      svg.append(el("line", { class: "edge", x1: center[s.id], y1: top + rowH + 30, x2: px, y2: py }, null, SVG));
      const kind = (p.attachment || {}).type || "none";
      const state = kind === "vif" ? (p.status.up ? "up" : "down") : "other";
      const g = el("g", { class: `port ${state}${warned(p) ? " warned" : ""}`, "data-kind": "port",
                         "data-name": p.name, "data-node": p.status.transport_node || "" }, null, SVG);
      g.append(el("circle", { cx: px, cy: py, r: 8 }, null, SVG));
      g.append(el("text", { x: px, y: py + 22, "text-anchor": "middle" }, p.name || `(${kind} port)`, SVG));
      const where = kind === "vif" ? (p.status.transport_node || "not bound") : kind;
      g.append(el("text", { x: px, y: py + 36, "text-anchor": "middle" },
                  `${(p.ips || []).join(" ")} · ${where}`, SVG));
      g.append(el("title", {}, `${p.name} ${p.mac || ""} ${state}`, SVG));
      svg.append(g);
    });
    const g = el("g", { class: `switch${warned(s) ? " warned" : ""}`, "data-kind": "switch", "data-name": s.name }, null, SVG);
    g.append(el("rect", { x: center[s.id] - 70, y: top + rowH, width: 140, height: 30, rx: 4 }, null, SVG));
    g.append(el("text", { x: center[s.id], y: top + rowH + 19, "text-anchor": "middle" }, s.name, SVG));
    svg.append(g);
    x += widths[i] + gap;
  });
  routers.forEach((r, i) => {
    const joined = (view.routerPorts[r.id] || []).map((p) => center[p.logical_switch_id]).filter((c) => c !== undefined);
    const rx = joined.length ? joined.reduce((a, b) => a + b) / joined.length : gap + 80 + i * 180;
    joined.forEach((c) => svg.append(el("line", { class: "edge", x1: rx, y1: top + 30, x2: c, y2: top + rowH }, null, SVG)));
    const g = el("g", { class: `router${warned(r) ? " warned" : ""}`, "data-kind": "router", "data-name": r.name }, null, SVG);
    g.append(el("rect", { x: rx - 70, y: top, width: 140, height: 30, rx: 15 }, null, SVG));
    g.append(el("text", { x: rx, y: top + 19, "text-anchor": "middle" }, r.name, SVG));
    svg.append(g);
  });
  const section = el("div", { class: "tenant" });
  section.append(el("h2", {}, `tenant ${tenant || "(none)"}`), svg);
  return section;
}

function render(view) {
  const s = view.status;
  document.getElementById("summary").textContent =
    `generation ${s.config_generation} · computed ${s.logical_generation} · ` +
    `realized on every node ${s.realized_generation} (lag ${s.config_generation - s.realized_generation})`;
  const warned = warnedIds(s.warnings);
  const tenants = [...new Set([...view.switches, ...view.routers].map((o) => o.tenant || ""))].sort();
  document.getElementById("tenants").replaceChildren(...tenants.map((t) => drawTenant(t, view, warned)));
  const rows = view.nodes.slice().sort((a, b) => a.name.localeCompare(b.name)).map((n) => {
    const tr = el("tr", { "data-node": n.name });
    const connected = n.status.connected;
    tr.append(el("td", {}, n.name), el("td", {}, n.node_type),
              el("td", { class: connected ? "connected" : "disconnected" },
                 connected ? "connected" : (n.status.message || "not connected")),
              el("td", {}, n.status.controller || "—"));
    return tr;
  });
  document.querySelector("#nodes tbody").replaceChildren(...rows);
  document.getElementById("warnings").replaceChildren(...(s.warnings.length
    ? s.warnings.map((w) => el("li", {}, `${w.kind} ${w.source}: ${w.message}`))
    : [el("li", { class: "none" }, "none")]));
  document.getElementById("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
  document.body.dataset.generation = s.config_generation;
}

async function refresh() {
  try {
    render(await load());
    document.getElementById("login").hidden = true;
    document.getElementById("main").hidden = false;
  } catch (error) {
    if (error.status === 401) {
      askForToken("that token is not accepted");
      return;
    }
    document.getElementById("updated").textContent = `API unreachable: ${error.message}`;
  }
  setTimeout(refresh, POLL_MS);
}

function askForToken(why) {
  document.getElementById("main").hidden = true;
  document.getElementById("login").hidden = false;
  document.getElementById("login-error").textContent = why || "";
  document.getElementById("summary").textContent = "";
}

document.getElementById("login").addEventListener("submit", (event) => {
  event.preventDefault();
  token = document.getElementById("token").value;
  sessionStorage.setItem("loomToken", token);
  refresh();
});

if (token) refresh(); else askForToken();
