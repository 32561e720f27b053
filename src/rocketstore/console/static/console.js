// The overview's live chart: messages in and out per second, fetched from /api/rates every 2 s, drawn by uPlot.
(function () {
  var el = document.getElementById("rates-chart");
  if (!el || typeof uPlot === "undefined") return;
  var opts = {
    width: 860, height: 280,
    scales: { x: { time: true }, y: { range: function (u, min, max) { return [0, Math.max(1, max * 1.1)]; } } },
    series: [{}, { label: "in/s", stroke: "#2a6fdb", width: 2, points: { show: false } }, { label: "out/s", stroke: "#e8741f", width: 2, points: { show: false } }],
    axes: [{}, { label: "messages/s" }]
  };
  var plot = new uPlot(opts, [[], [], []], el);
  function last(a) { return a.length ? a[a.length - 1] : 0; }
  function refresh() {
    fetch(el.dataset.src, { cache: "no-store" }).then(function (r) { return r.json(); }).then(function (d) {
      plot.setData([d.t, d["in"], d.out]);
      document.getElementById("rate-in").textContent = last(d["in"]);
      document.getElementById("rate-out").textContent = last(d.out);
      document.getElementById("rate-samples").textContent = d.t.length;
      var peak = Math.max.apply(null, [0].concat(d["in"]));
      el.dataset.peakIn = peak;
      el.dataset.samples = d.t.length;
    }).catch(function () {});
  }
  refresh();
  setInterval(refresh, 2000);
})();
