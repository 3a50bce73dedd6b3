/* evalkit view: the samples table: filters, lazy rows, pages, the j/k cursor. */
(function (K) {
  "use strict";
  var S = K.S, h = K.h, num = K.num, main = K.main, table = K.table, params = K.params,
    setHash = K.setHash, setTab = K.setTab, setStatus = K.setStatus, openPos = K.openPos, PAGE = K.PAGE,
    STATUS = K.STATUS, BIT = K.BIT, WORD = K.WORD, MARK = K.MARK;

  // ---------------------------------------------------------------- samples
  function readFilter(p) {
    return { m: p.get("m") || "", st: p.get("st") || "", cat: p.get("cat") || "", dis: p.get("dis") || "",
      q: (p.get("q") || "").trim().toLowerCase() };
  }
  function sameFilter(a, b) { return a && b && a.m === b.m && a.st === b.st && a.cat === b.cat && a.dis === b.dis && a.q === b.q; }
  function showSamples(p) {
    S.view = "samples";
    setTab("samples");
    var f = readFilter(p);
    if (!sameFilter(f, S.filter)) { S.filter = f; S.matches = []; S.matchedUpTo = 0; S.cursor = 0; }
    S.page = Math.max(0, parseInt(p.get("p") || "0", 10) || 0);
    extendMatches();
    var form = filterForm(f);
    main().replaceChildren(h("h1", { text: "Samples" }), form,
      h("p", { id: "count", class: "count", "aria-live": "polite" }),
      h("ol", { id: "rows", class: "rows" }), h("nav", { id: "pager", class: "pager", "aria-label": "Pages" }));
    renderRows();
  }
  function filterForm(f) {
    var m = S.meta;
    function sel(id, label, value, options) {
      return h("label", { for: id }, label, h("select", { id: id, name: id }, options.map(function (o) {
        return h("option", { value: o[0], selected: o[0] === value, text: o[1] });
      })));
    }
    var cats = [["", "all"]], seen = {};
    m.cats.forEach(function (c) {
      var parts = c.split("/");
      for (var i = 1; i < parts.length; i++) {
        var pre = parts.slice(0, i).join("/") + "/";
        if (!seen[pre]) { seen[pre] = 1; cats.push([pre, pre + "\u2026"]); }
      }
      cats.push([c, c || "(none)"]);
    });
    var form = h("form", { class: "filters", role: "search", onsubmit: function (e) { e.preventDefault(); } },
      sel("f-m", "Model", f.m, [["", "any model"]].concat(m.models.map(function (x, i) { return [String(i), x]; }))),
      sel("f-st", "Outcome", f.st, [["", "any"]].concat(STATUS.map(function (s) { return [s, WORD[s]]; }))),
      sel("f-cat", m.facet.charAt(0).toUpperCase() + m.facet.slice(1), f.cat, cats),
      sel("f-dis", "Disagreement", f.dis, [["", "any"], ["models", "models disagree"], ["variants", "variants disagree"]]),
      h("label", { for: "f-q" }, "Search", h("input", { id: "f-q", type: "search", value: f.q,
        placeholder: "id, question, answer letter" })));
    form.addEventListener("change", applyForm);
    form.addEventListener("input", function (e) { if (e.target.id === "f-q") { clearTimeout(S.typing); S.typing = setTimeout(applyForm, 150); } });
    return form;
  }
  function applyForm() {
    var p = new URLSearchParams();
    p.set("view", "samples");
    [["f-m", "m"], ["f-st", "st"], ["f-cat", "cat"], ["f-dis", "dis"], ["f-q", "q"]].forEach(function (x) {
      var v = document.getElementById(x[0]).value.trim();
      if (v) p.set(x[1], v);
    });
    setHash(p, true);
    S.filter = readFilter(p); S.matches = []; S.matchedUpTo = 0; S.page = 0; S.cursor = 0;
    extendMatches();
    renderRows();
  }
  function matches(i, f) {
    var r = S.rows[i];
    if (!r) return false;
    if (f.cat) {
      var c = S.meta.cats[r[0]];
      if (f.cat.slice(-1) === "/" ? c.indexOf(f.cat) !== 0 : c !== f.cat) return false;
    }
    if (f.dis === "models" && !(r[2] & K.MODELS_DISAGREE)) return false;
    if (f.dis === "variants" && !(r[2] & K.VARIANTS_DISAGREE)) return false;
    if (f.st) {
      var bit = BIT[f.st], ok = false;
      if (f.m !== "") ok = (r[3 + Number(f.m)][0] & bit) !== 0;
      else for (var k = 3; k < r.length; k++) if (r[k][0] & bit) { ok = true; break; }
      if (!ok) return false;
    }
    if (f.q) {
      var text = S.search[i];
      if (text === undefined) {
        text = S.ids[i] + "\n" + r[1] + "\n" + S.meta.cats[r[0]];
        for (var j = 3; j < r.length; j++) text += "\n" + r[j][3];
        (S.meta.fq && S.meta.fq[S.ids[i]] || []).forEach(function (k) { text += "\n" + S.meta.fd[k][1]; });
        text = S.search[i] = text.toLowerCase();
      }
      if (text.indexOf(f.q) < 0) return false;
    }
    return true;
  }
  function extendMatches() {
    if (!S.filter) return;
    var upto = K.loadedRows();
    for (var i = S.matchedUpTo; i < upto; i++) if (matches(i, S.filter)) S.matches.push(i);
    S.matchedUpTo = upto;
  }
  function renderRowsIfShort() {
    var list = document.getElementById("rows");
    if (!list) return;
    if (list.children.length < PAGE) renderRows(); else renderCount();
  }
  function renderCount() {
    var total = S.ids.length, loaded = K.loadedRows(), n = S.matches.length;
    var first = n ? S.page * PAGE + 1 : 0, last = Math.min(n, (S.page + 1) * PAGE);
    var text = n ? "Showing " + num(first) + "\u2013" + num(last) + " of " + num(n) + " questions" : "No question matches";
    if (loaded < total) text += " (" + num(loaded) + " of " + num(total) + " loaded\u2026)";
    else if (n !== total) text += " (of " + num(total) + ")";
    setStatus(text);
    var pager = document.getElementById("pager");
    if (!pager) return;
    var pages = Math.max(1, Math.ceil(n / PAGE));
    pager.replaceChildren(
      h("button", { type: "button", disabled: S.page === 0, onclick: function () { goPage(S.page - 1); } }, "\u2190 previous"),
      h("span", { text: "page " + (S.page + 1) + " of " + pages }),
      h("button", { type: "button", disabled: S.page + 1 >= pages, onclick: function () { goPage(S.page + 1); } }, "next \u2192"));
  }
  function goPage(p) {
    var q = params(); q.set("view", "samples");
    if (p > 0) q.set("p", String(p)); else q.delete("p");
    S.page = p; S.cursor = 0;
    setHash(q, true);
    renderRows();
    window.scrollTo(0, 0);
  }
  function renderRows() {
    var list = document.getElementById("rows");
    if (!list) return;
    var start = S.page * PAGE, slice = S.matches.slice(start, start + PAGE);
    list.replaceChildren.apply(list, slice.map(function (pos, i) { return rowEl(pos, i); }));
    renderCount();
    markCursor(false);
  }
  function badge(r, label) {
    var mask = r[0], right = r[1], n = r[2];
    var status = n === 0 ? "missing" : right === n ? "correct" : worst(mask);
    var word = n > 1 ? right + "/" + n + " right" : WORD[status] + (r[3] ? " " + r[3] : "");
    return h("span", { class: "badge s-" + status, title: label + ": " + WORD[status] },
      MARK[status] + " ", h("span", { class: "who", text: label + ": " }), word);
  }
  function worst(mask) {
    var order = ["errors", "cutoffs", "refusals", "unparsed", "wrong"];
    for (var i = 0; i < order.length; i++) if (mask & BIT[order[i]]) return order[i];
    return "wrong";
  }
  function rowEl(pos, i) {
    var r = S.rows[pos], id = S.ids[pos], models = S.meta.models;
    var li = h("li", { class: "row", tabindex: "-1", "data-pos": pos, "data-i": i },
      h("div", null, h("a", { class: "id", href: "#item=" + encodeURIComponent(id), text: id }),
        h("span", { class: "cat", text: S.meta.cats[r[0]] })),
      h("div", null, h("p", { class: "q", text: r[1] }), findingsLine(S.meta.fq && S.meta.fq[id])),
      h("div", { class: "badges" }, models.map(function (label, k) { return badge(r[3 + k], label); })));
    li.addEventListener("click", function (e) { if (e.target.tagName !== "A") openPos(pos); });
    return li;
  }
  function findingsLine(ks) {
    if (!ks || !ks.length) return null;
    var fd = S.meta.fd;
    return h("p", { class: "flag", title: ks.map(function (k) { return fd[k][2]; }).join("\n"),
      text: "\u26a0 data finding: " + ks.map(function (k) { return fd[k][1] + " (" + fd[k][0] + ")"; }).join(", ") });
  }
  function markCursor(focus) {
    var list = document.getElementById("rows");
    if (!list) return;
    Array.prototype.forEach.call(list.children, function (li, i) {
      li.classList.toggle("cursor", i === S.cursor);
      if (i === S.cursor && focus) { li.focus({ preventScroll: true }); li.scrollIntoView({ block: "nearest" }); }
    });
  }
  function moveCursor(d) {
    var onPage = Math.min(PAGE, S.matches.length - S.page * PAGE);
    var next = S.cursor + d;
    if (next >= onPage && (S.page + 1) * PAGE < S.matches.length) { goPage(S.page + 1); S.cursor = 0; }
    else if (next < 0 && S.page > 0) { goPage(S.page - 1); S.cursor = PAGE - 1; }
    else S.cursor = Math.max(0, Math.min(onPage - 1, next));
    markCursor(true);
  }


  K.onRows = function () { extendMatches(); renderRowsIfShort(); };
  K.keys.samples = function (e) {
    if (e.key === "j" || e.key === "k") { e.preventDefault(); moveCursor(e.key === "j" ? 1 : -1); }
    else if ((e.key === "Enter" || e.key === "o") && S.matches.length) {
      var pos = S.matches[S.page * K.PAGE + S.cursor];
      if (pos !== undefined) { e.preventDefault(); K.openPos(pos); }
    }
  };
  K.showSamples = showSamples;
})(window.EVKV);
