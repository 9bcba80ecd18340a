/* Fleet simulations: reads /v1/simulations and draws one run's figures per policy.
   No framework and no CDN: Chart.js is vendored under vendor/. Events are dashed vertical lines,
   drawn by the small plugin below (Chart.js has no annotation plugin in its core). */
(function () {
  "use strict";

  const POLICY_COLORS = { "kube-default": "#326ce5", "cheapest-fit": "#d9822b", "karpenter-like": "#8c5bd6", broker: "#13a36e" };
  const EVENT_COLORS = { price_change: "#d9822b", outage_start: "#d64545", outage_end: "#d64545", surge_start: "#2f6fed",
    surge_end: "#2f6fed", spot_interruption: "#9aa3b5" };
  const charts = {};
  const state = { list: null, sim: null, markers: [] };
  window.__simulations = { state, charts };

  const $ = (sel) => document.querySelector(sel);
  const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  const num = (x, d) => (x == null ? "n/a" : Number(x).toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d }));
  const color = (policy, i) => POLICY_COLORS[policy] || ["#0e7c86", "#b55fd0", "#6b7487"][i % 3];

  const eventLines = {
    id: "eventLines",
    afterDatasetsDraw(chart) {
      const x = chart.scales.x;
      const area = chart.chartArea;
      const ctx = chart.ctx;
      ctx.save();
      ctx.setLineDash([5, 4]);
      for (const m of state.markers) {
        const px = x.getPixelForValue(m.hour);
        if (px < area.left || px > area.right) continue;
        ctx.strokeStyle = EVENT_COLORS[m.kind] || "#6b7487";
        ctx.lineWidth = m.kind === "spot_interruption" ? 0.8 : 1.5;
        ctx.beginPath();
        ctx.moveTo(px, area.top);
        ctx.lineTo(px, area.bottom);
        ctx.stroke();
      }
      ctx.restore();
    },
  };

  function lineChart(id, sim, key, yTitle) {
    if (charts[id]) charts[id].destroy();
    const datasets = Object.entries(sim.series).map(([policy, s], i) => ({
      label: policy,
      data: s[key] ? s.hour.map((h, k) => ({ x: h, y: s[key][k] })) : [],
      borderColor: color(policy, i),
      backgroundColor: color(policy, i),
      borderWidth: 1.5,
      pointRadius: 0,
      tension: 0,
    }));
    charts[id] = new Chart(document.getElementById(id), {
      type: "line",
      data: { datasets },
      options: {
        responsive: true,
        maintainAspectRatio: false,
        animation: false,
        parsing: false,
        interaction: { mode: "nearest", axis: "x", intersect: false },
        scales: {
          x: { type: "linear", title: { display: true, text: "hours from the start" } },
          y: { beginAtZero: true, title: { display: true, text: yTitle } },
        },
        plugins: { legend: { position: "bottom", labels: { boxWidth: 12, font: { size: 11 } } } },
      },
      plugins: [eventLines],
    });
  }

  function render(sim) {
    $("#sim-title").textContent = `${sim.name}: ${num(sim.days, 2)} days, seed ${sim.seed}`;
    $("#summary tbody").innerHTML = sim.summary
      .map(
        (r) => `<tr data-policy="${esc(r.policy)}"><td>${esc(r.policy)}</td><td class="num">$${num(r.spend_usd, 2)}</td>
          <td class="num">${num(r.spend_per_hour_usd, 3)}</td><td class="num">${num(r.cpu_utilisation, 3)}</td>
          <td class="num">${num(r.memory_utilisation, 3)}</td><td class="num">${num(r.starved_core_min, 1)}</td>
          <td class="num">${num(r.unavailable_replica_min, 1)}</td><td class="num">${num(r.slo_violation_replica_min, 1)}</td>
          <td class="num">${r.spot_interruptions}</td><td class="num">${r.migrations}</td>
          <td class="num">${num(r.sched_latency_p50_s, 0)}</td><td class="num">${num(r.fairness_jain, 3)}</td></tr>`
      )
      .join("");
    // scheduled events are the same for every policy: one line each; reclaims are per policy
    const seen = new Set();
    state.markers = sim.events.filter((e) => {
      const key = e.kind === "spot_interruption" ? `${e.policy}|${e.hour}|${e.detail}` : `${e.kind}|${e.hour}`;
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
    $("#events tbody").innerHTML = state.markers
      .map((e) => `<tr><td class="num">${num(e.hour, 2)}</td><td>${esc(e.kind)}</td>
        <td>${e.kind === "spot_interruption" ? esc(e.policy) : "all"}</td><td>${esc(e.detail)}</td></tr>`)
      .join("");
    lineChart("ch-spend", sim, "spend_per_hour", "USD / hour");
    lineChart("ch-util", sim, "cpu_utilisation", "used / provisioned cores");
    lineChart("ch-mem", sim, "memory_utilisation", "used / provisioned GiB");
    $("#ch-mem-missing").hidden = Object.values(sim.series).every((s) => s.memory_utilisation);
  }

  function params() {
    const q = new URLSearchParams(location.search);
    return { tenant: q.get("tenant") || "", id: q.get("id") || "" };
  }

  function warnings(sim) {
    const el = $("#sim-warnings");
    const list = sim.warnings || [];
    el.hidden = list.length === 0;
    el.innerHTML = list.length ? "<strong>These figures may not repeat:</strong><ul>" +
      list.map((w) => `<li>${esc(w)}</li>`).join("") + "</ul>" : "";
  }

  // tenants as on the savings dashboard: without a key (authentication off) every tenant's runs,
  // ?tenant= picks one; with a key the server answers with its own tenant's only
  async function load() {
    const p = params();
    document.body.dataset.state = "loading";
    try {
      const q = new URLSearchParams({ limit: "500" });
      if (p.tenant) q.set("tenant", p.tenant);
      const listed = await brokerApi.getJson("/v1/simulations?" + q.toString(), "the simulations");
      brokerApi.hideKeyForm();
      const tenants = listed.tenants || [];
      const tenantSel = $("#f-tenant");
      tenantSel.innerHTML = '<option value="">All tenants</option>' +
        tenants.map((t) => `<option value="${esc(t)}">${esc(t)}</option>`).join("");
      tenantSel.value = p.tenant;
      const many = tenants.length > 1 && !p.tenant;
      state.list = listed.items.filter((s) => s.status === "succeeded");
      const select = $("#f-sim");
      select.innerHTML = state.list
        .map((s) => `<option value="${esc(s.id)}">${esc(s.name)}${many ? " · " + esc(s.tenant) : ""} · ` +
          `${esc(s.created_at.slice(0, 16).replace("T", " "))}${s.source === "cli" ? " · CLI" : ""}` +
          `${s.warnings && s.warnings.length ? " ⚠" : ""}</option>`)
        .join("");
      const wanted = p.id || (state.list[0] && state.list[0].id);
      $("#sim-empty-tenant").textContent = p.tenant ? ` for tenant ${p.tenant}` : "";
      $("#sim-empty").hidden = Boolean(wanted);
      $("#sim-body").hidden = !wanted;
      if (wanted) {
        select.value = wanted;
        state.sim = await brokerApi.getJson("/v1/simulations/" + encodeURIComponent(wanted), "this simulation");
        warnings(state.sim);
        render(state.sim);
      } else {
        $("#sim-warnings").hidden = true;
      }
      document.body.dataset.state = "ready";
    } catch (err) {
      if (brokerApi.askForKey(err)) return;
      document.body.dataset.state = "error";
      $("#sim-empty").hidden = true;
      $("#sim-body").hidden = false;
      $("#sim-title").textContent = String(err.message || err);
    }
  }

  function navigate(changes) {
    const q = new URLSearchParams(location.search);
    for (const [k, v] of Object.entries(changes)) {
      if (v) q.set(k, v);
      else q.delete(k);
    }
    history.pushState(null, "", "?" + q.toString());
    load();
  }

  $("#f-sim").addEventListener("change", (ev) => navigate({ id: ev.target.value }));
  $("#f-tenant").addEventListener("change", (ev) => navigate({ tenant: ev.target.value, id: "" }));
  window.addEventListener("popstate", load);
  brokerApi.onKey(load);
  load();
})();
