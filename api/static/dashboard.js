/* Savings dashboard: fetches /v1/dashboard (aggregated server-side) and draws it.
   No framework and no CDN: Chart.js and topojson-client are vendored under vendor/. */
(function () {
  "use strict";

  const COLORS = { cost: "#2f6fed", baseline: "#c5cddb", savings: "#13a36e" };
  const PROVIDER_COLORS = { aws: "#ff9900", azure: "#0078d4", gcp: "#34a853", private: "#9650c8", edge: "#b55fd0" };
  const charts = {};
  const state = { data: null, land: null };
  window.__dashboard = { state, charts };

  const $ = (sel) => document.querySelector(sel);
  const usd = (x, digits) =>
    x == null ? "n/a" : "$" + Number(x).toLocaleString("en-US", { minimumFractionDigits: digits ?? 2, maximumFractionDigits: digits ?? 2 });
  const signed = (x) => (x < 0 ? "−" : "+") + usd(Math.abs(x), 4);
  const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

  const RANGES = ["7", "30", "90", "365", "custom"];

  function params() {
    const q = new URLSearchParams(location.search);
    const from = q.get("from") || "";
    const to = q.get("to") || "";
    // a from or to without a range asks for that window, not for the default one
    const range = q.get("range") || (from || to ? "custom" : "30");
    return { tenant: q.get("tenant") || "", range, from, to };
  }

  const isDay = (s) => /^\d{4}-\d{2}-\d{2}$/.test(s) && !isNaN(Date.parse(s + "T00:00:00Z")) &&
    new Date(s + "T00:00:00Z").toISOString().slice(0, 10) === s;

  // why the URL's window cannot be drawn, naming the parameter ("" when it can): a mistyped
  // date must not quietly show another window's figures
  function invalidWindow(p) {
    const bad = (name, why) => `Invalid URL parameter "${name}": ${why}`;
    if (!RANGES.includes(p.range)) return bad("range", `${JSON.stringify(p.range)} is not one of ${RANGES.join(", ")}`);
    if (p.range !== "custom") {
      const extra = p.from ? "from" : p.to ? "to" : "";
      return extra ? bad(extra, `a date goes with range=custom, not range=${p.range}`) : "";
    }
    for (const [name, value] of [["from", p.from], ["to", p.to]]) {
      if (!value) return bad(name, "missing (a custom range needs from and to, YYYY-MM-DD)");
      if (!isDay(value)) return bad(name, `${JSON.stringify(value)} is not a date (YYYY-MM-DD)`);
    }
    return "";
  }

  // a problem+json answer as one line: its detail and each field it names
  function showError(message) {
    document.body.dataset.state = "error";
    $("#kpi-window").textContent = message;
    const el = $("#error-banner");
    el.textContent = message;
    el.hidden = false;
  }

  function windowOf(p) {
    if (p.range === "custom" && p.from && p.to) {
      const to = new Date(p.to + "T00:00:00Z");
      to.setUTCDate(to.getUTCDate() + 1); // the "to" day is included
      return { from: new Date(p.from + "T00:00:00Z"), to };
    }
    const to = new Date();
    const from = new Date(to.getTime() - Number(p.range || 30) * 86400e3);
    return { from, to };
  }

  async function load() {
    const p = params();
    $("#f-range").value = p.range;
    $("#f-from").value = p.from;
    $("#f-to").value = p.to;
    $("#filters").classList.toggle("show-custom", p.range === "custom");
    const bad = invalidWindow(p);
    if (bad) {
      showError(bad);
      return;
    }
    $("#error-banner").hidden = true;
    const w = windowOf(p);
    const q = new URLSearchParams({ from: w.from.toISOString(), to: w.to.toISOString() });
    if (p.tenant) q.set("tenant", p.tenant);
    document.body.dataset.state = "loading";
    try {
      // with a key when the server asks for one (api.js); the map is a public asset
      const [data, land] = await Promise.all([
        brokerApi.getJson("/v1/dashboard?" + q.toString(), "the savings dashboard's data"),
        state.land ? Promise.resolve(state.land) : fetch("/dashboard/static/vendor/land-110m.json").then((r) => r.json()),
      ]);
      state.data = data;
      state.land = land;
      brokerApi.hideKeyForm();
      render(state.data, p);
      document.body.dataset.state = "ready";
    } catch (err) {
      if (brokerApi.askForKey(err)) return;
      showError(String(err.message || err));
    }
  }

  function render(d, p) {
    const tenantSel = $("#f-tenant");
    tenantSel.innerHTML = '<option value="">All tenants</option>' +
      d.tenants.map((t) => `<option value="${esc(t)}">${esc(t)}</option>`).join("");
    tenantSel.value = p.tenant;
    const t = d.totals;
    setKpi("#kpi-cost-h", t.cost_per_hour, usd(t.cost_per_hour, 3) + "/h");
    // the headline compares with what the user would otherwise run (the first baseline named by
    // the server); the per-workload greedy is a second figure, never the headline
    const head = d.baselines[0];
    const greedy = d.baselines[d.baselines.length - 1];
    // the totals add each placement's own headline: name every policy they mix, never one for all
    const used = Object.entries(t.baseline_policies || {});
    const headName = used.length === 0 ? head.policy : used.length === 1 ? used[0][0] :
      used.map(([policy, n]) => `${policy} ×${n}`).join(", ");
    $("#baseline-name").textContent = headName;
    $("#baseline-name").title = head.description;
    // the baseline in words on the page, not only in a tooltip: each policy the totals mix
    const named = used.length === 0 ? [head.policy] : used.map(([policy]) => policy);
    $("#baseline-words-text").textContent = named
      .map((policy) => `${policy}: ${(d.baselines.find((b) => b.policy === policy) || head).description}`)
      .join("; ");
    demoBanner(d.demo_placements, t.placements);
    setKpi("#kpi-base-h", t.baseline_cost_per_hour, usd(t.baseline_cost_per_hour, 3) + "/h");
    $("#kpi-base-name").textContent = headName;
    $("#kpi-base-name").title = head.description;
    setKpi("#kpi-save-m", t.savings_per_month, usd(t.savings_per_month, 0) + "/mo");
    $("#kpi-save-pct").textContent = t.savings_pct == null ? "per month" : `${t.savings_pct.toFixed(1)}% below ${headName}`;
    const g = $("#kpi-greedy");
    g.textContent = t.greedy_savings_pct == null ? "" :
      `vs ${greedy.policy}: ${t.greedy_savings_pct.toFixed(1)}% (${usd(t.greedy_savings_per_month, 0)}/mo)`;
    g.title = greedy.description;
    g.dataset.value = String(t.greedy_savings_pct);
    const nb = $("#kpi-nobase");
    nb.hidden = !t.placements_without_baseline;
    nb.textContent = `${t.placements_without_baseline} placement(s) without a ${head.policy} figure: no savings claimed`;
    setKpi("#kpi-cost", t.cost, usd(t.cost));
    $("#kpi-saved").textContent = `saved ${usd(t.savings)} vs ${head.policy}`;
    setKpi("#kpi-count", t.placements, String(t.placements));
    $("#kpi-window").textContent = `${d.from.slice(0, 10)} → ${d.to.slice(0, 10)}`;

    seriesChart(d.series, head.policy, greedy.policy);
    groupChart("provider", d.by.provider, true);
    groupChart("tenant", d.by.tenant, false);
    groupChart("team", d.by.team, false);
    groupChart("site", d.by.site.slice(0, 10), false);
    drawMap(d.by.site);
    forecast(d.forecast);
    prices(d.prices);
    staleBanner(d.prices, d.price_stale_after_days);
    latest(d.latest);
  }

  function setKpi(sel, raw, text) {
    const el = $(sel);
    el.textContent = text;
    el.dataset.value = String(raw);
  }

  function replaceChart(id, config) {
    if (charts[id]) charts[id].destroy();
    charts[id] = new Chart(document.getElementById(id), config);
  }

  const baseOptions = () => ({
    responsive: true,
    maintainAspectRatio: false,
    animation: false,
    plugins: { legend: { position: "bottom", labels: { boxWidth: 12, font: { size: 11 } } } },
  });

  function seriesChart(s, headName, greedyName) {
    const labels = s.points.map((pt) => pt.start.slice(0, 10));
    const opts = baseOptions();
    opts.interaction = { mode: "index", intersect: false };
    opts.scales = { y: { beginAtZero: true, ticks: { callback: (v) => "$" + v } }, x: { ticks: { maxTicksLimit: 10 } } };
    opts.plugins.tooltip = { callbacks: { label: (c) => `${c.dataset.label}: ${usd(c.parsed.y)}` } };
    replaceChart("ch-series", {
      type: "line",
      data: {
        labels,
        datasets: [
          { label: `Baseline (${headName})`, data: s.points.map((pt) => pt.baseline_cost), borderColor: "#9aa5b8",
            backgroundColor: "rgba(154,165,184,.15)", borderDash: [5, 4], pointRadius: 0, fill: false, tension: 0.2 },
          { label: "Broker placements", data: s.points.map((pt) => pt.cost), borderColor: COLORS.cost,
            backgroundColor: "rgba(47,111,237,.12)", pointRadius: 0, fill: true, tension: 0.2 },
          { label: "Savings", data: s.points.map((pt) => pt.savings), borderColor: COLORS.savings,
            backgroundColor: "rgba(19,163,110,.0)", pointRadius: 0, fill: false, tension: 0.2 },
          { label: `Second figure: ${greedyName}`, data: s.points.map((pt) => pt.greedy_baseline_cost),
            borderColor: "#c9ced8", borderDash: [2, 3], borderWidth: 1, pointRadius: 0, fill: false, tension: 0.2,
            // off until its legend entry is clicked: a greedy several times the cost would flatten the headline lines
            hidden: true },
        ],
      },
      options: opts,
    });
  }

  function groupChart(name, rows, byProvider) {
    const opts = baseOptions();
    opts.indexAxis = "y";
    opts.scales = { x: { beginAtZero: true, ticks: { callback: (v) => "$" + v } }, y: { ticks: { font: { size: 11 } } } };
    opts.plugins.tooltip = { callbacks: { label: (c) => `${c.dataset.label}: ${usd(c.parsed.x)}` } };
    const costColors = rows.map((r) => (byProvider ? PROVIDER_COLORS[r.key] || COLORS.cost : COLORS.cost));
    replaceChart("ch-" + name, {
      type: "bar",
      data: {
        labels: rows.map((r) => r.key),
        datasets: [
          { label: "Cost", data: rows.map((r) => r.cost), backgroundColor: costColors, borderRadius: 3 },
          { label: "Baseline", data: rows.map((r) => r.baseline_cost), backgroundColor: COLORS.baseline, borderRadius: 3 },
        ],
      },
      options: opts,
    });
  }

  // equirectangular projection, cropped to the inhabited latitudes
  const LAT_TOP = 80, LAT_BOTTOM = -58, W = 1000;
  const H = ((LAT_TOP - LAT_BOTTOM) / 360) * W;
  const px = (lon) => ((lon + 180) / 360) * W;
  const py = (lat) => ((LAT_TOP - lat) / 360) * W;

  function ringPath(ring) {
    let out = "";
    let prev = null;
    for (const [lon, lat] of ring) {
      // a jump across the antimeridian starts a new sub-path instead of a streak across the map
      const move = prev === null || Math.abs(lon - prev) > 180;
      out += (move ? "M" : "L") + px(lon).toFixed(1) + "," + py(lat).toFixed(1);
      prev = lon;
    }
    return out + "Z";
  }

  function drawMap(sites) {
    const geo = topojson.feature(state.land, state.land.objects.land);
    const polys = geo.features ? geo.features.map((f) => f.geometry) : [geo.geometry];
    let d = "";
    for (const g of polys) {
      const list = g.type === "Polygon" ? [g.coordinates] : g.coordinates;
      for (const poly of list) for (const ring of poly) d += ringPath(ring);
    }
    const placed = sites.filter((s) => s.lat != null && s.lon != null && s.cost_per_hour > 0);
    const maxCost = Math.max(1e-9, ...placed.map((s) => s.cost_per_hour));
    const circles = placed
      .sort((a, b) => b.cost_per_hour - a.cost_per_hour)
      .map((s) => {
        const r = 3 + 15 * Math.sqrt(s.cost_per_hour / maxCost);
        const prov = s.key.split(":")[0];
        return `<circle class="site ${esc(prov)}" data-site="${esc(s.key)}" cx="${px(s.lon).toFixed(1)}" cy="${py(s.lat).toFixed(1)}" r="${r.toFixed(1)}">` +
          `<title>${esc(s.key)}${s.name ? " (" + esc(s.name) + ")" : ""}\n${usd(s.cost_per_hour, 4)}/h now · ${usd(s.cost)} in window · ${s.placements} placements</title></circle>`;
      })
      .join("");
    $("#map").innerHTML =
      `<svg viewBox="0 0 ${W} ${H.toFixed(0)}" preserveAspectRatio="xMidYMid meet"><path class="land" d="${d}"/>${circles}` +
      `<text class="legend" x="8" y="${(H - 8).toFixed(0)}">${placed.length} sites with running placements</text></svg>`;
  }

  function forecast(f) {
    const empty = $("#forecast-empty");
    const canvas = document.getElementById("ch-forecast");
    $("#forecast").classList.toggle("is-empty", !f.available);
    if (!f.available) {
      if (charts["ch-forecast"]) { charts["ch-forecast"].destroy(); delete charts["ch-forecast"]; }
      canvas.hidden = true;
      empty.hidden = false;
      empty.textContent = `No forecast to compare yet: ${f.reason}. Import usage history (broker usage import) to see forecast against actual demand.`;
      return;
    }
    canvas.hidden = false;
    empty.hidden = true;
    const pts = f.series;
    const opts = baseOptions();
    opts.interaction = { mode: "index", intersect: false };
    replaceChart("ch-forecast", {
      type: "line",
      data: {
        labels: pts.map((p) => String(p.timestamp).slice(0, 16)),
        datasets: [
          { label: "Actual", data: pts.map((p) => p.actual), borderColor: "#1d2433", pointRadius: 0 },
          { label: "Forecast p50", data: pts.map((p) => p.p50), borderColor: COLORS.cost, pointRadius: 0 },
          { label: "Forecast p95", data: pts.map((p) => p.p95), borderColor: "#9aa5b8", borderDash: [4, 4], pointRadius: 0 },
        ],
      },
      options: opts,
    });
  }

  function prices(rows) {
    $("#prices tbody").innerHTML = rows
      .map((r) => `<tr><td>${esc(r.provider)}</td><td>${esc(String(r.price_as_of).slice(0, 10))}</td>` +
        `<td class="num">${r.age_days == null ? "?" : r.age_days + " d"}</td>` +
        `<td><span class="badge ${r.stale ? "stale" : "ok"}">${r.stale ? "stale" : "fresh"}</span></td></tr>`)
      .join("");
  }

  // stale prices make every cost and saving on the page doubtful: say so at the top, not only
  // in the freshness table at the bottom
  function staleBanner(rows, limitDays) {
    const el = $("#stale-banner");
    const stale = rows.filter((r) => r.stale);
    el.hidden = stale.length === 0;
    if (!stale.length) return;
    const ages = stale.map((r) => r.age_days).filter((a) => a != null);
    const oldest = ages.length ? ` (oldest ${Math.round(Math.max(...ages))} days)` : "";
    el.innerHTML = `<strong>Stale prices:</strong> ${stale.map((r) => esc(r.provider)).join(", ")} ` +
      `price data is older than ${esc(String(limitDays))} days${oldest}; costs and savings below are computed ` +
      "from it. Refresh with <code>broker pricing refresh --provider all</code>.";
  }

  function demoBanner(demo, placements) {
    const el = $("#demo-banner");
    el.hidden = !demo;
    if (!demo) return;
    const which = demo >= placements ? "every placement in this window was" :
      `${demo} of the ${placements} placements in this window ${demo === 1 ? "was" : "were"}`;
    el.innerHTML = `<strong>Demo data:</strong> ${which} stored by <code>broker finops seed-demo</code> to try ` +
      'the dashboard, not by real requests: the figures below are not your spend. Demo placements are marked ' +
      '<span class="demo-tag">demo</span> in the list.';
  }

  function latest(rows) {
    $("#latest tbody").innerHTML = rows
      .map((r) => {
        const why = r.assignments
          .map((a) => `<li><b>${esc(a.workload)}</b> × ${a.replicas} on <code>${esc(a.pool)}</code>` +
            (a.binding.length ? ` — bound by ${a.binding.map(esc).join(", ")}` : " — cheapest allowed") +
            (a.next_best ? `; next best <code>${esc(a.next_best)}</code>${a.next_best_extra_per_hour != null ? " (" + signed(a.next_best_extra_per_hour) + "/h)" : ""}` : "") +
            (a.preferred_over ? `; preferred over <code>${esc(a.preferred_over.pool)}</code> (${usd(a.preferred_over.saving_per_hour, 4)}/h less alone) for the plan: ${a.preferred_over.because.map(esc).join(", ")}` : "") +
            `</li>`)
          .join("");
        const pct = (r.savings_pct == null ? "n/a" : r.savings_pct.toFixed(1) + "%") +
          (r.greedy_savings_pct == null ? "" : ` <small class="greedy">(${r.greedy_savings_pct.toFixed(1)}%)</small>`);
        return `<tr data-id="${esc(r.id)}"><td>${esc(String(r.created_at).slice(0, 16).replace("T", " "))}</td>` +
          `<td>${esc(r.name)}${r.demo ? ' <span class="demo-tag">demo</span>' : ""}</td><td>${esc(r.tenant)}</td><td class="num">${usd(r.cost_per_hour, 4)}</td>` +
          `<td class="num">${usd(r.baseline_cost_per_hour, 4)}<span class="baseline-policy">${esc(r.baseline_policy)}</span></td>` +
          `<td class="num savings-pos">${pct}</td>` +
          `<td><details><summary>${r.assignments.length} assignments</summary><ul>${why}</ul></details></td></tr>`;
      })
      .join("");
  }

  function navigate(ev) {
    if (ev) ev.preventDefault();
    const q = new URLSearchParams();
    const tenant = $("#f-tenant").value;
    const range = $("#f-range").value;
    if (tenant) q.set("tenant", tenant);
    q.set("range", range);
    if (range === "custom") {
      q.set("from", $("#f-from").value);
      q.set("to", $("#f-to").value);
    }
    history.pushState(null, "", "?" + q.toString());
    load();
  }

  $("#filters").addEventListener("submit", navigate);
  $("#f-tenant").addEventListener("change", navigate);
  $("#f-range").addEventListener("change", () => {
    const custom = $("#f-range").value === "custom";
    $("#filters").classList.toggle("show-custom", custom);
    if (!custom) navigate();
  });
  window.addEventListener("popstate", load);
  brokerApi.onKey(load);
  load();
})();
