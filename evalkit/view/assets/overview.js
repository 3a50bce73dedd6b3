/* evalkit view: the overview (leaderboard, official tables, counts, cost, plots, provenance). */
(function (K) {
  "use strict";
  var S = K.S, h = K.h, num = K.num, main = K.main, table = K.table, params = K.params,
    setHash = K.setHash, setTab = K.setTab, setStatus = K.setStatus, openPos = K.openPos, PAGE = K.PAGE,
    STATUS = K.STATUS, BIT = K.BIT, WORD = K.WORD, MARK = K.MARK;

  // ---------------------------------------------------------------- overview
  function showOverview() {
    S.view = "overview";
    setTab("overview");
    var m = S.meta, o = m.overview, single = m.models.length === 1;
    var out = [h("h1", { text: m.bench + (single ? " \u2014 " + m.models[0] : " \u2014 " + m.models.length + " models") })];
    if (m.notes.length) out.push(h("ul", { class: "notes" }, m.notes.map(function (n) { return h("li", { text: n }); })));
    o.runs.forEach(function (r) {
      if (r.banner && r.banner.length) out.push(h("div", { class: "notes" },
        h("strong", { text: r.label + ": " }), r.banner.join(" \u00b7 ")));
    });
    out.push(h("h2", { text: single ? "Headline" : "Leaderboard" }), leaderboard(o.leaderboard));
    if (o.tables.length) {
      out.push(h("h2", { text: "Official tables" }));
      o.tables.forEach(function (t) {
        out.push(h("h3", { text: t.title + (t.of && !single ? " \u2014 " + t.of : "") }));
        if (t.head.length) out.push(table(t.head, t.rows));  /* a sample's table left out: its note says why */
        if (t.note) out.push(h("p", { class: "muted", text: t.note }));
      });
    }
    out.push(h("h2", { text: "Counts" }), countsTable(o.counts, m.models));
    out.push(h("h2", { text: "Cost and cache" }), costTable(o.cost, m.models));
    var speeds = o.cost.filter(function (c) { return c.speed; });
    if (speeds.length) out.push(h("ul", null, o.cost.map(function (c, i) {
      return c.speed ? h("li", null, h("strong", { text: m.models[i] + ": " }), c.speed) : null;
    })));
    if (o.plots.some(function (p) { return p.length; })) {
      out.push(h("h2", { text: "Plots" }));
      o.plots.forEach(function (list, i) {
        if (!list.length) return;
        if (!single) out.push(h("h3", { text: m.models[i] }));
        out.push(h("div", { class: "plots" }, list.map(function (p) {
          return h("figure", null, h("img", { src: p.src, alt: p.title + " (" + m.models[i] + ")", loading: "lazy" }),
            h("figcaption", { text: p.title }));
        })));
      });
    }
    out.push(h("h2", { text: "Runs and provenance" }), h("div", { class: "runs" }, o.runs.map(runFacts)));
    main().replaceChildren.apply(main(), out);
  }
  function leaderboard(rows) {
    var head = ["#", "model", "metric", "value", "95% CI", "n", ""];
    return table(head, rows.map(function (r, i) {
      var bar = h("div", { class: "bar", "aria-hidden": "true" });
      if (typeof r.value === "number") {
        var scale = r.value > 1.5 || (r.hi != null && r.hi > 1.5) ? 100 : 1;
        bar.appendChild(h("div", { class: "fill", style: "width:" + clamp(r.value / scale) + "%" }));
        if (r.lo != null && r.hi != null) bar.appendChild(h("div", { class: "ci",
          style: "left:" + clamp(r.lo / scale) + "%;width:" + Math.max(0.5, clamp(r.hi / scale) - clamp(r.lo / scale)) + "%" }));
      }
      var label = r.incomplete ? r.label + " (" + r.incomplete + ")" : r.label;  /* summary.json's complete */
      return [i + 1, label, r.metric || "\u2014", r.value, r.lo == null ? "\u2014" : num(r.lo) + " \u2013 " + num(r.hi),
        r.n, bar];
    }), function (i) { return i === 0 || i === 3 || i === 5; });
  }
  function clamp(x) { return Math.max(0, Math.min(100, x * 100)); }
  function countsTable(c, models) {
    var rows = c.keys.map(function (k, j) { return [k].concat(c.values.map(function (v) { return v[j]; })); });
    rows.push(["queries"].concat(c.queries));
    rows.push(["missing"].concat(c.missing));
    return table(["what"].concat(models), rows, function (i) { return i > 0; });
  }
  function costTable(cost, models) {
    var keys = [["input tokens", "input_tokens"], ["output tokens", "output_tokens"], ["reasoning tokens", "reasoning_tokens"],
      ["cost", "cost"], ["cache hits", "hits"], ["cache misses", "misses"]];
    return table(["what"].concat(models), keys.map(function (k) {
      return [k[0]].concat(cost.map(function (c) { return c[k[1]]; }));
    }), function (i) { return i > 0; });
  }
  function runFacts(r) {
    var dl = h("dl");
    function fact(k, v) { if (v == null || v === "" || (Array.isArray(v) && !v.length)) return;
      dl.appendChild(h("dt", { text: k })); dl.appendChild(h("dd", null, v)); }
    fact("directory", h("a", { href: r.link, text: r.dir }));
    fact("model", r.model);
    fact("mode", r.mode);
    fact("items \u00b7 queries", num(r.items) + " \u00b7 " + num(r.queries) + (r.missing ? " (" + num(r.missing) + " missing)" : ""));
    fact("complete", r.complete ? "yes" : "no");
    fact("evalkit", r.version);
    fact("official source", r.source);
    fact("deviations", r.deviations.join("; "));
    if (r.modes) fact("parser modes", "parsed in " + r.modes.mode + "; in " + r.modes.other_mode + " mode " +
      r.modes.answers_differ + " of " + r.modes.compared + " answers read differently, " + r.modes.verdicts_differ + " verdicts change");
    fact("structured outputs", r.structured);
    fact("judge", r.judge);
    fact("hint", r.hint);
    fact("notes", r.notes.join("; "));
    if (!r.has_manifest) fact("manifest", "none (written before manifest.json existed)");
    r.manifest.forEach(function (kv) {
      fact(kv[0], typeof kv[1] === "object" ? h("pre", { text: JSON.stringify(kv[1], null, 1) }) : String(kv[1]));
    });
    fact("settings", h("pre", { text: JSON.stringify(r.settings, null, 1) }));
    return h("details", { open: S.meta.models.length === 1 }, h("summary", { text: r.label }), dl);
  }


  K.showOverview = showOverview;
})(window.EVKV);
