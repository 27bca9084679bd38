// memoria status page: polls /stats, renders tiers, hit rate, engine, namespaces, advisor.
// Every figure shown is also kept in a data- attribute for tests and scrapers.
"use strict";
(function () {
  const POLL_MS = 1000, HISTORY_MS = 10 * 60 * 1000, KEY = "memoria.adminKey";
  const SVG = "http://www.w3.org/2000/svg";
  const $ = (id) => document.getElementById(id);
  const samples = [];
  let prev = null, polls = 0, timer = null;

  // The admin key: from the URL fragment (never sent to the server, removed at once) or the form.
  const m = /(?:^#|&)key=([^&]*)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem(KEY, decodeURIComponent(m[1]));
    dropFragment();
  }
  function dropFragment() {
    try { window.history.replaceState(null, "", location.pathname + location.search); } catch (e) { /* file: or sandboxed */ }
  }
  $("key-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(KEY, $("key-input").value);
    $("key-input").value = "";
    poll();
  });

  const num = (v) => (typeof v === "number" && isFinite(v) ? v : 0);
  function bytes(n) {
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : String(n)) + " " + u[i];
  }
  const pct = (r) => (r * 100).toFixed(1) + "%";
  function set(el, value, text) {
    el.dataset.value = String(value);
    el.textContent = text === undefined ? String(value) : text;
  }
  function svg(tag, attrs) {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  }
  function status(state, text) {
    const s = $("status");
    s.dataset.state = state;
    s.dataset.polls = String(polls);
    s.textContent = text;
    $("key-form").hidden = state !== "auth";
  }

  function tiers(st) {
    const t = st.tiers || {};
    const rows = ["hot", "cold", "disk", "remote"].filter((k) => t[k]).map((k) => [k, t[k]]);
    for (const [id, field] of [["tier-blocks-bar", "blocks"], ["tier-bytes-bar", "bytes"]]) {
      const bar = $(id);
      bar.replaceChildren();
      const total = rows.reduce((a, [, v]) => a + num(v[field]), 0);
      bar.dataset.total = String(total);
      let x = 0;
      for (const [k, v] of rows) {
        const w = total > 0 ? (1000 * num(v[field])) / total : 0;
        const r = svg("rect", { x: x, y: 0, width: w, height: 28, class: "tier" });
        r.dataset.tier = k;
        r.dataset.value = String(num(v[field]));
        const tip = svg("title", {});
        tip.textContent = k + ": " + (field === "bytes" ? bytes(num(v[field])) : num(v[field]) + " blocks") +
          (v.server_wide ? " (the whole server, shared by every host)" : "");
        r.appendChild(tip);
        bar.appendChild(r);
        x += w;
      }
    }
    const body = $("tiers-table").tBodies[0];
    body.replaceChildren();
    for (const [k, v] of rows) {
      const tr = document.createElement("tr");
      tr.dataset.tier = k;
      tr.dataset.blocks = String(num(v.blocks));
      tr.dataset.bytes = String(num(v.bytes));
      const cells = [
        null, [v.blocks, String(num(v.blocks))], [v.bytes, bytes(num(v.bytes))],
        [v.budget_bytes, v.budget_bytes === undefined ? "–" : bytes(num(v.budget_bytes))],
        [v.hits, v.hits === undefined ? "–" : String(v.hits)],
        [v.misses, v.misses === undefined ? "–" : String(v.misses)],
        [v.evictions, v.evictions === undefined ? String(num(st.pool && st.pool.evictions)) : String(v.evictions)],
      ];
      const name = document.createElement("td");
      const sw = document.createElement("span");
      sw.className = "swatch " + k;
      name.append(sw, k);
      tr.appendChild(name);
      for (const c of cells.slice(1)) {
        const td = document.createElement("td");
        set(td, c[0] === undefined ? "" : c[0], c[1]);
        tr.appendChild(td);
      }
      body.appendChild(tr);
    }
    const r = $("remote");
    if (st.remote && typeof st.remote === "object") {
      r.dataset.available = "true";
      r.dataset.hits = String(num(st.remote.hits));
      r.dataset.bytesWritten = String(num(st.remote.bytes_written));
      r.textContent = "remote tier: " + num(st.remote.hits) + " blocks hit, " + bytes(num(st.remote.bytes_read)) +
        " read, " + bytes(num(st.remote.bytes_written)) + " written, " + num(st.remote.writes_dropped) + " writes dropped";
    } else {
      r.dataset.available = "false";
      r.textContent = "remote tier: not configured";
    }
  }

  function hitRate(st, now) {
    const c = st.state_cache || {};
    const el = $("hit-rate");
    el.dataset.hits = String(num(c.hits));
    el.dataset.misses = String(num(c.misses));
    set(el, num(c.hit_rate), "(" + pct(num(c.hit_rate)) + " overall)");
    if (prev) {
      const dh = num(c.hits) - prev.hits, dm = num(c.misses) - prev.misses;
      if (dh + dm > 0 && dh >= 0 && dm >= 0) samples.push({ t: now, r: dh / (dh + dm) });
    }
    while (samples.length && now - samples[0].t > HISTORY_MS) samples.shift();
    const line = $("hit-rate-line");
    const t0 = now - HISTORY_MS;
    line.setAttribute("points", samples.map((p) =>
      (40 + (550 * (p.t - t0)) / HISTORY_MS).toFixed(1) + "," + (140 - 130 * p.r).toFixed(1)).join(" "));
    line.dataset.points = String(samples.length);
    line.dataset.last = samples.length ? String(samples[samples.length - 1].r) : "";
    $("hit-rate-span").textContent = "last 10 min";
  }

  function engine(st, now) {
    const e = st.engine || {};
    const dd = (f) => document.querySelector('#engine dd[data-field="' + f + '"]');
    set(dd("queue_depth"), num(e.queue_depth));
    set(dd("sessions"), num(e.sessions));
    set(dd("mean_step_tokens"), num(e.mean_step_tokens), num(e.mean_step_tokens).toFixed(2));
    set(dd("steps"), num(e.steps));
    set(dd("restarts"), num(e.restarts));
    set(dd("auto_pinned_blocks"), num(st.pool && st.pool.auto_pinned_blocks));
    const tokens = num(e.prefill_tokens) + num(e.decode_tokens);
    if (prev && now > prev.t) {
      const dt = (now - prev.t) / 1000;
      const tps = Math.max(0, tokens - prev.tokens) / dt, dps = Math.max(0, num(e.decode_tokens) - prev.decode) / dt;
      set(dd("tokens_per_s"), tps, tps.toFixed(1));
      set(dd("decode_per_s"), dps, dps.toFixed(1));
    }
    return { tokens: tokens, decode: num(e.decode_tokens) };
  }

  function namespaces(st) {
    const body = $("namespaces").tBodies[0];
    body.replaceChildren();
    const ns = st.namespaces || {}, limits = st.limits || {};
    const adm = {};
    for (const a of st.admission || []) adm[a.namespace] = a;
    for (const name of Object.keys(ns).sort()) {
      const n = ns[name], c = n.state_cache || {}, l = limits[name] || {}, a = adm[name];
      const tr = document.createElement("tr");
      tr.dataset.ns = name;
      const held = num(n.blocks_used) + num(n.blocks_cached);
      const td = (field, value, text) => {
        const e = document.createElement("td");
        e.dataset.field = field;
        set(e, value, text);
        tr.appendChild(e);
        return e;
      };
      const first = td("name", name);
      first.dataset.value = name;
      td("sessions", num(n.sequences));
      td("blocks", held, held + " (" + num(n.blocks_cached) + " cached)");
      td("hits", num(c.hits));
      td("misses", typeof c.misses === "number" ? c.misses : 0);
      td("hit_rate", num(c.hit_rate), pct(num(c.hit_rate)));
      const reasons = n.misses && typeof n.misses === "object" ? n.misses : null;
      // Counts by reason (blocks); nested objects (`evicted_at`, `tokens`) are details.
      const keys = reasons ? Object.keys(reasons).filter((k) => typeof reasons[k] === "number") : [];
      const at = reasons && reasons.evicted_at && typeof reasons.evicted_at === "object" ? reasons.evicted_at : null;
      const where = at ? " (evicted at " + Object.keys(at).filter((k) => num(at[k]) > 0).map((k) => k + " " + num(at[k])).join(", ") + ")" : "";
      const r = td("miss_reasons", reasons ? "available" : "", reasons
        ? keys.map((k) => k + " " + num(reasons[k])).join(" · ") + (where === " (evicted at )" ? "" : where) : "not available");
      r.className = "reasons";
      for (const k of keys) r.dataset["miss" + k[0].toUpperCase() + k.slice(1)] = String(num(reasons[k]));
      td("evictions", num(n.evictions));
      const parts = [], fracs = [];
      if (typeof l.max_blocks === "number" && l.max_blocks > 0) { parts.push("blocks " + held + "/" + l.max_blocks); fracs.push(held / l.max_blocks); }
      if (typeof l.max_sessions === "number" && l.max_sessions > 0) { parts.push("sessions " + num(n.sequences) + "/" + l.max_sessions); fracs.push(num(n.sequences) / l.max_sessions); }
      if (a && a.max_concurrent > 0) { parts.push("running " + num(a.running) + "/" + a.max_concurrent + ", queued " + num(a.queued)); fracs.push(num(a.running) / a.max_concurrent); }
      const q = fracs.length ? Math.max.apply(null, fracs) : 0;
      td("quota", q, parts.length ? parts.join(" · ") : "–");
      td("hit_timing", l.hit_timing || "", l.hit_timing || "–");
      body.appendChild(tr);
    }
  }

  function advisor(st) {
    const a = st.advisor, chart = $("advisor-chart"), s = $("advisor-summary");
    chart.replaceChildren();
    if (!a || typeof a !== "object" || !Array.isArray(a.curve) || !a.curve.length) {
      s.dataset.available = "false";
      s.textContent = "not available";
      chart.dataset.points = "0";
      return;
    }
    s.dataset.available = "true";
    s.dataset.budgetBlocks = String(num(a.budget_blocks));
    s.dataset.target = String(num(a.target_hit_rate));
    s.dataset.smallest = a.smallest_budget_for_target == null ? "" : String(a.smallest_budget_for_target);
    s.textContent = "budget " + num(a.budget_blocks) + " blocks; target " + pct(num(a.target_hit_rate)) + " reached with " +
      (a.smallest_budget_for_target == null ? "no budget tried" : a.smallest_budget_for_target + " blocks");
    const pts = a.curve.filter((p) => num(p.scale) > 0);
    const lx = pts.map((p) => Math.log2(num(p.scale)));
    const lo = Math.min.apply(null, lx), hi = Math.max.apply(null, lx), span = hi > lo ? hi - lo : 1;
    const X = (l) => 40 + (550 * (l - lo)) / span, Y = (r) => 140 - 130 * Math.min(1, Math.max(0, r));
    chart.append(svg("line", { class: "axis", x1: 40, y1: 10, x2: 40, y2: 140 }), svg("line", { class: "axis", x1: 40, y1: 140, x2: 590, y2: 140 }));
    for (const [r, label] of [[1, "100%"], [0.5, "50%"], [0, "0%"]]) {
      const t = svg("text", { x: 34, y: Y(r) + 4, class: "tick" });
      t.textContent = label;
      chart.appendChild(t);
    }
    const ty = Y(num(a.target_hit_rate));
    chart.appendChild(svg("line", { class: "target", x1: 40, y1: ty, x2: 590, y2: ty }));
    chart.appendChild(svg("polyline", { id: "advisor-line", points: pts.map((p, i) => X(lx[i]).toFixed(1) + "," + Y(num(p.hit_rate)).toFixed(1)).join(" ") }));
    pts.forEach((p, i) => {
      const c = svg("circle", { cx: X(lx[i]), cy: Y(num(p.hit_rate)), r: 4, class: "advisor-point" + (num(p.scale) === 1 ? " current" : "") });
      c.dataset.scale = String(num(p.scale));
      c.dataset.blocks = String(num(p.blocks));
      c.dataset.hitRate = String(num(p.hit_rate));
      const tip = svg("title", {});
      tip.textContent = num(p.scale) + "× (" + num(p.blocks) + " blocks): " + pct(num(p.hit_rate));
      c.appendChild(tip);
      chart.appendChild(c);
      const label = svg("text", { x: X(lx[i]), y: 154, class: "tick mid" });
      label.textContent = num(p.scale) + "×";
      chart.appendChild(label);
    });
    chart.dataset.points = String(pts.length);
  }

  async function poll() {
    clearTimeout(timer);
    const key = sessionStorage.getItem(KEY);
    try {
      const resp = await fetch("/stats", { cache: "no-store", headers: key ? { Authorization: "Bearer " + key } : {} });
      if (resp.status === 401 || resp.status === 403) {
        status("auth", "this host needs its admin key for /stats");
      } else if (!resp.ok) {
        status("error", "/stats answered " + resp.status);
      } else {
        const st = await resp.json(), now = Date.now();
        set($("model"), st.model || "", st.model || "");
        tiers(st);
        hitRate(st, now);
        const e = engine(st, now);
        namespaces(st);
        advisor(st);
        const c = st.state_cache || {};
        prev = { t: now, hits: num(c.hits), misses: num(c.misses), tokens: e.tokens, decode: e.decode };
        polls++;
        document.body.dataset.uptime = String(num(st.uptime_s));
        status("ok", "live · refreshed " + new Date(now).toLocaleTimeString() + " · up " + Math.round(num(st.uptime_s)) + " s");
      }
    } catch (err) {
      status("error", "cannot reach /stats: " + err);
    }
    timer = setTimeout(poll, POLL_MS);
  }
  poll();
})();
