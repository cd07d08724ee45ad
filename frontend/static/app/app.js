/* Millstream dashboard: lays out DAGs with dagre, draws the throughput chart with uPlot,
   and reacts to the `job-action` events that dashboard actions announce (HX-Trigger).
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

  function makeChart(el, spec) {
    var width = Math.max(el.clientWidth, 400);
    var opts = {
      width: width, height: 320,
      series: [{}].concat(spec.series.map(function (s, i) {
        return { label: s.label, stroke: PALETTE[i % PALETTE.length], width: 2,
                 value: function (u, v) { return v == null ? "–" : v.toFixed(1) + "/s"; } };
      })),
      axes: [{}, { label: "records/s", size: 70 }],
      scales: { x: { time: true } },
    };
    var chart = new uPlot(opts, chartData(spec), el);
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

  function init(root) {
    (root || document).querySelectorAll(".dag:not([data-laid-out])").forEach(layoutDag);
    (root || document).querySelectorAll(".throughput-chart").forEach(initChart);
  }

  document.addEventListener("DOMContentLoaded", function () { init(document); });
  // afterSwap runs before the browser paints, so a re-rendered graph never flashes unlaid.
  document.body.addEventListener("htmx:afterSwap", function (evt) { init(document); });
  document.body.addEventListener("htmx:oobAfterSwap", function (evt) { init(document); });
  // The throughput stream sends JSON, not HTML: feed it to the chart.
  document.body.addEventListener("htmx:sseMessage", function (evt) {
    if (!evt.target.classList || !evt.target.classList.contains("series-listener")) return;
    var el = document.getElementById("throughput-chart");
    if (el) updateChart(el, JSON.parse(evt.detail.data));
  });
  // Actions announce themselves; a successful cancel disables its button until the stream replaces it.
  document.body.addEventListener("job-action", function (evt) {
    if (evt.detail && evt.detail.action === "cancel" && evt.detail.ok) {
      var b = document.getElementById("cancel-job");
      if (b) { b.disabled = true; b.textContent = "Cancelling…"; }
    }
  });
})();
