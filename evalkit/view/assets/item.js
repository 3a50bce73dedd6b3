/* evalkit view: one question: its text, options, gold, images as sent, every variant, every answer. */
(function (K) {
  "use strict";
  var S = K.S, h = K.h, num = K.num, main = K.main, table = K.table, params = K.params,
    setHash = K.setHash, setTab = K.setTab, setStatus = K.setStatus, openPos = K.openPos, PAGE = K.PAGE,
    STATUS = K.STATUS, BIT = K.BIT, WORD = K.WORD, MARK = K.MARK;

  // ---------------------------------------------------------------- one question
  function showItem(id) {
    S.view = "item";
    setTab(null);
    var pos = S.pos.get(id);
    if (pos === undefined) {
      main().replaceChildren(h("h1", { text: "No question " + id }),
        h("p", null, "This site has no question with that id. ", h("a", { href: "#view=samples", text: "All samples" })));
      return;
    }
    S.itemPos = pos;
    main().replaceChildren(h("p", { class: "muted", text: "Loading " + id + "\u2026" }));
    K.withItems(pos, function (d) { if (S.itemPos === pos && S.view === "item") renderItem(d, pos); });
  }
  function navList() { return S.filter && S.matches && S.matches.indexOf(S.itemPos) >= 0 ? S.matches : null; }
  function neighbour(d) {
    var list = navList();
    if (list) { var i = list.indexOf(S.itemPos) + d; return i >= 0 && i < list.length ? list[i] : -1; }
    var p = S.itemPos + d;
    return p >= 0 && p < S.ids.length ? p : -1;
  }
  function backHash() {
    var p = new URLSearchParams(); p.set("view", "samples");
    var f = S.filter;
    if (f) { if (f.m) p.set("m", f.m); if (f.st) p.set("st", f.st); if (f.cat) p.set("cat", f.cat);
      if (f.dis) p.set("dis", f.dis); if (f.q) p.set("q", f.q); }
    var list = navList();
    var page = list ? Math.floor(list.indexOf(S.itemPos) / PAGE) : 0;
    if (page > 0) p.set("p", String(page));
    return "#" + p.toString();
  }
  function renderItem(d, pos) {
    var models = S.meta.models, prev = neighbour(-1), next = neighbour(1), list = navList();
    var where = list ? (list.indexOf(pos) + 1) + " of " + num(list.length) + " shown" : (pos + 1) + " of " + num(S.ids.length);
    var nav = h("nav", { class: "itemnav", "aria-label": "Samples" },
      h("a", { href: backHash(), text: "\u2190 samples" }), h("span", { class: "muted", text: where }),
      prev >= 0 ? h("a", { href: "#item=" + encodeURIComponent(S.ids[prev]), rel: "prev", text: "previous (k)" }) : null,
      next >= 0 ? h("a", { href: "#item=" + encodeURIComponent(S.ids[next]), rel: "next", text: "next (j)" }) : null);
    var opts = Object.keys(d.o || {});
    var text = h("div", null,
      d.fr ? h("p", { class: "placeholder", text: "The question's data could not be loaded; this is the prompt the records kept." }) : null,
      h("p", { class: "question", text: d.q }),
      opts.length ? h("ol", { class: "options", "aria-label": "Options" }, opts.map(function (k) {
        var gold = k === d.g;
        return h("li", { class: gold ? "gold" : null }, h("span", { class: "letter", text: k }), d.o[k],
          gold ? h("strong", { text: " \u2014 gold" }) : null);
      })) : null,
      h("p", null, "Gold answer: ", h("strong", { class: "gold-answer", text: d.g })));
    var first = d.v[0] || { im: [] };
    var head = h("div", { class: "qhead" }, text, images(first.im, first.a));
    var out = [nav, h("h1", { class: "mono qid", text: d.id }), h("p", { class: "muted", text: S.meta.facet + ": " + (d.cat || "\u2014") }),
      findingsBox(S.meta.fq && S.meta.fq[d.id]), head].filter(Boolean);
    if (d.v.length > 1) out.push(h("h2", { text: "Variants at a glance" }), glance(d, models));
    d.v.forEach(function (v, i) { var sec = variantEl(v, d, models); sec.id = "variant-" + i; out.push(sec); });
    main().replaceChildren.apply(main(), out);
    document.title = d.id + " \u2014 evalkit view";
  }
  function findingsBox(ks) {
    if (!ks || !ks.length) return null;
    return h("section", { class: "findings", "aria-label": "Data findings" }, h("h2", { text: "Data findings" }),
      h("ul", null, ks.map(function (k) {
        var f = S.meta.fd[k];
        return h("li", null, h("strong", { text: f[0] + " \u00b7 " + f[1] }), ": " + f[2] + (f[3] ? " (" + f[3] + ")" : ""));
      })));
  }
  function glance(d, models) {
    return table(["variant", "gold"].concat(models), d.v.map(function (v, i) {
      var go = h("button", { type: "button", class: "linkish", text: v.l, onclick: function () {
        var el = document.getElementById("variant-" + i); if (el) el.scrollIntoView(); } });
      return [go, v.g].concat(v.a.map(function (a) {
        if (!a) return h("span", { class: "badge s-missing", text: MARK.missing + " " + WORD.missing });
        return h("span", { class: "badge s-" + a.s, text: MARK[a.s] + " " + (a.p != null ? a.p : WORD[a.s]) });
      }));
    }));
  }
  function images(list, answers) {
    if (!list || !list.length) return h("div");
    var sent = null;
    (answers || []).forEach(function (a) { if (!sent && a && a.sz && a.sz.length) sent = a.sz; });
    return h("div", { class: "imgs" }, list.map(function (im, i) {
      var cap = [];
      if (sent && sent[i]) cap.push("as sent: " + sent[i][0] + "\u00d7" + sent[i][1] + " px");
      var link = im.f ? h("a", { href: im.f, text: "full image" }) : h("span", { text: "image inside the data file" });
      if (!im.t) return h("figure", null, h("div", { class: "placeholder", role: "img", "aria-label": "image unavailable",
        text: im.x || "image unavailable" }), h("figcaption", null, link));
      return h("figure", null, h("img", { src: im.t, width: im.w, height: im.h,
        alt: "image " + (i + 1) + " as sent to the model" + (sent && sent[i] ? " (" + sent[i][0] + "\u00d7" + sent[i][1] + ")" : "") }),
        h("figcaption", null, cap.join(" \u00b7 ") + (cap.length ? " \u00b7 " : ""), link));
    }));
  }
  function variantEl(v, d, models) {
    var sec = h("section", { class: "variant", "aria-label": "variant " + v.l },
      h("h2", { text: d.v.length > 1 ? "Variant: " + v.l : "Answers" }),
      h("p", null, "Gold: ", h("strong", { text: v.g }), " \u00b7 query ", h("span", { class: "mono", text: v.id })));
    if (v.q) sec.appendChild(h("p", { class: "question", text: v.q }));
    if (v.o) sec.appendChild(h("ol", { class: "options" }, Object.keys(v.o).map(function (k) {
      return h("li", { class: k === v.g ? "gold" : null }, h("span", { class: "letter", text: k }), v.o[k]);
    })));
    if (v.pr != null) sec.appendChild(h("details", null, h("summary", { text: "prompt as sent" }),
      h("pre", { text: (S.meta.pp || "") + v.pr + (S.meta.ps || "") })));
    if (d.v.length > 1 && v.im && v.im.length && v !== d.v[0] && JSON.stringify(v.im) !== JSON.stringify(d.v[0].im))
      sec.appendChild(images(v.im, v.a));
    sec.appendChild(h("div", { class: "answers" }, models.map(function (label, k) {
      var imgs = v.imm && v.imm[k] && v.imm[k].length ? images(v.imm[k], [v.a[k]]) : null;
      return answerEl(v.a[k], label, S.meta.modes[k], imgs);
    })));
    return sec;
  }
  function verdictText(ok, parsed, method) {
    var what = parsed == null ? "unparsed" : ok ? "\u2713 right" : "\u2717 wrong";
    return what + (parsed != null ? " \u00b7 " + parsed : "") + (method ? " (" + method + ")" : "");
  }
  function answerEl(a, label, mode, imgs) {
    var box = h("div", { class: "answer" }, h("h3", { text: label }));
    if (!a) { box.appendChild(h("p", { class: "badge s-missing", text: "no answer in this run" })); return box; }
    box.appendChild(h("p", null, h("span", { class: "badge s-" + a.s, text: MARK[a.s] + " " + WORD[a.s] }),
      a.ns ? h("span", { class: "muted", text: " \u00b7 not scored (answered to a question that has changed, or not in the run)" }) : null));
    if (a.err) box.appendChild(h("p", { class: "placeholder", text: "error (" + a.err + "): " + (a.em || "") }));
    else box.appendChild(h("pre", { class: "resp", "aria-label": label + " raw response", text: a.r == null ? "" : a.r }));
    var dl = h("dl", { class: "facts" });
    function fact(k, v) { if (v == null) return; dl.appendChild(h("dt", { text: k })); dl.appendChild(h("dd", null, v)); }
    fact("parsed", a.p == null ? "\u2014 (none)" : a.p);
    fact("parse method", a.m || "\u2014");
    if (!a.err) {
      fact(mode + " (this run)", verdictText(a.ok, a.p, null));
      if (a.o) fact(a.o.mode, verdictText(a.o.ok, a.o.p, a.o.m));
      else fact(mode === "official" ? "robust" : "official", "\u2014 (needs the question's data)");
    }
    if (a.x) Object.keys(a.x).forEach(function (k) {
      var v = a.x[k];
      fact(k.replace(/_/g, " "), h("pre", { text: typeof v === "string" ? v : JSON.stringify(v, null, 1) }));
    });
    fact("latency", a.lat != null ? a.lat.toFixed(3) + " s" : null);
    fact("tokens", num(a["in"]) + " in \u00b7 " + num(a.out) + " out" + (a.cin ? " \u00b7 " + num(a.cin) + " cached" : "") +
      (a.rt ? " \u00b7 " + num(a.rt) + " reasoning" : ""));
    fact("cost", a.err ? null : a.cost);
    fact("cached", a.c ? "yes" : "no");
    fact("finish", a.fin === undefined ? "stop" : a.fin);
    if (a.via) fact("via", a.via);
    if (a.sb) fact("served by", a.sb);
    if (a.sz && a.sz.length) fact("images sent", a.sz.map(function (s) { return s[0] + "\u00d7" + s[1]; }).join(", "));
    box.appendChild(dl);
    if (imgs) box.appendChild(imgs);
    return box;
  }


  K.keys.item = function (e) {
    if (e.key === "j" || e.key === "k") {
      var p = neighbour(e.key === "j" ? 1 : -1);
      if (p >= 0) { e.preventDefault(); K.openPos(p); }
    } else if (e.key === "u" || e.key === "Escape") { e.preventDefault(); location.hash = backHash(); }
  };
  K.showItem = showItem;
})(window.EVKV);
