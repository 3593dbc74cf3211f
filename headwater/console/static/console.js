// headwater console: renders the server's snapshot (JSON) and follows it by server-sent events.
// Plain script, no build step. Writes are POSTs with the page's CSRF token; a read-only console
// renders no write controls at all.
"use strict";

const meta = (name) => document.querySelector(`meta[name="${name}"]`).content;
const CSRF = meta("csrf-token");
const READ_ONLY = meta("read-only") === "true";
const PAGE = meta("page");
const SPARK_ABOVE = Number(meta("spark-above"));  // replicas above which "auto" plans on Spark
let openedAt = null;  // the server's clock at the first snapshot: "completed since the page opened"
let lastSnapshot = null;
let lastUpdate = 0;
let throttleDraft = null;  // what the operator is typing survives the re-render of each update
// The moves ticked for "Cancel selected", by topic and partition: the table is rebuilt from every
// snapshot, so the ticks live here, not in the DOM.
const selectedMoves = new Set();
const moveKey = (topic, partition) => JSON.stringify([topic, Number(partition)]);
// The moves table shows one page of rows: laying out 10,000 rows took chromium seconds on every
// update, while the overall bar, the counts and "Cancel all" cover every move.
const MOVES_PER_PAGE = 500;
let movesPage = 0;
let moveFilter = "";  // a substring of "topic-partition"; the rows shown are those that contain it

const esc = (v) => String(v ?? "").replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
const ids = (xs) => (xs && xs.length ? xs.join(",") : "–");

function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

function duration(s) {
  if (s === null || s === undefined) return "–";
  s = Math.round(s);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

function bar(share, label, cls = "") {
  const pct = Math.max(0, Math.min(1, share || 0)) * 100;
  // The fill's width is set after rendering (the page's CSP allows no inline style attributes).
  return `<div class="bar ${cls}${pct >= 100 ? " done" : ""}" data-share="${pct.toFixed(1)}">` +
    `<div class="fill"></div><span>${esc(label ?? pct.toFixed(1) + " %")}</span></div>`;
}

function sizeBars(root) {
  root.querySelectorAll(".bar").forEach((b) => { b.querySelector(".fill").style.width = `${b.dataset.share}%`; });
}

// --- pages ---------------------------------------------------------------------------------------

const brokerState = (b) => (!b.alive ? "down" : b.reachable ? (b.error ? "partly answering" : "alive") : "not answering");

function renderCluster(s) {
  const rows = s.brokers.map((b) => `
    <tr id="broker-${b.id}" class="broker">
      <td class="num">${b.id}</td><td>${esc(b.rack ?? "–")}</td><td>${esc(b.endpoint ?? "–")}</td>
      <td>${b.controller ? "controller" : ""}</td>
      <td class="state ${b.alive && b.reachable && !b.error ? "ok" : "bad"}" data-state="${brokerState(b)}">${brokerState(b)}
        ${b.error ? `<div class="muted">${esc(b.error)}</div>` : ""}</td>
      <td class="num">${b.latency_ms === null || b.latency_ms === undefined ? "–" : b.latency_ms.toFixed(0) + " ms"}</td>
      <td>${b.log_dirs.map((d) => `${esc(d.path)}: ${bytes(d.bytes)}${d.error ? ` <span class="bad">${esc(d.error)}</span>` : ""}`).join("<br>") || "–"}</td>
      <td class="num">${bytes(b.bytes)}</td><td class="num">${b.replicas}</td><td class="num">${b.leaders}</td>
      <td class="num ${b.imbalance ? "warn" : ""}">${b.imbalance} of ${b.preferred} (${b.imbalance_pct} %)</td>
    </tr>`).join("");
  const list = (name, xs) => `<div><b>${name}</b>: <span class="${xs.length ? "bad" : "ok"}">${xs.length}</span>
    ${xs.length ? `<ul>${xs.slice(0, 50).map((x) => `<li>${esc(x)}</li>`).join("")}${xs.length > 50 ? `<li>… ${xs.length - 50} more</li>` : ""}</ul>` : ""}</div>`;
  const h = s.health || {};
  return `
    <p class="muted">Cluster ${esc(s.cluster_id ?? "?")}, controller ${s.controller ?? "?"}</p>
    <table id="brokers"><thead><tr><th>id</th><th>rack</th><th>endpoint</th><th>role</th><th>state</th><th>answer</th>
      <th>log dirs</th><th>bytes</th><th>replicas</th><th>leaders</th><th>not preferred leader</th></tr></thead>
      <tbody>${rows}</tbody></table>
    <h2>Partitions</h2>
    <div class="health" id="health">${list("Under-replicated", h.under_replicated || [])}
      ${list("Under min ISR", h.under_min_isr || [])}${list("Offline", h.offline || [])}</div>
    ${renderSelfHealing(s.self_healing)}`;
}

const HEALING_CONFIGS = ["self.healing.enable", "self.healing.dry.run", "self.healing.broker.failure.threshold.ms"];
const HEALING_ACTIONS = {heal: "heal (moves started)", cancel: "cancel (broker came back)", elect: "elect (preferred leaders)",
                         dry_run: "dry run (logged only)", failed: "failed"};

function healingClock(h, c, what) {
  const action = !h.enabled ? "none: self-healing is off" :
    c.in_s > 0 ? `${h.dry_run ? "logs what it would move" : "moves its replicas"} in ${duration(c.in_s)}` :
    h.dry_run ? "threshold passed (dry run: logged only)" : "threshold passed";
  return `<tr id="healing-${what}-${c.broker}" class="healing-clock"><td class="num">${c.broker}</td>
    <td>${what === "dead" ? "gone (not registered)" : "replicas in a failed log dir"}</td>
    <td class="num">${duration(c.for_s)}</td><td class="${h.enabled && !h.dry_run ? "warn" : "muted"}">${action}</td></tr>`;
}

function renderSelfHealing(h) {
  if (!h) return "";
  const set = h.configured;
  // What the controller runs with comes from its metrics; the configs as set are shown beside them.
  const configured = set ? HEALING_CONFIGS.map((k) => `<code>${k}=${esc(set[k] ?? "(not set)")}</code>`).join(" ")
    : esc(h.configured_error || "not read");
  const current = h.known ? h.enabled : set && set["self.healing.enable"] !== undefined ? set["self.healing.enable"] === "true" : null;
  const controls = READ_ONLY ? "" : `
    <div class="controls write">
      <button id="healing-on" class="write" data-action="healing-on" ${current === true ? "disabled" : ""}>Turn self-healing on</button>
      <button id="healing-off" class="write" data-action="healing-off" ${current === false ? "disabled" : ""}>Turn self-healing off</button>
    </div>`;
  if (!h.known) {
    return `<h2>Self-healing</h2>
      <div id="self-healing" data-state="unknown">
        <p>State: <b id="healing-state" class="muted">${esc(h.unknown)}</b></p>
        <p class="muted">Set on the cluster default: ${configured}</p>${controls}</div>`;
  }
  const clocks = [...h.dead_brokers.map((c) => healingClock(h, c, "dead")),
                  ...h.offline_dirs.map((c) => healingClock(h, c, "offline"))].join("");
  const actions = Object.entries(h.actions).map(([a, n]) => `${esc(HEALING_ACTIONS[a] || a)}: <b>${n}</b>`).join(" · ");
  return `<h2>Self-healing</h2>
    <div id="self-healing" data-state="${h.enabled ? "enabled" : "disabled"}" data-dry-run="${h.dry_run}">
      <p>State: <b id="healing-state" class="${h.enabled ? "ok" : "muted"}">${h.enabled ? "enabled" : "disabled"}</b>${h.dry_run ? ", dry run (decides and logs, moves nothing)" : ""};
        threshold ${duration(h.threshold_s)}; healing moves in flight: <b id="healing-in-flight">${h.moves_in_flight}</b>${
        h.next_action_s !== null ? `; next action in ${duration(h.next_action_s)}` : ""}
        <span class="muted">(controller ${h.controller}'s metrics)</span></p>
      <p class="muted">Set on the cluster default: ${configured}</p>${controls}
      <table id="healing-clocks"><thead><tr><th>broker</th><th>what</th><th>for</th><th>action</th></tr></thead>
        <tbody>${clocks || `<tr><td colspan="4" class="muted">No dead broker or failed log dir.</td></tr>`}</tbody></table>
      <p id="healing-actions">Since broker ${h.controller} became the controller: ${actions}</p></div>`;
}

function renderTopics(s) {
  if (!s.topics.length) return `<p class="muted">No topics.</p>`;
  return s.topics.map((t) => `
    <h2 id="topic-${esc(t.name)}" class="topic">${esc(t.name)} <span class="muted">${t.partitions.length} partitions, ${bytes(t.bytes)}</span></h2>
    <table><thead><tr><th>partition</th><th>leader</th><th>replicas</th><th>ISR</th><th>offline</th><th>size</th><th>size per replica</th></tr></thead>
    <tbody>${t.partitions.map((p) => `
      <tr class="${p.under_replicated ? "warn" : ""}"><td class="num">${p.partition}</td>
        <td class="num ${p.leader < 0 ? "bad" : ""}">${p.leader < 0 ? "none" : p.leader}</td>
        <td>${ids(p.replicas)}</td><td>${ids(p.isr)}</td><td>${ids(p.offline)}</td><td class="num">${bytes(p.size)}</td>
        <td>${Object.entries(p.sizes).map(([b, n]) => `${b}: ${bytes(n)}`).join(", ") || "–"}</td></tr>`).join("")}
    </tbody></table>`).join("");
}

function renderReassignments(s) {
  const r = s.reassignments || {};
  if (!r.available) return `<p class="bad">The controller's list of reassignments could not be read (see the errors above).</p>`;
  const o = r.overall;
  const completed = (r.completed || []).filter((c) => c.ended_at >= openedAt);
  // Nothing in flight and something finished since the page opened: the whole job is done.
  const overallShare = o.moves ? o.share : (completed.length ? 1 : 0);
  const th = r.throttle || {};
  // A ticked move that is no longer in flight cannot be cancelled: forget it.
  const inFlight = new Set(r.moves.map((m) => moveKey(m.topic, m.partition)));
  for (const key of [...selectedMoves]) if (!inFlight.has(key)) selectedMoves.delete(key);
  const throttleText = th.mixed ? "differs between brokers" : th.rate ? `${bytes(Number(th.rate))}/s` : "none";
  const controls = READ_ONLY ? `<p class="muted">Read-only console: no writes.</p>` : `
    <div class="controls write">
      <label>Throttle (B/s) <input id="throttle-rate" type="number" min="1" step="1" value="${esc(th.rate ?? "")}"></label>
      <button id="throttle-set" class="write" data-action="throttle">Set throttle</button>
      <button id="throttle-remove" class="write" data-action="unthrottle">Remove throttle</button>
      <button id="cancel-selected" class="write danger" data-action="cancel-selected" ${selectedMoves.size ? "" : "disabled"}>${cancelSelectedText()}</button>
      <button id="cancel-all" class="write danger" data-action="cancel-all" ${o.moves ? "" : "disabled"}>Cancel all</button>
    </div>`;
  const matching = moveFilter ? r.moves.filter((m) => `${m.topic}-${m.partition}`.includes(moveFilter)) : r.moves;
  const pages = Math.max(1, Math.ceil(matching.length / MOVES_PER_PAGE));
  movesPage = Math.min(movesPage, pages - 1);
  const first = movesPage * MOVES_PER_PAGE;
  const shown = matching.slice(first, first + MOVES_PER_PAGE);
  const pager = r.moves.length <= MOVES_PER_PAGE && !moveFilter ? "" : `
    <div class="controls pager">
      <label>Filter <input id="move-filter" type="search" placeholder="topic-partition" value="${esc(moveFilter)}"></label>
      <span id="moves-shown">${shown.length ? `${first + 1}–${first + shown.length}` : "none"} of ${matching.length}${moveFilter ? " matching" : ""}</span>
      <button data-action="moves-prev" ${movesPage ? "" : "disabled"}>Previous</button>
      <button data-action="moves-next" ${movesPage < pages - 1 ? "" : "disabled"}>Next</button>
    </div>`;
  const moves = shown.map((m) => `
    <tr id="move-${esc(m.topic)}-${m.partition}" class="move" data-topic="${esc(m.topic)}" data-partition="${m.partition}">
      ${READ_ONLY ? "" : `<td><input type="checkbox" class="write select-move" aria-label="select ${esc(m.topic)}-${m.partition}"${selectedMoves.has(moveKey(m.topic, m.partition)) ? " checked" : ""}></td>`}
      <td>${esc(m.topic)}-${m.partition}</td><td>${ids(m.from)} → ${ids(m.to)}</td>
      <td>${ids(m.adding)}</td><td>${ids(m.removing)}</td>
      <td>${m.queued ? `<span class="tag">queued</span>` : ""}${m.throttled ? `<span class="tag throttled">throttled</span>` : ""}</td>
      <td>${bar(m.share)}</td><td class="num">${bytes(m.copied)} of ${bytes(m.total)}</td>
      <td class="num">${m.rate === null ? "–" : bytes(m.rate) + "/s"}${m.rate_source === "estimate" && m.rate !== null ? ' <span class="muted">(est.)</span>' : ""}</td>
      <td class="num eta">${duration(m.eta_s)}</td>
      ${READ_ONLY ? "" : `<td><button class="write danger cancel" data-action="cancel">Cancel</button></td>`}
    </tr>`).join("");
  const done = completed.slice(-MOVES_PER_PAGE).map((c) => `
    <tr id="done-${esc(c.topic)}-${c.partition}" class="completed"><td>${esc(c.topic)}-${c.partition}</td>
      <td>${ids(c.from)} → ${ids(c.to)}</td><td class="${c.outcome === "completed" ? "ok" : "warn"}">${esc(c.outcome)}</td>
      <td>${bar(c.outcome === "completed" ? 1 : c.share)}</td><td>${new Date(c.ended_at * 1000).toLocaleTimeString()}</td></tr>`).join("");
  return `
    <div id="overall">${bar(overallShare, `${(overallShare * 100).toFixed(1)} % · ${bytes(o.copied)} of ${bytes(o.total)} · ETA ${duration(o.moves ? o.eta_s : 0)}`, "wide")}</div>
    <p class="muted">${o.moves} partition${o.moves === 1 ? "" : "s"} moving; leader/follower throttled rate ${throttleText}${s.metrics ? "" : "; rates estimated by the console (no --metrics given)"}</p>
    ${controls}${renderThrottles(th)}${pager}
    <table id="moves" data-shown="${shown.length}"><thead><tr>${READ_ONLY ? "" : "<th></th>"}<th>partition</th><th>from → to</th><th>adding</th><th>removing</th><th></th>
      <th>progress</th><th>copied</th><th>rate</th><th>ETA</th>${READ_ONLY ? "" : "<th></th>"}</tr></thead>
      <tbody>${moves || `<tr><td colspan="11" class="muted">${r.moves.length ? "No move matches the filter." : "No reassignment in flight."}</td></tr>`}</tbody></table>
    <h2>Completed since the page opened</h2>${completed.length > MOVES_PER_PAGE ? `<p class="muted">the last ${MOVES_PER_PAGE} of ${completed.length}</p>` : ""}
    <table id="completed"><thead><tr><th>partition</th><th>from → to</th><th>outcome</th><th>progress</th><th>ended</th></tr></thead>
      <tbody>${done || `<tr><td colspan="5" class="muted">None yet.</td></tr>`}</tbody></table>`;
}

function renderThrottles(th) {
  const configured = (b) => {
    const c = (th.brokers || {})[String(b)] || {};
    const [leader, follower] = ["leader.replication.throttled.rate", "follower.replication.throttled.rate"].map((k) => c[k]);
    return leader || follower ? `leader ${leader ? bytes(Number(leader)) + "/s" : "–"}, follower ${follower ? bytes(Number(follower)) + "/s" : "–"}` : "–";
  };
  const judged = (t, v, digits, unit = " ms") => (t.mode === "adaptive" && v !== null && v !== undefined ? `${v.toFixed(digits)}${unit}` : "–");
  const rows = (th.in_force || []).map((t) => t.known ? `
    <tr id="throttle-broker-${t.broker}" class="throttle" data-mode="${esc(t.mode)}" data-reason="${esc(t.reason ?? "")}">
      <td class="num">${t.broker}</td><td>${esc(t.mode)}</td><td class="num" title="${Math.round(t.rate)} B/s">${t.rate > 0 ? bytes(t.rate) + "/s" : "no limit"}</td>
      <td>${esc(t.reason_text ?? "–")}</td><td class="num">${judged(t, t.produce_p99_ms, 1)}</td>
      <td class="num">${judged(t, t.follower_lag_ms, 0)}</td><td class="num">${judged(t, t.cpu_pressure, 2, "")}</td>
      <td>${configured(t.broker)}</td></tr>` : `
    <tr id="throttle-broker-${t.broker}" class="throttle" data-mode="unknown"><td class="num">${t.broker}</td>
      <td colspan="6" class="muted">${esc(t.unknown)}</td><td>${configured(t.broker)}</td></tr>`).join("");
  return `<h2>Throttle in force</h2>
    <p class="muted">Per broker: the rate of its reassignment limiters (<code>reassignment.throttle.mode</code>: static
      <code>reassignment.throttled.rate</code>, or adaptive) and why, with the produce p99, follower lag and host CPU
      pressure the adaptive mode judges by, from its metrics; and Kafka's replication throttles as configured.</p>
    <table id="throttles"><thead><tr><th>broker</th><th>mode</th><th>rate</th><th>why</th><th>produce p99</th>
      <th>follower lag</th><th>CPU pressure</th><th>leader/follower throttled rate</th></tr></thead>
      <tbody>${rows || `<tr><td colspan="8" class="muted">No broker.</td></tr>`}</tbody></table>`;
}

function cancelSelectedText() {
  return `Cancel selected${selectedMoves.size ? ` (${selectedMoves.size})` : ""}`;
}

// A tick changes only the button; the next snapshot's render keeps the tick.
function updateSelection() {
  const button = document.getElementById("cancel-selected");
  if (button) { button.disabled = !selectedMoves.size; button.textContent = cancelSelectedText(); }
}

function heatTable(id, hm, key, fmt) {
  const head = hm.brokers.map((b) => `<th class="num">broker ${b}</th>`).join("");
  const rows = hm.topics.map((t) => `<tr><th>${esc(t.topic)}</th>${hm.brokers.map((b) => {
    const c = t[key][String(b)];
    return `<td class="num heat heat-${c.level}" data-broker="${b}" data-value="${c.value}">${c.value ? fmt(c.value) : ""}</td>`;
  }).join("")}</tr>`).join("");
  return `<table id="${id}" class="heatmap"><thead><tr><th>topic</th>${head}</tr></thead><tbody>${rows}</tbody></table>`;
}

function renderHeatmap(s) {
  const hm = s.heatmap;
  if (!hm || !hm.topics.length) return "";
  return `<h2>Replicas per broker and topic</h2>${heatTable("heat-replicas", hm, "replicas", String)}
    <h2>Bytes per broker and topic</h2>${heatTable("heat-bytes", hm, "bytes", bytes)}`;
}

function renderQuotas(s) {
  const q = s.quotas || {};
  if (!q.available) return `<p class="bad">${esc(q.error || "The client quotas could not be read.")}</p>`;
  const rows = q.quotas.map((r) => `
    <tr class="quota"><td>${esc(r.user ?? "–")}</td><td>${esc(r.client_id ?? "–")}</td><td class="num">${r.rate}</td>
      <td class="num">${r.tokens === null || r.tokens === undefined ? "–" : r.tokens.toFixed(2)}</td>
      <td class="${r.state === "throttled" ? "bad" : r.state === "ok" ? "ok" : "muted"}">${esc(r.state === null ? "" : r.state === "idle" ? "bucket not in use" : r.state)}</td></tr>`).join("");
  return `
    <p class="muted">KIP-599's <code>controller_mutation_rate</code> (partitions created, added or deleted per second) per user and client
      (DescribeClientQuotas)${q.metrics ? "; remaining tokens from the brokers' metrics (below zero: throttled now)" : "; give --metrics for the remaining tokens"}.</p>
    <table id="quotas"><thead><tr><th>user</th><th>client id</th><th>controller_mutation_rate</th><th>remaining tokens</th><th>state</th></tr></thead>
      <tbody>${rows || `<tr><td colspan="5" class="muted">No controller_mutation_rate quota is set.</td></tr>`}</tbody></table>`;
}

// --- the Plan page: the form and the plan stay put; only the execution part follows the events ----

let currentPlan = null;

function chart(title, rows, key) {
  // Horizontal bars in plain SVG: per broker, before (grey) over after (blue).
  const top = Math.max(1, ...rows.flatMap((r) => r[key]));
  const w = 260, rowH = 30, left = 70;
  const bars = rows.map((r, i) => {
    const y = i * rowH + 4;
    const [before, after] = r[key];
    return `<text x="0" y="${y + 16}" class="label">broker ${r.id}</text>
      <rect x="${left}" y="${y}" width="${(w * before / top).toFixed(1)}" height="11" class="before"></rect>
      <text x="${left + w * before / top + 4}" y="${y + 10}" class="value">${before}</text>
      <rect x="${left}" y="${y + 13}" width="${(w * after / top).toFixed(1)}" height="11" class="after"></rect>
      <text x="${left + w * after / top + 4}" y="${y + 23}" class="value">${after}</text>`;
  }).join("");
  return `<figure class="chart" id="chart-${key}"><figcaption>${esc(title)}
      <span class="legend before">before</span><span class="legend after">after</span></figcaption>
    <svg width="${left + w + 50}" height="${rows.length * rowH + 6}" role="img">${bars}</svg></figure>`;
}

const ENGINE_NAMES = {local: "in-process", spark: "Spark"};

function engineText(e) {
  const t = e.timings_s || {};
  return `Engine: <b id="plan-engine-ran" data-engine="${esc(e.name)}">${esc(ENGINE_NAMES[e.name] || e.name)}</b>` +
    `${e.master ? ` (${esc(e.master)})` : ""} <span class="muted">(${esc(e.why)})</span>; ` +
    `${t.spark_start_s !== undefined ? `Spark start-up ${t.spark_start_s.toFixed(1)} s (once), ` : ""}planning ${(t.plan_s || 0).toFixed(1)} s.`;
}

function renderPlanResult(p) {
  if (!p) return "";
  const s = p.summary;
  const moves = p.moves.map((m) => `
    <tr id="plan-move-${esc(m.topic)}-${m.partition}" class="plan-move"><td>${esc(m.topic)}-${m.partition}</td>
      <td>${ids(m.from)} → ${ids(m.to)}</td><td>${ids(m.adding)}</td><td>${ids(m.removing)}</td>
      <td class="num">${bytes(m.bytes)}</td><td class="num">${m.leader < 0 ? "none" : m.leader} → ${m.preferred_after}</td></tr>`).join("");
  const execute = READ_ONLY || !p.moves.length ? "" : `
    <div class="controls write">
      <label>Throttle (B/s) <input id="plan-throttle" type="number" min="1" step="1" value="10000000"></label>
      <button id="plan-execute" class="write" data-action="execute">Execute with throttle</button>
    </div>`;
  return `
    <p id="plan-summary">Goal <b>${esc(p.goal)}</b>${p.brokers.length ? ` (brokers ${ids(p.brokers)})` : ""}:
      ${s.replica_moves} replica move(s) in ${s.partitions_moved} partition(s), ${bytes(s.bytes_moved)} to copy,
      ${s.leader_changes} preferred-leader change(s); balancedness ${s.balancedness.before} → ${s.balancedness.after};
      about ${duration(s.estimate_s)} at the planner's throttle.
      ${p.in_flight ? `<span class="warn">${p.in_flight} reassignment(s) were in flight when this was planned.</span>` : ""}</p>
    <p id="plan-engine">${engineText(p.engine)}</p>
    <div class="charts">${chart("Replicas per broker", p.per_broker, "replicas")}${chart("Preferred leaders per broker", p.per_broker, "leaders")}</div>
    <p><a id="plan-download" href="/api/plan/${esc(p.id)}/reassignment.json" download>Download the reassignment JSON</a>
      <span class="muted">(Kafka's format: headwater reassign or kafka-reassign-partitions.sh --execute take it)</span></p>
    ${execute}
    <table id="plan-moves"><thead><tr><th>partition</th><th>from → to</th><th>adding</th><th>removing</th><th>bytes</th><th>leader now → preferred</th></tr></thead>
      <tbody>${moves || `<tr><td colspan="6" class="muted">Nothing to move: the cluster already meets the goal.</td></tr>`}</tbody></table>`;
}

function renderExecution(x) {
  if (!x) return "";
  const share = x.partitions ? x.done / x.partitions : 1;
  const elect = READ_ONLY ? "" : `<button id="plan-elect" class="write" data-action="elect" ${x.finished ? "" : "disabled"}>Elect preferred leaders</button>`;
  return `<h2>Executed plan</h2>
    <div id="plan-progress">${bar(share, `${x.done} of ${x.partitions} partitions moved`, "wide")}</div>
    <p>${x.in_flight.length ? `${x.in_flight.length} move(s) in flight: see <a href="/reassignments">Reassignments</a> for bytes, rates and ETAs.` :
      x.finished ? "Every move is done." : "Waiting for the cluster's metadata."}
      ${x.not_preferred.length ? `${x.not_preferred.length} partition(s) not led by their preferred leader.` : `<span class="ok">Every partition is led by its preferred leader.</span>`}
      ${x.elected ? `Elected at ${new Date(x.elected.at * 1000).toLocaleTimeString()}.` : ""}</p>
    <div class="controls">${elect}</div>
    <pre id="plan-log">${esc(x.log.join("\n"))}</pre>`;
}

function renderPlanPage(s, content) {
  if (!document.getElementById("plan-form")) {
    content.innerHTML = `
      <div id="plan-form" class="controls">
        <label>Goal <select id="plan-goal">
          <option value="rebalance">rebalance</option><option value="add-brokers">add brokers</option>
          <option value="remove-brokers">remove brokers</option><option value="fix-dead">fix dead brokers</option>
          <option value="leaders">leaders only</option></select></label>
        <label>Broker ids <input id="plan-brokers" placeholder="4,5 (add or remove)"></label>
        <label>Engine <select id="plan-engine-choice">
          <option value="auto">auto</option><option value="local">in-process</option><option value="spark">Spark</option></select></label>
        <button id="plan-run" data-action="plan">Plan</button>
      </div>
      <p class="muted">The planner (<code>headwater plan</code>) on the console's last read of the cluster: its in-process
        engine (<code>--engine local</code>) or Spark (<code>--engine spark</code>); auto picks Spark above
        ${SPARK_ABOVE.toLocaleString("en")} replicas. The first Spark plan starts Spark, which takes some seconds.</p>
      <div id="plan-result"></div><div id="plan-exec"></div>`;
  }
  const brokers = s.brokers.map((b) => `${b.id}${b.alive ? "" : " (down)"}`).join(", ");
  document.getElementById("plan-run").title = `brokers: ${brokers}`;
  const exec = document.getElementById("plan-exec");
  exec.innerHTML = renderExecution((s.plan || {}).execution);
  sizeBars(exec);
}

const RENDER = {cluster: renderCluster, topics: (s) => renderHeatmap(s) + renderTopics(s), reassignments: renderReassignments,
                quotas: renderQuotas};

function render(s) {
  lastSnapshot = s;
  if (openedAt === null && s.taken_at) openedAt = s.taken_at;
  lastUpdate = Date.now();
  const errors = document.getElementById("errors");
  errors.hidden = !s.errors.length;
  errors.innerHTML = s.errors.map((e) => `<div>${esc(e)}</div>`).join("");
  const content = document.getElementById("content");
  if (s.taken_at && PAGE === "plan") {
    renderPlanPage(s, content);
  } else if (s.taken_at) {
    // An input being typed in keeps its focus and caret through the re-render.
    const active = document.activeElement;
    const focused = active && (active.id === "throttle-rate" || active.id === "move-filter") ? active.id : null;
    const caret = focused === "move-filter" ? active.selectionStart : null;
    content.innerHTML = RENDER[PAGE](s);
    sizeBars(content);
    const input = document.getElementById("throttle-rate");
    if (input && throttleDraft !== null) input.value = throttleDraft;
    const again = focused && document.getElementById(focused);
    if (again) {
      again.focus();
      if (caret !== null) again.setSelectionRange(caret, caret);
    }
  }
  updateStatus();
}

function updateStatus(state) {
  const el = document.getElementById("status");
  const age = lastSnapshot && lastSnapshot.taken_at ? (Date.now() / 1000 - lastSnapshot.taken_at) : null;
  const stale = age !== null && age > 10;
  el.className = "status" + (stale || state === "lost" ? " stale" : "");
  el.dataset.takenAt = lastSnapshot && lastSnapshot.taken_at ? String(lastSnapshot.taken_at) : "";
  el.textContent = (state === "lost" ? "connection to the console lost, retrying · " : "") +
    (age === null ? "waiting for the cluster" : `updated ${age.toFixed(0)} s ago${stale ? " (the cluster is slow to answer)" : ""}`) +
    (READ_ONLY ? " · read-only" : "");
}

function notice(text, bad = false) {
  const el = document.getElementById("notice");
  el.hidden = !text;
  el.className = bad ? "errors" : "notice";
  el.textContent = text || "";
}

async function post(path, body) {
  try {
    const resp = await fetch(path, {method: "POST", headers: {"Content-Type": "application/json", "X-CSRF-Token": CSRF},
                                    body: JSON.stringify(body), credentials: "same-origin"});
    const answer = await resp.json().catch(() => ({}));
    if (!resp.ok) { notice(`Refused (${resp.status}): ${answer.error || resp.statusText}`, true); return null; }
    return answer;
  } catch (e) {
    notice(`The console did not answer: ${e}`, true);
    return null;
  }
}

document.addEventListener("input", (ev) => {
  if (ev.target.id === "throttle-rate") throttleDraft = ev.target.value;
  if (ev.target.id === "move-filter") {
    moveFilter = ev.target.value.trim();
    movesPage = 0;
    if (lastSnapshot) render(lastSnapshot);
  }
});

document.addEventListener("change", (ev) => {
  const box = ev.target;
  if (READ_ONLY || !box.classList.contains("select-move")) return;
  const row = box.closest("tr");
  const key = moveKey(row.dataset.topic, row.dataset.partition);
  if (box.checked) selectedMoves.add(key); else selectedMoves.delete(key);
  updateSelection();
});

// One listener for every button, so buttons re-rendered each second keep working.
document.addEventListener("click", async (ev) => {
  const btn = ev.target.closest("button[data-action]");
  if (!btn || (READ_ONLY && btn.classList.contains("write"))) return;
  const action = btn.dataset.action;
  if (action === "plan") {
    const brokers = document.getElementById("plan-brokers").value.split(",").map((x) => x.trim()).filter((x) => x);
    if (brokers.some((x) => !/^\d+$/.test(x))) { notice("Broker ids are whole numbers, comma-separated.", true); return; }
    btn.disabled = true;
    const engine = document.getElementById("plan-engine-choice").value;
    notice(engine === "spark" ? "Planning on Spark…" : "Planning…");
    const a = await post("/api/plan", {goal: document.getElementById("plan-goal").value, brokers: brokers.map(Number), engine});
    btn.disabled = false;
    if (a) {
      currentPlan = a;
      const result = document.getElementById("plan-result");
      result.innerHTML = renderPlanResult(a);
      notice(`Planned on ${ENGINE_NAMES[a.engine.name] || a.engine.name}: ${a.moves.length} partition(s) to change.`);
    }
  } else if (action === "execute") {
    const rate = Number(document.getElementById("plan-throttle").value);
    if (!Number.isInteger(rate) || rate < 1) { notice("The throttle must be a whole number of bytes per second.", true); return; }
    if (!window.confirm(`Execute ${currentPlan.moves.length} partition move(s) throttled at ${rate} B/s?`)) return;
    btn.disabled = true;
    const a = await post("/api/plan/execute", {id: currentPlan.id, throttle: rate});
    if (a) notice(`Started: ${a.done.filter((l) => l.startsWith("Successfully")).join(" ") || "see the log below"}`);
    else btn.disabled = false;
  } else if (action === "elect") {
    const x = (lastSnapshot.plan || {}).execution;
    const a = await post("/api/plan/elect", {id: x.id});
    if (a) notice(a.done.filter((l) => l).join(" "));
  } else if (action === "cancel") {
    const row = btn.closest("tr");
    const tp = {topic: row.dataset.topic, partition: Number(row.dataset.partition)};
    const a = await post("/api/cancel", {partitions: [tp]});
    if (a) notice(`Cancelled the reassignment of ${tp.topic}-${tp.partition}: it returns to its original replicas.`);
  } else if (action === "cancel-selected") {
    const chosen = [...selectedMoves].map((key) => JSON.parse(key)).map(([topic, partition]) => ({topic, partition}));
    if (!chosen.length) return;
    const names = chosen.map((tp) => `${tp.topic}-${tp.partition}`).join(", ");
    if (!window.confirm(`Cancel the reassignment of ${names}?`)) return;
    btn.disabled = true;
    const a = await post("/api/cancel", {partitions: chosen});
    if (a) {
      chosen.forEach((tp) => selectedMoves.delete(moveKey(tp.topic, tp.partition)));
      notice(`Cancelled the reassignment of ${names}: they return to their original replicas.`);
    }
    updateSelection();
  } else if (action === "moves-prev" || action === "moves-next") {
    movesPage = Math.max(0, movesPage + (action === "moves-next" ? 1 : -1));
    if (lastSnapshot) render(lastSnapshot);
  } else if (action === "cancel-all") {
    if (!window.confirm("Cancel every reassignment in flight?")) return;
    const a = await post("/api/cancel", {all: true});
    if (a) notice(`Cancelled ${Object.keys(a.results).length} reassignment(s).`);
  } else if (action === "throttle") {
    const rate = Number(document.getElementById("throttle-rate").value);
    if (!Number.isInteger(rate) || rate < 1) { notice("The throttle must be a whole number of bytes per second.", true); return; }
    const a = await post("/api/throttle", {rate});
    if (a) { throttleDraft = null; notice(a.done.join("; ")); }
  } else if (action === "healing-on" || action === "healing-off") {
    const enable = action === "healing-on";
    const h = (lastSnapshot && lastSnapshot.self_healing) || {};
    const after = h.known ? duration(h.threshold_s) : "self.healing.broker.failure.threshold.ms";
    if (enable && !window.confirm(`Turn self-healing on? The controller moves the replicas of a broker gone longer than ${after}.`)) return;
    btn.disabled = true;
    const a = await post("/api/self-healing", {enable});
    if (a) notice(a.done.join("; ")); else btn.disabled = false;
  } else if (action === "unthrottle") {
    const a = await post("/api/throttle", {rate: null});
    if (a) notice(a.done.join("; "));
  }
});

fetch("/api/snapshot").then((r) => r.json()).then(render).catch(() => updateStatus("lost"));
const events = new EventSource("/api/events");
events.addEventListener("snapshot", (ev) => render(JSON.parse(ev.data)));
events.onerror = () => updateStatus("lost");  // EventSource reconnects by itself
setInterval(() => updateStatus(), 1000);
