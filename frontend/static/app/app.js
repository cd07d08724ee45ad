/* Millstream dashboard: lays out DAGs with dagre, draws the throughput and checkpoint charts
   with uPlot, opens and closes Checkpoints history rows, and reacts to the `job-action` events that dashboard actions announce (HX-Trigger).
   Everything else is htmx attributes in the templates. */
(function () {
  "use strict";

  var SVG = "http://www.w3.org/2000/svg";

  // Positions the server-rendered node boxes of one .dag element and draws its edges.
  function layoutDag(el) {
    var spec = JSON.parse(el.getAttribute("data-dag"));
    var g = new dagre.graphlib.Graph({ multigraph: true });
    g.setGraph({ rankdir: "LR", nodesep: 30, ranksep: 90, edgesep: 20, marginx: 16, marginy: 16 });
    g.setDefaultEdgeLabel(function () { return {}; });
    spec.nodes.forEach(function (n) { g.setNode(n.id, { width: n.width, height: n.height }); });
    spec.edges.forEach(function (e, i) {
      // a label box so dagre keeps room for the ship strategy beside the edge
      g.setEdge(e.source, e.target, { label: e.label, width: 8 * e.label.length + 12, height: 18, labelpos: "c" }, "e" + i);
    });
    dagre.layout(g);
    var size = g.graph();
    el.style.width = Math.ceil(size.width) + "px";
    el.style.height = Math.ceil(size.height) + "px";
    el.querySelectorAll(".dag-node").forEach(function (box) {
      var n = g.node(box.getAttribute("data-node-id"));
      if (!n) return;
      box.style.left = Math.round(n.x - n.width / 2) + "px";
      box.style.top = Math.round(n.y - n.height / 2) + "px";
    });
    var svg = el.querySelector("svg.dag-edges");
    svg.setAttribute("width", Math.ceil(size.width));
    svg.setAttribute("height", Math.ceil(size.height));
    svg.innerHTML = '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#8a94a6"/></marker></defs>';
    g.edges().forEach(function (ref) {
      var e = g.edge(ref);
      var d = e.points.map(function (p, i) { return (i ? "L" : "M") + p.x.toFixed(1) + "," + p.y.toFixed(1); }).join(" ");
      var path = document.createElementNS(SVG, "path");
      path.setAttribute("d", d);
      path.setAttribute("class", "dag-edge");
      path.setAttribute("marker-end", "url(#arrow)");
      svg.appendChild(path);
      if (e.label) {
        var text = document.createElementNS(SVG, "text");
        text.setAttribute("x", e.x);
        text.setAttribute("y", e.y + 4);
        text.setAttribute("class", "dag-edge-label");
        text.textContent = e.label;
        svg.appendChild(text);
      }
    });
    el.setAttribute("data-laid-out", "true");
  }

  var charts = new WeakMap();

  function chartData(spec) {
    return [spec.x].concat(spec.series.map(function (s) { return s.data; }));
  }

  var PALETTE = ["#2f6fdb", "#d9534f", "#2e9e6a", "#b07d12", "#7b4fd6", "#1597a8", "#c2458a", "#5f6b7a"];

  function pad2(n) { return (n < 10 ? "0" : "") + n; }

  // ISO 8601 dates, as every other time on the dashboard (uPlot's default is "11/25/26 6:35am").
  function isoDate(d) { return d.getFullYear() + "-" + pad2(d.getMonth() + 1) + "-" + pad2(d.getDate()); }
  function isoTime(d) { return pad2(d.getHours()) + ":" + pad2(d.getMinutes()) + ":" + pad2(d.getSeconds()); }

  function timeTicks(u, vals) {
    // Times on every tick, the date under the first one and wherever the day changes.
    var lastDay = null;
    return vals.map(function (v) {
      var d = new Date(v * 1000), day = isoDate(d);
      var label = day !== lastDay ? isoTime(d) + "\n" + day : isoTime(d);
      lastDay = day;
      return label;
    });
  }

  function showEmpty(el, spec) {
    // An empty chart is a blank box: say why instead.
    var note = el.parentNode.querySelector(".chart-empty");
    if (note) note.hidden = spec.x.length > 0;
  }

  function makeChart(el, spec) {
    var width = Math.max(el.clientWidth, 400);
    var opts = {
      width: width, height: 320,
      series: [{ value: function (u, v) { return v == null ? "–" : isoDate(new Date(v * 1000)) + " " + isoTime(new Date(v * 1000)); } }].concat(spec.series.map(function (s, i) {
        return { label: s.label, stroke: PALETTE[i % PALETTE.length], width: 2,
                 value: function (u, v) { return v == null ? "–" : v.toFixed(1) + "/s"; } };
      })),
      axes: [{ values: timeTicks, size: 50 }, { label: "records/s", size: 70 }],
      // Rates start at 0, so a flat line near its maximum does not look like a collapse.
      scales: { x: { time: true }, y: { range: function (u, lo, hi) { return [0, Math.max(hi * 1.1, 1)]; } } },
    };
    showEmpty(el, spec);
    var chart = new uPlot(opts, chartData(spec), el);
    el.uplot = chart;  // for the browser tests and the console
    charts.set(el, { chart: chart, n: spec.series.length });
    return chart;
  }

  function updateChart(el, spec) {
    var c = charts.get(el);
    if (!c || c.n !== spec.series.length) {
      if (c) c.chart.destroy();
      el.innerHTML = "";
      makeChart(el, spec);
    } else {
      c.chart.setData(chartData(spec));
      showEmpty(el, spec);
    }
    el.setAttribute("data-points", String(spec.x.length));
  }

  function initChart(el) {
    if (charts.has(el)) return;
    var script = el.parentNode.querySelector("script.series-data");
    var spec = JSON.parse(script.textContent);
    makeChart(el, spec);
    el.setAttribute("data-points", String(spec.x.length));
    // Polling fallback for browsers without EventSource.
    if (el.getAttribute("data-live") === "true" && !window.EventSource) {
      var timer = setInterval(function () {
        if (!document.body.contains(el)) { clearInterval(timer); return; }
        fetch(el.getAttribute("data-poll")).then(function (r) { return r.json(); }).then(function (s) { updateChart(el, s); });
      }, 2000);
    }
  }

  // --- Checkpoints tab -------------------------------------------------------------
  var cpCharts = new WeakMap();

  function fmtBytes(v) {
    if (v == null) return "–";
    var units = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i ? v.toFixed(1) : Math.round(v)) + " " + units[i];
  }

  function fmtMs(v) {
    if (v == null) return "–";
    return v < 1000 ? Math.round(v) + " ms" : (v / 1000).toFixed(1) + " s";
  }

  function cpData(spec) { return [spec.x, spec.duration, spec.checkpointed, spec.state]; }

  // Duration (left axis) and sizes (right axis) of completed checkpoints over their ids.
  function makeCpChart(el, spec) {
    el.innerHTML = "";
    var ints = function (u, vals) { return vals.map(function (v) { return Number.isInteger(v) ? String(v) : ""; }); };
    var opts = {
      width: Math.max(el.clientWidth - 24, 400), height: 260,
      scales: { x: { time: false }, ms: { range: function (u, lo, hi) { return [0, Math.max(hi * 1.1, 1)]; } },
                bytes: { range: function (u, lo, hi) { return [0, Math.max(hi * 1.1, 1)]; } } },
      series: [
        { label: "Checkpoint", value: function (u, v) { return v == null ? "–" : "#" + v; } },
        { label: "End-to-end duration", scale: "ms", stroke: "#2f6fdb", width: 2, points: { show: true, size: 5 },
          value: function (u, v) { return fmtMs(v); } },
        { label: "Checkpointed size", scale: "bytes", stroke: "#2e9e6a", width: 4, value: function (u, v) { return fmtBytes(v); } },
        { label: "State size", scale: "bytes", stroke: "#b07d12", width: 1.5, dash: [6, 4], value: function (u, v) { return fmtBytes(v); } },
      ],
      axes: [
        { label: "checkpoint id", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000], values: ints },
        { scale: "ms", label: "duration", size: 70, values: function (u, vals) { return vals.map(fmtMs); } },
        { scale: "bytes", side: 1, label: "size", size: 80, grid: { show: false }, values: function (u, vals) { return vals.map(fmtBytes); } },
      ],
    };
    cpCharts.set(el, new uPlot(opts, cpData(spec), el));
  }

  function updateCpChart(el, spec) {
    if (spec && spec.x.length) {
      var chart = cpCharts.get(el);
      if (chart) chart.setData(cpData(spec)); else makeCpChart(el, spec);
    }
    el.setAttribute("data-points", String(spec ? spec.x.length : 0));
  }

  function initCpChart(el) {
    if (el.hasAttribute("data-points")) return;
    var script = el.parentNode.querySelector("script.cp-series-data");
    updateCpChart(el, JSON.parse(script.textContent));
  }

  // The history block is re-rendered every second; its open detail rows survive (hx-preserve):
  // mark their toggles open again.
  function syncCpToggles() {
    document.querySelectorAll(".cp-detail.open").forEach(function (row) {
      var b = document.querySelector('.cp-toggle[aria-controls="' + row.id + '"]');
      if (b) b.setAttribute("aria-expanded", "true");
    });
  }

  function closedDetailRow(id) {
    var tr = document.createElement("tr");
    tr.id = id; tr.className = "cp-detail"; tr.hidden = true;
    tr.setAttribute("hx-preserve", "true");
    return tr;
  }

  document.addEventListener("click", function (evt) {
    var b = evt.target.closest && evt.target.closest(".cp-toggle");
    if (!b) return;
    var row = document.getElementById(b.getAttribute("aria-controls"));
    if (!row) return;
    if (row.classList.contains("open")) {  // a fresh element: a self-refreshing cell stops with the old one
      row.replaceWith(closedDetailRow(row.id));
      b.setAttribute("aria-expanded", "false");
      return;
    }
    row.classList.add("open");
    row.hidden = false;
    row.innerHTML = '<td colspan="8" class="muted small">Loading…</td>';
    b.setAttribute("aria-expanded", "true");
    htmx.ajax("GET", b.getAttribute("data-detail"), { target: row, swap: "innerHTML" });
  });

  // Log tails open at their newest line and follow it as the live stream replaces them, unless the
  // reader scrolled up to read: then they stay where the reader is (until scrolled back down).
  var logFollow = {};

  function followLog(el) {
    if (el.hasAttribute("data-follow-set")) return;
    el.setAttribute("data-follow-set", "true");
    var id = el.id || "log";
    if (logFollow[id] !== false) {
      el.scrollTop = el.scrollHeight;
    } else if (logFollow[id + ":top"] != null) {
      el.scrollTop = logFollow[id + ":top"];
    }
    el.addEventListener("scroll", function () {
      logFollow[id] = el.scrollTop + el.clientHeight >= el.scrollHeight - 4;
      logFollow[id + ":top"] = el.scrollTop;
    });
  }

  // Flame Graph tab: poll the vertex's graph until its samples are there (Flink answers
  // endTimestamp -3 while sampling, -2 when nothing runs), then draw it with d3-flame-graph.
  function flameParams(el) {
    var box = el.closest("section") || document;
    var vertex = box.querySelector(".flame-vertex");
    var type = box.querySelector('input[name="flame-type"]:checked');
    return { vertex: vertex ? vertex.value : "", type: type ? type.value : "full" };
  }

  function loadFlameGraph(el) {
    var p = flameParams(el);
    var status = (el.closest("section") || document).querySelector(".flame-status");
    var token = (el._flameToken || 0) + 1;
    el._flameToken = token;
    clearTimeout(el._flameTimer);
    if (!p.vertex) return;
    var url = "/ui/jobs/" + el.getAttribute("data-jid") + "/flamegraph/data?vertex=" + encodeURIComponent(p.vertex) + "&type=" + p.type;
    fetch(url).then(function (r) { return r.json(); }).then(function (g) {
      if (el._flameToken !== token || !document.body.contains(el)) return;  // superseded or swapped away
      if (g.endTimestamp === -2 || (g.endTimestamp < 0 && el.getAttribute("data-live") !== "true")) {
        status.textContent = "Nothing to sample: the vertex has no running subtask.";
        return;
      }
      if (g.endTimestamp < 0 || !g.data) {
        status.textContent = "Sampling the task threads…";
        el._flameTimer = setTimeout(function () { loadFlameGraph(el); }, 1000);
        return;
      }
      status.textContent = g.data.value + " samples, taken at " + isoDate(new Date(g.endTimestamp)) + " " + isoTime(new Date(g.endTimestamp)) + "."
        + (g.data.value ? "" : " None of this type.");
      el.innerHTML = "";
      var chart = flamegraph().width(Math.max(el.clientWidth - 20, 300)).cellHeight(18)
        .transitionDuration(0).minFrameSize(1).sort(true).selfValue(false);
      d3.select(el).datum(g.data).call(chart);
      // Refresh once the JobManager's kept samples are due to be replaced (a minute).
      el._flameTimer = setTimeout(function () { loadFlameGraph(el); }, 60000);
    }).catch(function () {
      if (el._flameToken === token) status.textContent = "The flame graph could not be loaded.";
    });
  }

  function initFlameGraph(el) {
    if (el.hasAttribute("data-started")) return;
    el.setAttribute("data-started", "true");
    var box = el.closest("section") || document;
    box.querySelectorAll(".flame-vertex, input[name=flame-type]").forEach(function (c) {
      c.addEventListener("change", function () { loadFlameGraph(el); });
    });
    loadFlameGraph(el);
  }

  function init(root) {
    (root || document).querySelectorAll("pre.log").forEach(followLog);
    (root || document).querySelectorAll(".dag:not([data-laid-out])").forEach(layoutDag);
    (root || document).querySelectorAll(".throughput-chart").forEach(initChart);
    (root || document).querySelectorAll(".cp-chart").forEach(initCpChart);
    (root || document).querySelectorAll(".flame-graph").forEach(initFlameGraph);
    syncCpToggles();
  }

  document.addEventListener("DOMContentLoaded", function () { init(document); });
  // afterSwap runs before the browser paints, so a re-rendered graph never flashes unlaid.
  document.body.addEventListener("htmx:afterSwap", function (evt) { init(document); });
  document.body.addEventListener("htmx:oobAfterSwap", function (evt) { init(document); });
  // The throughput stream sends JSON, not HTML: feed it to the chart.
  document.body.addEventListener("htmx:sseMessage", function (evt) {
    if (evt.target.classList && evt.target.classList.contains("cp-series-listener")) {
      var cp = document.getElementById("checkpoint-chart");
      if (cp) updateCpChart(cp, JSON.parse(evt.detail.data));
      return;
    }
    if (evt.target.id === "cp-history") syncCpToggles();
    if (!evt.target.classList || !evt.target.classList.contains("series-listener")) return;
    var el = document.getElementById("throughput-chart");
    if (el) updateChart(el, JSON.parse(evt.detail.data));
  });
  // Actions announce themselves; a successful cancel disables its button until the stream replaces
  // it, and a savepoint form that did its work closes. A stop leaves Cancel usable: if its savepoint
  // fails the job keeps running, and a stop that hangs may still need a cancel.
  document.body.addEventListener("job-action", function (evt) {
    var d = evt.detail || {};
    if (!d.ok) return;
    if (d.action === "savepoint" || d.action === "stop") {
      document.querySelectorAll("#savepoint-action, #stop-action, #savepoint-tab-action").forEach(function (el) {
        el.open = false;
        var f = el.querySelector("form");
        if (f) f.reset();
      });
    }
    if (d.action === "cancel") {
      var b = document.getElementById("cancel-job");
      if (b) { b.disabled = true; b.textContent = "Cancelling…"; }
    }
  });
})();
