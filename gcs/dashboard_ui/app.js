// The raygo dashboard: polls the head's JSON API and redraws the page in place. No
// framework, no build step; every value from the cluster is written as text, never as
// HTML.
"use strict";

const POLL_MS = 1500;
const pages = ["cluster", "groups", "pending", "queues", "autoscaler", "latency"];
let polls = 0;

// el builds an element: el("td", {class: "mono"}, "text", child, ...).
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === "style") node.style.cssText = v; else node.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function short(id) { return id ? id.slice(0, 8) : "-"; }

// colour gives each placement group a stable hue from its id.
function colour(pgID) {
  let h = 0;
  for (const ch of pgID) h = (h * 31 + ch.charCodeAt(0)) % 360;
  return `hsl(${h}, 55%, 42%)`;
}

async function getJSON(path) {
  const resp = await fetch(path, { credentials: "same-origin", cache: "no-store" });
  if (resp.status === 401) throw new Error("this cluster needs its token: open this page once as /?token=<token> (raygo get-auth-token prints it)");
  const body = await resp.json();
  if (!body.result) throw new Error(`${path}: ${body.msg}`);
  return body.data.result;
}

function showPage() {
  const page = pages.includes(location.hash.slice(1)) ? location.hash.slice(1) : "cluster";
  for (const p of pages) {
    document.getElementById("page-" + p).classList.toggle("active", p === page);
    document.querySelector(`nav a[data-page="${p}"]`).classList.toggle("active", p === page);
  }
}

function table(tbody, rows, emptyText, columns) {
  tbody.replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { class: "empty", colspan: columns }, emptyText))]));
}

// holders maps "node/gpu index" and MIG device UUIDs to the group holding them.
function holders(groups) {
  const byGPU = new Map(), byDevice = new Map();
  for (const g of groups) {
    if (g.state === "REMOVED") continue;
    for (const b of g.bundles) {
      if (!b.node_id) continue;
      for (const uuid of b.device_uuids) if (uuid.startsWith("MIG-")) byDevice.set(uuid, g);
      if (b.device_uuids.some((u) => u.startsWith("MIG-"))) continue;
      for (const i of b.gpu_ids) byGPU.set(`${b.node_id}/${i}`, g);
    }
  }
  return { byGPU, byDevice };
}

// used says what a GPU or MIG instance measurably does beside whether a bundle holds it:
// "allocated, 3 % used" (SM activity from the raylet's last sample), and the memory in use.
function used(d, held) {
  const activity = d.sm_active === null || d.sm_active === undefined ? "use not measured" : `${Math.round(d.sm_active * 100)} % used`;
  return `${held ? "allocated" : "free"}, ${activity}`;
}

function memory(d) {
  return d.fb_used_bytes === null || d.fb_used_bytes === undefined ? null : `${(d.fb_used_bytes / 2 ** 30).toFixed(1)} GiB in use`;
}

// queueMark is the stripe and label of the queue a group is charged to (none without queues).
function queueMark(holder) {
  if (!holder || !holder.queue) return null;
  return el("div", { class: "queue-mark", "data-pg-queue": holder.queue, style: `border-left-color:${colour("queue/" + holder.queue)}` }, holder.queue);
}

function resource(n, name) {
  const total = n.resources_total[name] || 0, free = n.resources_available[name] || 0;
  return total ? `${name} ${+(total - free).toFixed(2)}/${total}` : null;
}

function drawCluster(nodes, groups) {
  const { byGPU, byDevice } = holders(groups);
  const seen = new Map(), queues = new Set();
  const note = (holder) => {
    if (!holder) return;
    seen.set(holder.placement_group_id, holder);
    if (holder.queue) queues.add(holder.queue);
  };
  const cards = nodes.map((n) => {
    const gpus = n.gpus.map((g) => {
      const holder = byGPU.get(`${n.node_id}/${g.index}`);
      note(holder);
      return el("div", {
        class: holder ? "gpu held" : "gpu", "data-gpu": g.index, "data-pg-id": holder ? holder.placement_group_id : null,
        "data-pg-queue": holder && holder.queue ? holder.queue : null,
        style: holder ? `background:${colour(holder.placement_group_id)}` : null,
        title: `${g.model} ${g.uuid}\nNVLink island ${g.nvlink_island}, rail ${g.rail}` + (holder ? `\nheld by ${holder.placement_group_id}` : "") +
          (holder && holder.queue ? ` (queue ${holder.queue})` : ""),
      }, el("div", { class: "idx" }, `GPU ${g.index}`), el("div", {}, holder ? (holder.name || short(holder.placement_group_id)) : "free"),
      el("div", { class: "used" }, used(g, holder)), memory(g) ? el("div", { class: "mem" }, memory(g)) : null,
      queueMark(holder), el("div", { class: "island" }, `island ${g.nvlink_island}`));
    });
    const migs = n.mig_gpus.map((g) => el("div", { class: "gpu mig", "data-gpu": g.index, title: `${g.model} ${g.uuid} (MIG)` },
      el("div", { class: "idx" }, `GPU ${g.index} · MIG`),
      el("div", { class: "slices" }, g.instances.length ? g.instances.map((i) => {
        const holder = byDevice.get(i.device_uuid);
        note(holder);
        return el("div", {
          class: i.held ? "slice" : "slice idle", "data-pg-id": holder ? holder.placement_group_id : null,
          "data-pg-queue": holder && holder.queue ? holder.queue : null, "data-used": used(i, i.held),
          style: holder ? `background:${colour(holder.placement_group_id)}` + (holder.queue ? `;border-bottom:4px solid ${colour("queue/" + holder.queue)}` : "") : null,
          title: `profile ${i.profile_id} at slice ${i.start}` + (i.held ? `, held${holder ? " by " + holder.placement_group_id : ""}` : ", idle") +
            (holder && holder.queue ? ` (queue ${holder.queue})` : "") + `\n${used(i, i.held)}` + (memory(i) ? `, ${memory(i)}` : ""),
        }, `p${i.profile_id}`);
      }) : el("span", { class: "empty" }, "no slices carved"))));
    const resources = ["CPU", "GPU", "memory"].map((r) => r === "memory" ? null : resource(n, r)).filter(Boolean).join(" · ");
    return el("div", { class: n.state === "DEAD" ? "node dead" : "node", "data-node-id": n.node_id },
      el("h3", {}, `${n.node_name || n.node_ip}${n.is_head_node ? " (head)" : ""}`,
        el("span", { class: "meta" }, el("span", { class: "state-" + n.state }, n.is_draining ? "DRAINING" : n.state),
          ` · ${short(n.node_id)} · ${resources}`, n.state_message ? ` · ${n.state_message}` : "")),
      gpus.length || migs.length ? el("div", { class: "gpus" }, gpus, migs) : el("div", { class: "empty" }, "no GPUs"));
  });
  document.getElementById("nodes").replaceChildren(...(cards.length ? cards : [el("p", { class: "empty" }, "no nodes yet")]));
  document.getElementById("legend").replaceChildren(...[...seen.values()].map((g) =>
    el("span", { "data-pg-id": g.placement_group_id }, el("span", { class: "swatch", style: `background:${colour(g.placement_group_id)}` }),
      g.name || short(g.placement_group_id), g.queue ? ` (queue ${g.queue})` : "")),
  ...[...queues].sort().map((q) => el("span", { "data-pg-queue": q }, el("span", { class: "swatch stripe", style: `border-left-color:${colour("queue/" + q)}` }), `queue ${q}`)));
}

function drawGroups(groups, nodes) {
  const names = new Map(nodes.map((n) => [n.node_id, n.node_name || n.node_ip]));
  const rows = groups.map((g) => el("tr", { "data-pg-id": g.placement_group_id },
    el("td", { class: "mono", title: g.placement_group_id }, el("span", { class: "swatch", style: `background:${colour(g.placement_group_id)}` }), short(g.placement_group_id)),
    el("td", {}, g.name || "-"),
    el("td", { class: "state-" + g.state }, g.state),
    el("td", { "data-pg-queue": g.queue || null }, g.queue ? el("span", { class: "swatch stripe", style: `border-left-color:${colour("queue/" + g.queue)}` }) : null, g.queue || "-"),
    el("td", {}, g.strategy),
    el("td", {}, g.stats.scheduling_state || "-"),
    el("td", {}, g.bundles.map((b) => el("div", { class: "mono" },
      `#${b.bundle_index} ${Object.entries(b.unit_resources).map(([k, v]) => `${k}:${v}`).join(",")} → `,
      b.node_id ? `${names.get(b.node_id) || short(b.node_id)} GPU[${b.cuda_visible_devices || "-"}]` : "not placed")))));
  table(document.querySelector("#groups-table tbody"), rows, "no placement groups", 7);
}

function drawPending(groups, actors) {
  const rows = [];
  for (const g of groups) {
    if (g.state !== "PENDING" && g.state !== "RESCHEDULING") continue;
    const rejections = (g.rejection_summaries || []).map((r) => `${r.code}: ${r.nodes} node(s)`).join("; ");
    rows.push(el("tr", { "data-pending-id": g.placement_group_id },
      el("td", {}, "placement group"), el("td", { class: "mono" }, short(g.placement_group_id)), el("td", {}, g.name || "-"),
      el("td", { class: "state-" + g.state }, g.state), el("td", { class: "mono" }, g.pending_reason_code || "(not tried yet)"),
      el("td", {}, g.pending_reason || "waiting for its first scheduling attempt", rejections ? el("div", { class: "hint" }, rejections) : null)));
  }
  for (const a of actors) {
    if (a.state !== "PENDING_CREATION" && a.state !== "RESTARTING") continue;
    rows.push(el("tr", { "data-pending-id": a.actor_id },
      el("td", {}, "actor"), el("td", { class: "mono" }, short(a.actor_id)), el("td", {}, a.name || a.class_name),
      el("td", { class: "state-" + a.state }, a.state), el("td", {}, "-"), el("td", {}, a.pending_reason || "waiting for its first scheduling attempt")));
  }
  table(document.querySelector("#pending-table tbody"), rows, "nothing is waiting", 6);
}

function drawQueues(queues) {
  const box = document.getElementById("queues");
  if (!queues.enabled) {
    box.replaceChildren(el("p", { class: "empty" }, "the head runs without queues (raygo start --head --queues FILE)"));
    return;
  }
  box.replaceChildren(...queues.queues.map((q) => el("div", { class: "queue", "data-queue": q.queue },
    el("h3", {}, q.queue, el("span", { class: "hint" }, ` cohort ${q.cohort || "-"} · ${q.pending} pending · dominant share ${(+q.dominant_share).toFixed(2)}`)),
    el("table", {}, el("thead", {}, el("tr", {}, ["resource", "usage / nominal quota", "", "borrowed", "lent", "borrowing limit"].map((h) => el("th", {}, h)))),
      el("tbody", {}, q.resources.map((r) => {
        // Over the nominal quota (borrowing) the bar turns orange; an unlimited resource has none.
        const share = r.nominal_quota > 0 ? r.usage / r.nominal_quota : (r.usage > 0 ? 2 : 0);
        return el("tr", {}, el("td", {}, r.resource), el("td", {}, `${r.usage} / ${r.limited ? r.nominal_quota : "unlimited"}`),
          el("td", {}, r.limited ? el("div", { class: "bar" }, el("div", { class: share > 1 ? "over" : "", style: `width:${Math.min(share, 1) * 100}%` })) : null),
          el("td", {}, r.borrowed), el("td", {}, r.lent), el("td", {}, r.borrowing_limit === null ? "unlimited" : r.borrowing_limit));
      }))))));
  if (!queues.queues.length) box.replaceChildren(el("p", { class: "empty" }, "no queues"));
}

function drawAutoscaler(status) {
  const s = status.autoscaling_state || {};
  const rows = [];
  for (const r of s.pending_instance_requests || []) rows.push(["REQUESTED", r.ray_node_type_name, r.instance_type_name, r.count, ""]);
  for (const p of s.pending_instances || []) rows.push([p.details || "PENDING", p.ray_node_type_name, p.instance_type_name, 1, `${p.instance_id} ${p.ip_address}`]);
  for (const f of s.failed_instance_requests || []) rows.push(["FAILED", f.ray_node_type_name, f.instance_type_name, f.count, f.reason]);
  const byState = new Map();
  for (const r of rows) byState.set(r[0], (byState.get(r[0]) || 0) + Number(r[3] || 0));
  const running = (status.cluster_resource_state || {}).node_states || [];
  for (const n of running) {
    const state = "RAY_" + String(n.status).replace("NODE_STATUS_", "");
    byState.set(state, (byState.get(state) || 0) + 1);
  }
  const body = rows.map((r) => el("tr", { "data-instance-state": r[0] }, r.map((c) => el("td", {}, c))));
  document.getElementById("autoscaler").replaceChildren(
    el("p", { id: "autoscaler-summary" }, byState.size ? [...byState].map(([k, v]) => `${v} ${k}`).join(" · ") : "no instances"),
    s.autoscaler_state_version && s.autoscaler_state_version !== "0" ? null : el("p", { class: "hint" }, "no autoscaler has reported (raygo up starts one)"),
    el("table", {}, el("thead", {}, el("tr", {}, ["state", "node type", "instance type", "count", "details"].map((h) => el("th", {}, h)))),
      el("tbody", {}, body.length ? body : el("tr", {}, el("td", { class: "empty", colspan: 5 }, "no instances launching or failed")))),
    (s.infeasible_reasons || []).length ? el("div", {}, el("h3", {}, "Infeasible demand"), el("ul", {}, s.infeasible_reasons.map((r) => el("li", {}, r)))) : null);
}

function seconds(s) {
  if (!isFinite(s)) return "+Inf";
  if (s < 1e-3) return `${+(s * 1e6).toFixed(0)}µs`;
  if (s < 1) return `${+(s * 1e3).toFixed(1)}ms`;
  return `${+s.toFixed(2)}s`;
}

function drawLatency(h) {
  let previous = 0;
  const counts = h.buckets.map((b) => { const c = b.cumulative_count - previous; previous = b.cumulative_count; return c; });
  counts.push(h.count - previous);
  const most = Math.max(1, ...counts);
  const labels = h.buckets.map((b) => "≤" + seconds(b.le_seconds)).concat([">" + seconds(h.buckets.length ? h.buckets[h.buckets.length - 1].le_seconds : 0)]);
  document.getElementById("latency").replaceChildren(
    el("p", { id: "latency-summary" }, `${h.count} decisions` + (h.count ? `, mean ${seconds(h.sum_seconds / h.count)}` : "")),
    el("div", { class: "histogram" }, counts.map((c, i) => el("div", { class: "col", style: `height:${(c / most) * 100}%`, title: `${labels[i]}: ${c}` }))),
    el("div", { class: "histogram-labels" }, labels.map((l) => el("span", {}, l))));
}

async function poll() {
  const updated = document.getElementById("updated");
  try {
    const [nodes, groups, actors, queues, status, latency] = await Promise.all([
      getJSON("/api/v0/nodes?limit=10000&detail=all"), getJSON("/api/v0/placement_groups?limit=10000&detail=all"),
      getJSON("/api/v0/actors?limit=10000&detail=all"),
      getJSON("/api/raygo/queues"), getJSON("/api/v0/cluster_status"), getJSON("/api/raygo/decision_latency")]);
    drawCluster(nodes.result, groups.result);
    drawGroups(groups.result, nodes.result);
    drawPending(groups.result, actors.result);
    drawQueues(queues);
    drawAutoscaler(status);
    drawLatency(latency);
    polls++;
    document.body.dataset.polls = polls;
    updated.className = "";
    updated.textContent = "updated " + new Date().toLocaleTimeString();
  } catch (err) {
    updated.className = "stale";
    updated.textContent = String(err.message || err);
  }
  setTimeout(poll, POLL_MS);
}

window.addEventListener("hashchange", showPage);
showPage();
poll();
