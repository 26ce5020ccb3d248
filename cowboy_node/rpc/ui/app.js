// The network page: renders the node's /ui/snapshot, fetched at once when GET /subscribe announces a new
// finalized block, and every second without it (no subscription, or it dropped). No dependencies, no CDN.
// Every value from the chain is inserted as text (never as HTML): names and handlers are user data.
"use strict";

const POLL_MS = 1000;         // one snapshot per second: the node computes it at most once per new head
const TIMEOUT_MS = 4000;      // a request still unanswered after this is abandoned: the page never hangs on it
const REMOTE_POLL_MS = 3000;  // other validators' /status (given in the address after #peers=)
const SNAPSHOT_URL = "ui/snapshot";
const PUSHED_POLL_MS = 5000;  // while the block subscription is open, a slow poll only for what blocks do not signal
const RESUBSCRIBE_MS = 5000;  // a dropped or refused subscription is tried again after this
const MIN_GAP_MS = 500;       // pushed blocks fetch at most two snapshots a second, whatever the block time

let lastOk = 0;               // Date.now() of the last good snapshot (0: none yet)
let lastHeadMs = 0;           // the head's timestamp_ms, for the "block age" clock
let failing = null;           // text of the current failure, or null
let configPeers = [];         // other validators' RPC URLs from the node's [ui] peers (snapshot "peers")
let pushed = false;           // the block subscription is open: each new block triggers a snapshot
let pollTimer = null;         // the next scheduled poll
let polling = false;          // a poll is in flight
let pollAgain = false;        // a block arrived during it: poll once more when it ends
let pollStarted = 0;          // Date.now() when the last poll began

function $(id) { return document.getElementById(id); }

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function row(cells, attrs) {
  const tr = document.createElement("tr");
  for (const c of cells) tr.appendChild(c instanceof Node ? c : el("td", c));
  if (attrs) for (const [k, v] of Object.entries(attrs)) tr.setAttribute(k, v);
  return tr;
}

function cell(text, cls, title) {
  const td = el("td", text, cls);
  if (title) td.title = title;
  return td;
}

function short(hex) {
  if (typeof hex !== "string") return "–";
  return hex.length > 14 ? hex.slice(0, 8) + "…" + hex.slice(-4) : hex;
}

function fill(tableId, rows, emptyText) {
  const body = $(tableId).tBodies[0];
  const cols = $(tableId).tHead.rows[0].cells.length;
  body.replaceChildren();
  if (rows.length === 0) {
    const td = el("td", emptyText, "muted");
    td.colSpan = cols;
    body.appendChild(row([td]));
    return;
  }
  for (const r of rows) body.appendChild(r);
}

function ago(ms) {
  if (!ms) return "–";
  const s = Math.max(0, (Date.now() - ms) / 1000);
  return s < 60 ? s.toFixed(1) + " s" : Math.round(s / 60) + " min";
}

function setConn(state, text) {
  const c = $("conn");
  c.className = "conn conn-" + state;
  c.textContent = text;
  document.body.classList.toggle("stale", state !== "ok");
}

// -- rendering ------------------------------------------------------------------------------------------
function renderSummary(s) {
  const n = s.node, v = s.validators;
  $("chain-id").textContent = n.chain_id;
  $("height").textContent = String(n.height);
  $("view").textContent = v.view ?? "–";
  $("leader").textContent = v.leader === null || v.leader === undefined ? "–" : "#" + v.leader;
  $("finalized").textContent = v.finalized_height ?? "–";
  $("peers").textContent = v.members.length > 1 ? v.peers_connected + " / " + (v.members.length - 1) : "none (single validator)";
  const m = n.mempool || {};
  $("mempool").textContent = (m.txs ?? 0) + " txs";
  lastHeadMs = n.timestamp_ms || 0;
  document.title = "Cowboy #" + n.height;
}

function renderValidators(v) {
  fill("validators", v.members.map((m) => row([
    cell(m.index), cell(m.name), cell(short(m.ed25519_public_key), "mono", m.ed25519_public_key),
    cell([m.me ? "this node" : "", m.leader ? "leader" : ""].filter(Boolean).join(", ") || "–"),
    cell(m.me ? "self" : (m.connected ? "connected" : "not connected"), m.connected ? "ok" : "bad"),
  ], {"data-validator": String(m.index)})), "no validator set in /status");
}

function renderBlocks(blocks) {
  fill("blocks", blocks.map((b) => row([
    cell(b.height), cell(b.view ?? "–"), cell(b.txs), cell(b.cycles_used ?? "–"),
    cell(b.present.length ? b.present.map((i) => "#" + i).join(" ") : "–", "", "runners this block marks present"),
    cell(short(b.hash), "mono", b.hash), cell(ago(b.timestamp_ms), "muted"),
  ], {"data-height": String(b.height)})), "no blocks yet");
}

function renderTxs(txs) {
  fill("txs", txs.map((t) => row([
    cell(t.height), cell(t.kind ?? "–"), cell(short(t.sender), "mono", t.sender),
    cell(t.status === "failed" ? "failed: " + t.error_code : (t.status ?? "–"), t.status === "failed" ? "bad" : ""),
    cell(short(t.hash), "mono", t.hash),
  ], {"data-tx": t.hash})), "no transaction seen since this page opened");
}

function yesNo(b) { return b === null || b === undefined ? "–" : (b ? "yes" : "no"); }

function renderRunners(r) {
  $("runner-count").textContent = r.available ? "(" + r.count + " registered" + (r.truncated ? ", first " + r.items.length + " shown" : "") + ")" : "(not served by this node)";
  fill("runners", r.items.map((x) => row([
    cell(x.index), cell(short(x.address), "mono", x.address), cell(x.health, x.health === "healthy" ? "ok" : "bad"),
    cell(yesNo(x.present), x.present ? "ok" : ""), cell(yesNo(x.session), x.session ? "ok" : ""),
    cell(x.active_jobs), cell(x.last_heartbeat), cell(yesNo(x.eligible_now)),
  ], {"data-runner": String(x.address).toLowerCase()})), "no runner is registered");
}

function renderJobs(jobs) {
  fill("jobs", jobs.map((j) => row([
    cell(short(j.job_id), "mono", j.job_id), cell(j.phase, "phase phase-" + j.phase, j.reason || ""),
    cell(j.attempt ?? "–"), cell(j.committee.map(short).join(" ") || "–", "mono"), cell(j.first_seen),
    cell(j.history.map((h) => h.phase + "@" + h.height).join(" → "), "muted"),
    cell(j.phase === "failed" ? (j.reason || "–") : "", "bad"),
  ], {"data-job-id": j.job_id})), "no job seen since this page opened");
  const counts = CowboyHistory.phaseCounts();
  $("job-phases").textContent = Object.keys(counts).length
    ? "(" + Object.entries(counts).map(([p, n]) => n + " " + p).join(", ") + "; kept since this page opened, at most " +
      CowboyHistory.limits.MAX_JOBS + ")" : "";
}

function renderFailures(failures) {
  fill("failures", failures.map((f) => row([
    cell(short(f.job_id), "mono", f.job_id), cell(f.reason, "bad"), cell(f.finished_at ?? "–"), cell(f.attempt ?? "–"),
  ], {"data-failed-job": f.job_id})), "no failed job since this page opened");
}

function renderCharts() {
  const s = CowboyHistory.series();
  CowboyHistory.chart($("chart-interval"), s.interval, "s");
  CowboyHistory.chart($("chart-rate"), s.rate, "tx/s");
  CowboyHistory.chart($("chart-finality"), s.finality, "ms");
  CowboyHistory.chart($("chart-present"), s.present, "");
}

function renderTimers(actors) {
  const rows = [];
  for (const a of actors) {
    if (a.timers.length === 0) {
      rows.push(row([cell(short(a.actor), "mono", a.actor), cell("no live timer", "muted"), cell(""), cell(""), cell("")],
                    {"data-actor": String(a.actor).toLowerCase()}));
    }
    for (const t of a.timers) {
      rows.push(row([cell(short(a.actor), "mono", a.actor), cell(short(t.id), "mono", t.id), cell(t.height),
                     cell(t.handler), cell(t.expires_at ?? "never")],
                    {"data-actor": String(a.actor).toLowerCase(), "data-timer": t.id}));
    }
  }
  fill("timers", rows, "no actor called in the recent blocks");
}

function render(s) {
  configPeers = Array.isArray(s.peers) ? s.peers : [];
  CowboyHistory.ingest(s);  // bounded memory of what scrolled out of the snapshot (history.js)
  renderSummary(s);
  renderValidators(s.validators);
  renderBlocks(s.blocks);
  renderTxs(CowboyHistory.transactions());
  renderRunners(s.runners);
  renderJobs(CowboyHistory.jobs());
  renderFailures(CowboyHistory.failures());
  renderCharts();
  renderTimers(s.timers);
}

// -- polling --------------------------------------------------------------------------------------------
async function fetchJson(url) {
  const ctrl = new AbortController();
  const timer = setTimeout(() => ctrl.abort(), TIMEOUT_MS);
  try {
    const r = await fetch(url, {signal: ctrl.signal, cache: "no-store"});
    let body = null;
    try { body = await r.json(); } catch (e) { body = null; }
    return {status: r.status, body: body, retryAfter: Number(r.headers.get("Retry-After")) || 0};
  } finally {
    clearTimeout(timer);
  }
}

function schedulePoll(delay) {
  clearTimeout(pollTimer);
  pollTimer = setTimeout(poll, delay);
}

function gapLeft() { return Math.max(0, pollStarted + MIN_GAP_MS - Date.now()); }  // until the next poll may start

function pollNow() {  // a new block: fetch the snapshot now (or as soon as MIN_GAP_MS allows), not at the next tick
  if (polling) { pollAgain = true; return; }
  schedulePoll(gapLeft());
}

async function poll() {
  polling = true;
  pollStarted = Date.now();
  let delay = pushed ? PUSHED_POLL_MS : POLL_MS;
  try {
    const r = await fetchJson(SNAPSHOT_URL);
    if (r.status === 200 && r.body) {
      render(r.body);
      lastOk = Date.now();
      failing = null;
      setConn(r.body.stale ? "busy" : "ok", r.body.stale ? "node busy: showing the last snapshot" : "live");
    } else {
      const code = r.body && r.body.code ? r.body.code : "HTTP " + r.status;
      failing = "the node answered " + r.status + " " + code;
      delay = Math.max(POLL_MS, r.retryAfter * 1000);
    }
  } catch (e) {
    failing = e.name === "AbortError" ? "the node's RPC did not answer within " + TIMEOUT_MS / 1000 + " s"
                                      : "the node's RPC is unreachable";
  }
  showFailure();
  polling = false;
  if (pollAgain && failing === null) { pollAgain = false; delay = gapLeft(); }
  schedulePoll(delay);
}

// -- push: GET /subscribe?topic=blocks (docs/api.md "Subscriptions"); polling stays the fallback -----------------
function subscribeBlocks() {
  const url = new URL("../subscribe?topic=blocks", new URL(SNAPSHOT_URL, location.href));
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  let ws;
  try { ws = new WebSocket(url.href); } catch (e) { setTimeout(subscribeBlocks, RESUBSCRIBE_MS); return; }
  ws.onmessage = (m) => {
    let msg = null;
    try { msg = JSON.parse(m.data); } catch (e) { return; }
    if (msg && msg.type === "subscribed") { pushed = true; $("conn").dataset.push = "open"; }
    else if (msg && msg.type === "block") pollNow();
  };
  ws.onclose = () => {  // dropped (slow consumer, node restart, too many subscriptions): poll every second again
    const was = pushed;
    pushed = false;
    $("conn").dataset.push = "closed";
    if (was) pollNow();
    setTimeout(subscribeBlocks, RESUBSCRIBE_MS);
  };
}

function showFailure() {
  if (failing === null) return;
  const since = lastOk ? "; data below is from " + ago(lastOk) + " ago" : "";
  setConn("down", failing + since + " — retrying");
}

function tick() {  // the clocks keep moving even while requests fail: the page never looks frozen
  $("block-age").textContent = ago(lastHeadMs);
  showFailure();
}

// -- other validators (optional: [ui] peers in the node's config.toml, and #peers=<rpc url>,<rpc url>) -----------
function remotePeers() {
  const m = /(?:^#|&)peers=([^&]*)/.exec(location.hash);
  const given = m ? decodeURIComponent(m[1]).split(",") : [];
  const all = configPeers.concat(given).map((u) => u.trim().replace(/\/+$/, ""))
    .filter((u) => /^https?:\/\/[^\s/]+$/.test(u));
  return Array.from(new Set(all)).slice(0, 16);
}

async function pollRemote() {
  const peers = remotePeers();
  $("remote").hidden = peers.length === 0;
  if (peers.length) {
    const rows = await Promise.all(peers.map(async (url) => {
      try {
        const r = await fetchJson(url + "/status");
        const s = r.body || {}, c = s.consensus || {};
        if (r.status !== 200) return row([cell(url), cell("–"), cell("–"), cell("–"), cell("–"), cell("HTTP " + r.status, "bad")]);
        return row([cell(url), cell(s.height), cell(c.view ?? "–"), cell(c.leader ?? "–"),
                    cell((c.peers || []).length), cell("live", "ok")], {"data-remote": url});
      } catch (e) {
        // A cross-origin /status needs that node to list this page's origin in its [ui] cors_origins (default: none).
        return row([cell(url), cell("–"), cell("–"), cell("–"), cell("–"),
                    cell("unreachable (down, or it does not allow this origin: [ui] cors_origins)", "bad")], {"data-remote": url});
      }
    }));
    fill("remote", rows, "");
  }
  setTimeout(pollRemote, REMOTE_POLL_MS);
}

document.addEventListener("DOMContentLoaded", () => {
  setInterval(tick, 500);
  poll();
  subscribeBlocks();
  pollRemote();
});
