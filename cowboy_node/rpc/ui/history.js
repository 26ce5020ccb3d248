// The page's memory: each snapshot covers only the last 20 blocks (about 20 s at 1 s blocks), so the page keeps a
// bounded history of what it has seen — transactions, jobs by phase, failed jobs with their reason — and per-block
// series for the charts. Bounded by count and by age: a page left open for a day holds the same amount as after
// ten minutes. Loaded before app.js; exposes one global, CowboyHistory.
"use strict";

const CowboyHistory = (() => {
  const WINDOW_MS = 10 * 60 * 1000;  // charts cover the last 10 minutes of blocks
  const MAX_BLOCKS = 1200;           // and at most this many blocks (500 ms blocks: 10 minutes)
  const MAX_TXS = 300;               // transactions kept, newest first
  const MAX_JOBS = 300;              // jobs kept (live ones first: a finished job leaves first)
  const MAX_FAILURES = 100;          // failed jobs kept with their reason
  const MAX_SAMPLES = 600;           // finalization-latency samples (one per new head)

  const blocks = new Map();          // height -> {height, t, txs, present}
  const txs = new Map();             // hash -> transaction (insertion order = first seen)
  const jobs = new Map();            // job_id -> latest job document
  const failures = new Map();        // job_id -> {job_id, reason, finished_at, attempt}
  const finality = [];               // [{height, ms}] seen->finalized p50 of this validator, per head

  function trim(map, max, keep) {
    if (map.size <= max) return;
    for (const [k, v] of map) {      // oldest first (Map keeps insertion order)
      if (map.size <= max) break;
      if (!keep || !keep(v)) map.delete(k);
    }
    while (map.size > max) map.delete(map.keys().next().value);
  }

  function finalizeP50(validators) {
    const tl = (validators && validators.timeline) || {};
    let best = null;
    for (const role of ["leader", "follower"]) {
      const r = tl[role];
      const step = r && r["seen->finalized"];
      if (step && typeof step.p50_ms === "number" && (!best || r.views > best.views)) best = {views: r.views, ms: step.p50_ms};
    }
    return best ? best.ms : null;
  }

  let lastHead = -1;
  function ingest(s) {
    for (const b of s.blocks || []) {
      blocks.set(b.height, {height: b.height, t: b.timestamp_ms, txs: b.txs, present: (b.present || []).length});
    }
    const newest = Math.max(0, ...Array.from(blocks.values(), (b) => b.t || 0));
    for (const [h, b] of blocks) if (newest - b.t > WINDOW_MS) blocks.delete(h);
    const ordered = Array.from(blocks.keys()).sort((a, b) => a - b);
    while (ordered.length > MAX_BLOCKS) blocks.delete(ordered.shift());

    for (const t of (s.transactions || []).slice().reverse()) if (!txs.has(t.hash)) txs.set(t.hash, t);
    trim(txs, MAX_TXS);

    for (const j of (s.jobs || []).slice().reverse()) {
      jobs.delete(j.job_id);           // re-insert: the most recently updated job is the newest
      jobs.set(j.job_id, j);
      if (j.phase === "failed") {
        failures.set(j.job_id, {job_id: j.job_id, reason: j.reason || "(no reason recorded)",
                                finished_at: j.finished_at, attempt: j.attempt});
      }
    }
    trim(jobs, MAX_JOBS, (j) => j.phase !== "settled" && j.phase !== "failed");
    trim(failures, MAX_FAILURES);

    const head = s.node ? s.node.height : -1;
    const p50 = finalizeP50(s.validators);
    if (head !== lastHead && p50 !== null) {
      finality.push({height: head, ms: p50});
      if (finality.length > MAX_SAMPLES) finality.shift();
    }
    lastHead = head;
  }

  // Per-block series, oldest first: [{x: height, y}] for the charts.
  function series() {
    const bs = Array.from(blocks.values()).sort((a, b) => a.height - b.height);
    const interval = [], rate = [], present = [];
    for (let i = 0; i < bs.length; i++) {
      present.push({x: bs[i].height, y: bs[i].present});
      if (i === 0 || bs[i - 1].height !== bs[i].height - 1) continue;  // a gap: no interval across it
      const dt = (bs[i].t - bs[i - 1].t) / 1000;
      if (dt <= 0) continue;
      interval.push({x: bs[i].height, y: dt});
      rate.push({x: bs[i].height, y: bs[i].txs / dt});
    }
    return {interval, rate, present, finality: finality.map((f) => ({x: f.height, y: f.ms}))};
  }

  const newestFirst = (map) => Array.from(map.values()).reverse();

  function phaseCounts() {
    const counts = {};
    for (const j of jobs.values()) counts[j.phase] = (counts[j.phase] || 0) + 1;
    return counts;
  }

  // A small line chart as SVG elements (attributes only: the page's CSP allows no inline style).
  const SVG = "http://www.w3.org/2000/svg";
  function chart(svg, points, unit) {
    const W = 280, H = 70, P = 4;
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    svg.replaceChildren();
    const label = svg.parentElement && svg.parentElement.querySelector(".chart-last");
    if (points.length === 0) {
      if (label) label.textContent = "no data yet";
      svg.setAttribute("data-points", "0");
      return;
    }
    const ys = points.map((p) => p.y), x0 = points[0].x, x1 = points[points.length - 1].x;
    const max = Math.max(...ys), min = Math.min(0, ...ys), span = (max - min) || 1, xs = (x1 - x0) || 1;
    const d = points.map((p, i) => (i ? "L" : "M") + (P + (p.x - x0) / xs * (W - 2 * P)).toFixed(1) + " " +
                                   (H - P - (p.y - min) / span * (H - 2 * P)).toFixed(1)).join(" ");
    const path = document.createElementNS(SVG, "path");
    path.setAttribute("d", d);
    path.setAttribute("class", "chart-line");
    svg.appendChild(path);
    svg.setAttribute("data-points", String(points.length));
    const fmt = (v) => (Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(2)) + (unit ? " " + unit : "");
    if (label) label.textContent = "last " + fmt(ys[ys.length - 1]) + ", max " + fmt(max) + " (" + points.length + " points)";
  }

  return {ingest, series, chart, phaseCounts, transactions: () => newestFirst(txs), jobs: () => newestFirst(jobs),
          failures: () => newestFirst(failures), limits: {MAX_TXS, MAX_JOBS, MAX_FAILURES, WINDOW_MS}};
})();
